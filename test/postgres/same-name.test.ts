// Two different manifests with the same `name:` on one PostgreSQL state, the second run after the first
// ended (no worker of it alive: the run is continued, not joined): refused in one line as on SQLite
// (test/run/same-name.test.ts), not merged into the first run. Real `mediabatch run` processes, a sandbox,
// a real PostgreSQL. (A worker joining a run while its workers are alive compares plans: join-plan.test.ts.)
import { afterAll, afterEach, expect, it, vi } from 'vitest';
import { spawnCli } from '../helpers/child.js';
import { type Postgres, startPostgres, withStoreAt } from '../helpers/postgres.js';
import { FAST_POLLS, makeRunEnv, type RunEnv, SANDBOX_KEY } from '../helpers/run-env.js';

vi.setConfig({ testTimeout: 120_000 });

const pg: Postgres = await startPostgres();
afterAll(() => pg.stop());

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const still = (id: string) => ({ id, model: 'flat-image', input: { prompt: `a photo of ${id}` } });

it('refuses a second manifest of the same name on a PostgreSQL state; the first run keeps its own tasks', async () => {
  env = await makeRunEnv();
  const e = env;
  const url = pg.freshDatabase();
  await e.manifest({ name: 'same', tasks: [still('mug')] }, 'mugs.yaml');
  await e.manifest({ name: 'same', tasks: [still('cap')] }, 'caps.yaml');
  const run = async (file: string) => {
    const child = spawnCli(['--state', url, 'run', file, '--yes', '--allow-local-output'], {
      cwd: e.dir,
      env: {
        MEDIABATCH_API_KEY: SANDBOX_KEY,
        MEDIABATCH_BASE_URL: e.sandbox.baseUrl,
        MEDIABATCH_POLL_SCALE: FAST_POLLS,
      },
    });
    return { code: await child.exited, stderr: child.stderr() };
  };
  expect((await run('mugs.yaml')).code).toBe(0);
  const second = await run('caps.yaml');
  expect(second.code).toBe(1);
  expect(second.stderr.trim()).toBe(
    'mediabatch: run same was started from mugs.yaml, and caps.yaml is another batch with the same run id (its tasks or requests differ): give caps.yaml a `name:` of its own, or run it with --run-id and another id; if it is mugs.yaml moved and edited, --accept-changes goes on with run same',
  );
  const ids = withStoreAt(url, (store) =>
    store.tasks.tasksByState('same', ['done', 'pending']).map((t) => t.taskId),
  );
  expect(ids).toEqual(['mug']);
  expect(e.state().jobs).toHaveLength(1);
});
