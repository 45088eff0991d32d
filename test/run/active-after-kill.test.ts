// A local run (SQLite) killed with kill -9 mid-run: its active time is the time it was worked on, up to
// its lease's last renewal, in `report`, `status --json` and on the page (an hour later too); the run
// continued afterwards adds its own session to that, and the time between the kill and the next `run`
// counts for nothing.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { ViewData } from '../../src/view/data.js';
import { spawnCli } from '../helpers/child.js';
import { until } from '../helpers/fleet.js';
import { FAST_POLLS, images, makeRunEnv, type RunEnv, SANDBOX_KEY } from '../helpers/run-env.js';

let env: RunEnv;
beforeEach(async () => {
  env = await makeRunEnv({ balance: 1000, speed: 0.5 });
});
afterEach(async () => {
  await env.close();
});

/** The run's start and its lease's last renewal, as stored. */
function startAndLastRenewal(): { started: number; renewed: number } {
  const store = openStore(env.db);
  try {
    const started = store.runs.getRun('killed')?.startedAt?.getTime();
    const renewed = store.leases.getLease('run:killed')?.heartbeatAt.getTime();
    return { started: started ?? Number.NaN, renewed: renewed ?? Number.NaN };
  } finally {
    store.close();
  }
}

describe('a local run killed with kill -9', () => {
  it('was active up to its last renewal, and its next session adds to that', async () => {
    const file = await env.manifest({ name: 'killed', tasks: images(12), concurrency: 4 });
    const worker = spawnCli(['--state', env.db, 'run', file, '--yes'], {
      cwd: env.dir,
      env: {
        MEDIABATCH_API_KEY: SANDBOX_KEY,
        MEDIABATCH_BASE_URL: env.sandbox.baseUrl,
        MEDIABATCH_POLL_SCALE: FAST_POLLS,
        // Renewed every 300 ms: the kill comes after a few renewals.
        MEDIABATCH_LEASE_TTL_MS: '1200',
      },
    });
    await until(async () => {
      const { started, renewed } = startAndLastRenewal();
      return env.state().jobs.length >= 2 && renewed - started > 1000;
    }, 60_000);
    worker.proc.kill('SIGKILL');
    expect(await worker.exited).toBe('SIGKILL');
    const { started, renewed } = startAndLastRenewal();
    const workedMs = renewed - started;

    const report = await env.run(['report', 'killed', '--json']);
    expect(report.code, report.stderr).toBe(0);
    const run = (JSON.parse(report.stdout) as { run: { state: string; active_s: number } }).run;
    expect(run.state).toBe('interrupted');
    expect(run.active_s).toBe(Math.round(workedMs / 1000));
    const status = await env.run(['status', 'killed', '--json']);
    expect((JSON.parse(status.stdout) as { active_ms: number }).active_ms).toBe(workedMs);
    const listed = await env.run(['status', '--json']);
    expect((JSON.parse(listed.stdout) as { runs: { active_ms: number }[] }).runs[0]?.active_ms).toBe(
      workedMs,
    );
    const store = openStore(env.db);
    try {
      const later = new Date(Date.now() + 3_600_000);
      const recorded = store.runs.getRun('killed');
      if (recorded === undefined) throw new Error('no run');
      expect(new ViewData(store, { cwd: env.dir, now: () => later }).runHead(recorded)['active_ms']).toBe(
        workedMs,
      );
    } finally {
      store.close();
    }

    const again = await env.run(['run', file, '--yes']);
    expect(again.code, again.stderr).toBe(0);
    const after = openStore(env.db);
    try {
      const ended = after.runs.getRun('killed');
      if (ended?.startedAt == null || ended.finishedAt === null) throw new Error('the run did not end');
      expect(ended.state).toBe('finished');
      expect(ended.activeMs).toBe(workedMs + (ended.finishedAt.getTime() - ended.startedAt.getTime()));
    } finally {
      after.close();
    }
  }, 90_000);
});
