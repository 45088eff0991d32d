// `npx tsx bench/fleet.ts [tasks] [concurrency]`: workers of one run on a PostgreSQL state. The same run
// (images, sandbox at speed 0) driven by one `mediabatch run` process, then by two at once (the second
// joins the first), each on a fresh database of one throwaway server on loopback; the rate is the run's
// tasks over the time from its start to its close as the database recorded them, so the processes'
// start-up is not counted. Then the claim's own cost: claiming a queue of pending tasks 64 at a time
// (the claim statement alone, timed; moving the claimed tasks off the queue is not).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { leaseHolder, openStore } from '../src/store/index.js';
import { spawnCli, spawnSandbox } from '../test/helpers/child.js';
import { startPostgres } from '../test/helpers/postgres.js';
import { writeImagesManifest } from './lib/manifests.js';
import { round } from './lib/measure.js';

const tasks = Number(process.argv[2] ?? 2000);
const concurrency = Number(process.argv[3] ?? 64);
const log = (line: string) => process.stderr.write(`bench: ${line}\n`);

/** Tasks per second of one run driven by `workers` processes at once. */
async function fleetRate(url: string, sandboxUrl: string, workers: number): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-fleet-'));
  try {
    const file = await writeImagesManifest(dir, { name: 'fleet', count: tasks, concurrency });
    const env = {
      MEDIABATCH_API_KEY: 'sandbox-key',
      MEDIABATCH_BASE_URL: sandboxUrl,
      MEDIABATCH_POLL_SCALE: '0.01',
    };
    const args = ['--state', url, 'run', file, '--yes', '--no-probe', '--allow-local-output'];
    const children = Array.from({ length: workers }, () => spawnCli(args, { cwd: dir, env }));
    const codes = await Promise.all(children.map((c) => c.exited));
    if (codes.some((c) => c !== 0)) {
      throw new Error(`a worker exited ${codes.join(', ')}: ${children.map((c) => c.stderr()).join('\n')}`);
    }
    const store = openStore(url);
    try {
      const run = store.runs.getRun('fleet');
      if (run?.startedAt == null || run.finishedAt == null) throw new Error('the run was not closed');
      const done = store.tasks.countTasksByState('fleet').done;
      if (done !== tasks) throw new Error(`${done} of ${tasks} tasks done`);
      const sent = store.workers.list('fleet').map((w) => w.submitted);
      log(`${workers} worker(s): tasks sent per worker ${sent.join(', ')}`);
      return tasks / ((run.finishedAt.getTime() - run.startedAt.getTime()) / 1000);
    } finally {
      store.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Microseconds per task claimed, claiming a queue of `n` pending tasks 64 at a time. */
function claimCost(url: string, n: number): number {
  const store = openStore(url);
  try {
    store.runs.createRun({ id: 'claims', manifestPath: '/m', manifestName: 'm', settings: {} });
    const rows = Array.from({ length: n }, (_, i) => ({
      taskId: `t${i}`,
      model: 'flat-image',
      endpoint: '/api/v1/images/generations',
      wireBody: JSON.stringify({ model: 'flat-image', prompt: `p${i}` }),
      estimate: { tokens: 1, min: 1, max: 1, basis: '1 token', assumedPrice: false },
    }));
    store.tasks.upsertTasks('claims', rows);
    const worker = leaseHolder(process.pid, 'bench', 'claims');
    store.workers.join('claims', worker, 'bench', process.pid, 60_000);
    let spent = 0;
    let claimed = 0;
    for (let got = 1; got > 0; claimed += got) {
      const start = performance.now();
      const batch = store.claims.claimPending('claims', worker, 64);
      spent += performance.now() - start;
      // Each claimed task leaves the queue, as its intent would move it on (not counted).
      store.batch(batch.map((t) => () => store.tasks.markBlocked('claims', t.taskId, 'bench')));
      got = batch.length;
    }
    return (spent * 1000) / claimed;
  } finally {
    store.close();
  }
}

const pg = await startPostgres();
const { child: sandbox, baseUrl } = await spawnSandbox(['--speed', '0', '--balance', '1e9', '--seed', '7']);
try {
  const rates: Record<'one' | 'two', number[]> = { one: [], two: [] };
  for (let i = 0; i < 2; i++) {
    rates.one.push(await fleetRate(pg.freshDatabase(), baseUrl, 1));
    rates.two.push(await fleetRate(pg.freshDatabase(), baseUrl, 2));
    log(
      `round ${i + 1}: one worker ${round(rates.one[i] ?? 0, 0)} tasks/s, two workers ${round(rates.two[i] ?? 0, 0)} tasks/s`,
    );
  }
  const claimMicros = claimCost(pg.freshDatabase(), 10_000);
  log(`a claim of 64 from a queue of 10,000, per task claimed: ${round(claimMicros)} µs`);
  const best = (xs: number[]) => Math.max(...xs);
  const figures = {
    tasks,
    concurrency,
    tasksPerSecond: { oneWorker: round(best(rates.one), 0), twoWorkers: round(best(rates.two), 0) },
    ratio: round(best(rates.two) / best(rates.one)),
    claimMicrosPerTask: round(claimMicros),
  };
  process.stdout.write(`${JSON.stringify(figures)}\n`);
} finally {
  sandbox.proc.kill('SIGTERM');
  pg.stop();
}
