// A run on PostgreSQL whose only worker was killed with kill -9 mid-run, as a user finds it afterwards:
// `status`, `report` and the view's workers say the same of it. The run is interrupted (its worker lost),
// its start is the same on both, and a lost worker holds nothing in flight. Its active time (`status`,
// `report`, the view) is the time it was worked on, up to the lost worker's last heartbeat (neither zero
// nor growing while nobody works on it), and a worker that continues it adds its own session to that.

import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { ViewData } from '../../src/view/data.js';
import { runWorkers } from '../../src/view/workers.js';
import { spawnCli } from '../helpers/child.js';
import { cli } from '../helpers/cli.js';
import { until } from '../helpers/fleet.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';
import { FAST_POLLS, images, makeRunEnv, type RunEnv, SANDBOX_KEY } from '../helpers/run-env.js';

const pg: Postgres = await startPostgres();
afterAll(() => pg.stop());

let env: RunEnv;
let url: string;
beforeEach(async () => {
  // Jobs that take seconds: the worker is killed with jobs in flight.
  env = await makeRunEnv({ balance: 1000, speed: 0.5 });
  url = pg.freshDatabase();
});
afterEach(async () => {
  await env.close();
});

const ENV = () => ({
  MEDIABATCH_API_KEY: SANDBOX_KEY,
  MEDIABATCH_BASE_URL: env.sandbox.baseUrl,
  MEDIABATCH_POLL_SCALE: FAST_POLLS,
});

async function json(args: string[]): Promise<Record<string, unknown>> {
  const r = await cli(['--state', url, ...args, '--json'], {
    env: ENV(),
    cwd: env.dir,
    now: () => new Date(),
  });
  expect(r.stderr.replace(/^Wrote .*\n$/, '')).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

describe('a fleet run whose worker was killed, as status, report and the view say it', () => {
  it('is interrupted everywhere, with the same start and active time, and its lost worker holds nothing', async () => {
    const file = await env.manifest({ name: 'killed', tasks: images(12), concurrency: 4 });
    const worker = spawnCli(['--state', url, 'run', file, '--yes', '--allow-local-output'], {
      cwd: env.dir,
      env: ENV(),
    });
    // Killed once its heartbeat has counted jobs in flight: what the lost worker's row still says.
    const heldAtLastBeat = () => {
      const store = openStore(url);
      try {
        return store.workers.list('killed')[0]?.inFlight ?? 0;
      } finally {
        store.close();
      }
    };
    // And while no POST is on its way: a task killed mid-submission is in doubt, and the run continued
    // below would end with it (exit 2), which is another test's story.
    const sending = () => {
      const store = openStore(url);
      try {
        return store.tasks.countTasksByState('killed').submitting;
      } finally {
        store.close();
      }
    };
    await until(async () => env.state().jobs.length >= 2 && heldAtLastBeat() > 0 && sending() === 0, 60_000);
    worker.proc.kill('SIGKILL');
    expect(await worker.exited).toBe('SIGKILL');

    const status = await json(['status', 'killed']);
    const report = await json(['report', 'killed']);
    const run = report['run'] as Record<string, unknown>;
    expect(status['state']).toBe('interrupted');
    expect(run['state']).toBe('interrupted');
    expect(run['started_at']).toBe(status['started_at']);
    const stopped = { reason: 'lost' };
    expect(status['stopped']).toMatchObject(stopped);
    expect((report['account'] as { run: { stopped: unknown } }).run.stopped).toMatchObject(stopped);

    // The worker held jobs when it was killed: it is lost and holds none, on the page as in status.
    const workers = status['workers'] as { state: string; in_flight: number; lost: boolean }[];
    expect(workers.map((w) => [w.state, w.in_flight, w.lost])).toEqual([['lost', 0, true]]);
    expect(heldAtLastBeat()).toBeGreaterThan(0);
    const store = openStore(url);
    let workedMs: number;
    try {
      const page = runWorkers(store, 'killed', new Date()).workers;
      expect(page.map((w) => [w.state, w.in_flight])).toEqual([['lost', 0]]);

      // Worked on from its start to the lost worker's last heartbeat: the same on the page an hour later.
      const recorded = store.runs.getRun('killed');
      const lastBeat = store.workers.list('killed')[0]?.heartbeatAt;
      if (recorded?.startedAt == null || lastBeat === undefined) throw new Error('no start or heartbeat');
      workedMs = lastBeat.getTime() - recorded.startedAt.getTime();
      expect(workedMs).toBeGreaterThan(1000);
      const later = new Date(Date.now() + 3_600_000);
      const head = new ViewData(store, { cwd: env.dir, now: () => later }).runHead(recorded);
      expect(head['active_ms']).toBe(workedMs);
    } finally {
      store.close();
    }
    expect(run['active_s']).toBe(Math.round(workedMs / 1000));
    expect(status['active_ms']).toBe(workedMs);

    // Continued by another worker: its session adds to the killed one's, not in place of it.
    const again = await cli(['--state', url, 'run', file, '--yes', '--allow-local-output'], {
      env: ENV(),
      cwd: env.dir,
      now: () => new Date(),
    });
    expect(again.code, again.stderr).toBe(0);
    const after = openStore(url);
    try {
      const ended = after.runs.getRun('killed');
      if (ended?.startedAt == null || ended.finishedAt === null) throw new Error('the run did not end');
      expect(ended.state).toBe('finished');
      expect(ended.activeMs).toBe(workedMs + (ended.finishedAt.getTime() - ended.startedAt.getTime()));
    } finally {
      after.close();
    }
  }, 120_000);
});
