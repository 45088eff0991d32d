// A chained task put off for a passing reason on a PostgreSQL state (a worker of a fleet, alone): tried
// again within the run, and when its upstream's record still cannot be had once all else is finished, the
// run ends with it pending, one line naming it and why; the same command then
// sends it. As test/run/put-off.test.ts on SQLite. A real `mediabatch run` process, a sandbox behind a
// proxy that answers chosen requests 500, a real PostgreSQL.
import { afterAll, afterEach, expect, it, vi } from 'vitest';
import { spawnCli } from '../helpers/child.js';
import { type FaultProxy, startFaultProxy } from '../helpers/fault-proxy.js';
import { type Postgres, startPostgres, withStoreAt } from '../helpers/postgres.js';
import { FAST_POLLS, makeRunEnv, type RunEnv, SANDBOX_KEY } from '../helpers/run-env.js';

vi.setConfig({ testTimeout: 120_000 });

const pg: Postgres = await startPostgres();
afterAll(() => pg.stop());

let env: RunEnv | undefined;
let proxy: FaultProxy | undefined;
afterEach(async () => {
  await proxy?.close();
  await env?.close();
  proxy = undefined;
  env = undefined;
});

it('leaves a downstream whose upstream record cannot be had pending, says why; run again sends it', async () => {
  // Links live 10 minutes, less than a downstream needs ahead: its upstream's record is fetched again.
  env = await makeRunEnv({ linkTtlSeconds: 600 });
  const e = env;
  const url = pg.freshDatabase();
  let failing = true;
  proxy = await startFaultProxy(e.sandbox.baseUrl, (a) => {
    if (!failing || a.path !== '/api/v1/jobs/detail' || a.imgUuid === null || !a.seenDone(a.imgUuid))
      return false;
    const job = e.state().jobs.find((j) => j.img_uuid === a.imgUuid);
    return (job?.request as { prompt?: unknown } | undefined)?.prompt === 'a mug';
  });
  await e.manifest({
    tasks: [
      { id: 'still', model: 'flat-image', input: { prompt: 'a mug' } },
      {
        id: 'clip',
        model: 'studio-2-6',
        after: 'still',
        input: { prompt: 'turn', image_url: '{{after.image}}', duration: 5, resolution: '720p' },
      },
    ],
  });
  const run = async () => {
    const child = spawnCli(['--state', url, 'run', 'batch.yaml', '--yes', '--allow-local-output'], {
      cwd: e.dir,
      env: {
        MEDIABATCH_API_KEY: SANDBOX_KEY,
        MEDIABATCH_BASE_URL: proxy?.baseUrl ?? '',
        MEDIABATCH_POLL_SCALE: FAST_POLLS,
      },
    });
    return { code: await child.exited, stderr: child.stderr() };
  };

  const first = await run();
  expect(first.code).toBe(4);
  expect(first.stderr.trim().split('\n').at(-1)).toMatch(
    /^mediabatch: 1 task\(s\) are unfinished \(clip: not submitted yet: still: its job record could not be fetched again for fresh links: HTTP 500 with code 500\): `mediabatch run batch\.yaml --run-id batch --state 'postgres:\/\/[^']+' --allow-local-output` continues the run$/,
  );
  expect(proxy.faults).toBe(30);
  const clip = withStoreAt(url, (store) => store.tasks.getTask('batch', 'clip'));
  expect(clip?.state).toBe('pending');
  expect(e.state().jobs).toHaveLength(1);

  failing = false;
  const again = await run();
  expect(again.stderr).toBe('');
  expect(again.code).toBe(0);
  expect(withStoreAt(url, (store) => store.tasks.getTask('batch', 'clip')?.state)).toBe('done');
  expect(e.state().jobs).toHaveLength(2);
});
