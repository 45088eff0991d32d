// A resumed run writes where its manifest says now. A run refused before it wrote anything (its bucket had
// no credentials) follows the manifest's new output, says so in one line, and every surface (status, report,
// the view's and review's reading of the run) names the new place; once results exist in one place, a
// manifest naming another is refused in one line naming both, nothing sent. On SQLite and PostgreSQL.

import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { typableState } from '../../src/results/invocation.js';
import { keptSettings, openStore } from '../../src/store/index.js';
import { cli } from '../helpers/cli.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';
import { FAST_POLLS, images, makeRunEnv, type RunEnv, SANDBOX_KEY, walk } from '../helpers/run-env.js';
import { shellWords } from '../helpers/shell-words.js';

const pg: Postgres = await startPostgres();
afterAll(() => pg.stop());

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const BACKENDS = [
  { name: 'SQLite', state: (e: RunEnv) => e.db, extra: [] as string[] },
  { name: 'PostgreSQL', state: () => pg.freshDatabase(), extra: ['--allow-local-output'] },
];

describe.each(BACKENDS)('a resumed run whose manifest names another output ($name)', (backend) => {
  it('follows it while nothing was written, and refuses once results are in the first place', async () => {
    env = await makeRunEnv({ balance: 1000 });
    const e = env;
    const state = backend.state(e);
    // A person at the terminal who answers yes, as a printed command is typed.
    const mediabatch = (args: string[]) =>
      cli(['--state', state, ...args], {
        interactive: false,
        ask: async () => true,
        env: {
          MEDIABATCH_API_KEY: SANDBOX_KEY,
          MEDIABATCH_BASE_URL: e.sandbox.baseUrl,
          MEDIABATCH_POLL_SCALE: FAST_POLLS,
        },
        cwd: e.dir,
        now: () => new Date(),
      });
    const keptOutput = () => {
      const store = openStore(state.startsWith('postgres') ? state : resolve(e.dir, state));
      try {
        const run = store.runs.getRun('batch');
        return run === undefined ? undefined : keptSettings(run).output;
      } finally {
        store.close();
      }
    };

    // The bucket has no credentials: the run is recorded, nothing is sent.
    await e.manifest({ tasks: images(3), output: 's3://results-bucket/media' });
    // A bucket needs no --allow-local-output, even on PostgreSQL.
    const refused = await mediabatch(['run', 'batch.yaml', '--yes']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('no storage credentials for bucket results-bucket');
    expect(e.state().requests.submit).toBe(0);
    expect(keptOutput()).toBe('s3://results-bucket/media');

    // The user points the manifest at a local folder: the run follows it, and says so once.
    await e.manifest({ tasks: images(3), output: 'out' });
    const moved = await mediabatch(['run', 'batch.yaml', '--yes', '--limit', '2', ...backend.extra]);
    expect(moved.code).toBe(4);
    expect(moved.stdout.split('\n')).toContain(
      "Run batch wrote nothing to s3://results-bucket/media/batch: its results now go to out/batch, the manifest's output.",
    );
    expect(keptOutput()).toBe(resolve(e.dir, 'out'));
    // The command it prints to go on carries the flag the new output needs, and does it typed as printed.
    const goOn = /run again without --limit to continue: `([^`]+)`/.exec(moved.stderr)?.[1] ?? moved.stderr;
    expect(shellWords(goOn).slice(-2 - backend.extra.length)).toEqual([
      '--state',
      typableState(state),
      ...backend.extra,
    ]);
    const typed = await mediabatch(
      shellWords(goOn)
        .slice(1)
        .filter((w, i, all) => w !== '--state' && all[i - 1] !== '--state'),
    );
    expect(typed.stderr).toBe('');
    expect(typed.code).toBe(0);
    expect((await walk(resolve(e.dir, 'out', 'batch'))).filter((f) => f.endsWith('.png'))).toHaveLength(3);
    const status = await mediabatch(['status', 'batch']);
    expect(status.code).toBe(0);
    expect(status.stdout).toContain('  Files: out/batch\n');
    expect(status.stdout).not.toContain('s3://');
    const report = await mediabatch(['report', 'batch']);
    expect(report.code).toBe(0);
    expect(report.stderr).toBe('Wrote report.json, report.csv, report.md and index.html in out/batch\n');

    // Results are in out/batch now: a manifest naming another folder is refused, nothing sent, nothing moved.
    await e.manifest({ tasks: images(4), output: 'elsewhere' });
    const split = await mediabatch(['run', 'batch.yaml', '--yes', ...backend.extra]);
    expect(split.code).toBe(1);
    expect(split.stderr).toBe(
      'mediabatch: run batch has results in out/batch (3 task(s) done or downloading), and the manifest now says output: elsewhere: set output back to out to resume it there, or give the new output a run of its own (--run-id batch-2)\n',
    );
    expect(e.state().requests.submit).toBe(3);
    expect(keptOutput()).toBe(resolve(e.dir, 'out'));
    // The way on it names, typed: the new output gets a run of its own, the first run's results stay put.
    const own = await mediabatch(['run', 'batch.yaml', '--yes', '--run-id', 'batch-2', ...backend.extra]);
    expect(own.code).toBe(0);
    expect(e.state().requests.submit).toBe(7);
    expect(existsSync(join(e.dir, 'elsewhere', 'batch-2'))).toBe(true);
    if (backend.name !== 'PostgreSQL') return;

    // A worker joining a run another worker is on, with another output, is refused: one run, one place.
    const store = openStore(state);
    try {
      store.workers.join('batch', 'other-worker', hostname(), process.pid, 60_000);
    } finally {
      store.close();
    }
    const joining = await mediabatch(['run', 'batch.yaml', '--yes', ...backend.extra]);
    expect(joining.code).toBe(1);
    expect(joining.stderr).toBe(
      "mediabatch: run batch writes its results to out/batch, and this worker's manifest says output: elsewhere: give every worker of the run the same output\n",
    );
    // Nothing sent by the refused worker: the 3 of run batch and the 4 of run batch-2 only.
    expect(e.state().requests.submit).toBe(7);
  }, 60_000);
});
