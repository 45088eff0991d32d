// `npx tsx bench/fleet.ts [tasks] [concurrency]`: workers of one run on a PostgreSQL state. The same run
// (images, sandbox at speed 0) driven by one `mediabatch run` process, then by two at once (the second
// joins the first), and once more by one process with the whole run (that worker, PostgreSQL, the sandbox)
// held to one core, each on a fresh database of one throwaway server on loopback; the rate is the run's
// tasks over the time from its start to its close as the database recorded them, so the processes'
// start-up is not counted; and its steady rate, from the 20th to the 90th percent of the tasks done (without
// a worker's first seconds, when V8 still compiles its code, and the last tasks' drain). The workers run the
// CLI's bundle (dist/, rebuilt first), as installed. Then
// the claim's own cost: claiming a queue of pending tasks 64 at a time (the claim statement alone, timed;
// moving the claimed tasks off the queue is not). Each fleet run also
// says where its time went (bench/lib/pg-profile.ts): CPU seconds per task of the workers (start-up
// included), of PostgreSQL's processes and of the sandbox, the cores they kept busy, and what the database's
// sessions waited on (the run's money lock and its counts lock named). BENCH_ROUNDS sets the rounds (2).
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { leaseHolder, openStore } from '../src/store/index.js';
import { PgDb } from '../src/store/pg/db.js';
import { spawnCli, spawnSandbox } from '../test/helpers/child.js';
import { startPostgres } from '../test/helpers/postgres.js';
import { startTcpProxy, type TcpProxy } from '../test/helpers/tcp-proxy.js';
import { allCores, pinTo } from './lib/cores.js';
import { writeImagesManifest } from './lib/manifests.js';
import { childrenRunCompiled, round } from './lib/measure.js';
import { CpuSampler, postgresPids, WaitSampler } from './lib/pg-profile.js';

const tasks = Number(process.argv[2] ?? 2000);
const concurrency = Number(process.argv[3] ?? 64);
// BENCH_PG_DELAY_MS: the workers reach PostgreSQL through a proxy that passes each chunk that much later
// each way, as a database a network hop away (0: loopback, straight).
const delayMs = Number(process.env.BENCH_PG_DELAY_MS ?? 0);
const log = (line: string) => process.stderr.write(`bench: ${line}\n`);

interface Fleet {
  port: number;
  sandboxPid: number;
  /** Between the workers and PostgreSQL when BENCH_PG_DELAY_MS is set. */
  proxy: TcpProxy | undefined;
}

interface FleetFigures {
  rate: number;
  /**
   * Tasks per second between the 20th and the 90th percent of the run's tasks done: without the workers'
   * start (a new process interprets, then compiles, its code in its first seconds) and without the last
   * tasks, which finish with fewer in flight.
   */
  steadyRate: number;
  /** Cores busy with the run (workers, PostgreSQL, sandbox) at its whole-run rate. */
  coresBusy: number;
  /** CPU milliseconds per task: the workers, PostgreSQL, the sandbox. */
  cpuMsPerTask: Record<string, number>;
  /** Tasks per CPU-second of all three together. */
  tasksPerCpuSecond: number;
  /** Share of the sessions' samples in each state (WaitSampler), in %. */
  waits: Record<string, number>;
}

/**
 * Tasks per second of one run driven by `workers` processes at once, and where its time went. With `cpus`
 * ("0") the workers, PostgreSQL and the sandbox all run on those cores only, for this run.
 */
async function fleetRate(
  url: string,
  sandboxUrl: string,
  workers: number,
  fleet: Fleet,
  cpus?: string,
): Promise<FleetFigures> {
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-fleet-'));
  try {
    const file = await writeImagesManifest(dir, { name: 'fleet', count: tasks, concurrency });
    const env = {
      MEDIABATCH_API_KEY: 'sandbox-key',
      MEDIABATCH_BASE_URL: sandboxUrl,
      MEDIABATCH_POLL_SCALE: '0.01',
    };
    const state = fleet.proxy === undefined ? url : fleet.proxy.through(url);
    const args = ['--state', state, 'run', file, '--yes', '--no-probe', '--allow-local-output'];
    const waits = new WaitSampler(url);
    // PostgreSQL's backends fork from its postmaster after this, and inherit its cores.
    if (cpus !== undefined) pinTo([...postgresPids(fleet.port), fleet.sandboxPid], cpus);
    const children = Array.from({ length: workers }, () => spawnCli(args, { cwd: dir, env }));
    if (cpus !== undefined)
      pinTo(
        children.map((c) => c.proc.pid ?? 0),
        cpus,
      );
    const cpu = new CpuSampler({
      workers: () => children.map((c) => c.proc.pid ?? 0),
      postgres: () => postgresPids(fleet.port),
      sandbox: () => [fleet.sandboxPid],
    });
    cpu.start();
    waits.start();
    const codes = await Promise.all(children.map((c) => c.exited));
    const seconds = cpu.stop();
    const waited = waits.stop();
    if (cpus !== undefined) pinTo([...postgresPids(fleet.port), fleet.sandboxPid], allCores());
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
      const perTask = Object.fromEntries(
        Object.entries(seconds).map(([group, s]) => [group, round((s * 1000) / tasks)]),
      );
      const total = Object.values(seconds).reduce((n, s) => n + s, 0);
      const conflicts = deadlocks(url);
      log(
        `${workers} worker(s): tasks sent per worker ${sent.join(', ')}; CPU ms per task ${JSON.stringify(perTask)}; sessions ${JSON.stringify(waited)}; deadlocks ${conflicts}`,
      );
      const rate = tasks / ((run.finishedAt.getTime() - run.startedAt.getTime()) / 1000);
      return {
        rate,
        steadyRate: steadyRate(url),
        coresBusy: round((rate * total) / tasks),
        cpuMsPerTask: perTask,
        tasksPerCpuSecond: round(tasks / total, 0),
        waits: waited,
      };
    } finally {
      store.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Tasks per second from the 20th to the 90th percent of the run's tasks finished. */
function steadyRate(url: string): number {
  const db = new PgDb(url);
  try {
    const times = db
      .prepare(`SELECT finished_at FROM tasks WHERE run_id = 'fleet' AND state = 'done' ORDER BY finished_at`)
      .pluck()
      .all()
      .map((at) => Date.parse(String(at)));
    const from = Math.floor(times.length * 0.2);
    const to = Math.floor(times.length * 0.9) - 1;
    const seconds = ((times[to] ?? 0) - (times[from] ?? 0)) / 1000;
    return seconds > 0 ? (to - from) / seconds : 0;
  } finally {
    db.close();
  }
}

/** How many deadlocks the server broke in this database so far (each one cost deadlock_timeout). */
function deadlocks(url: string): number {
  const db = new PgDb(url);
  try {
    return Number(
      db.prepare('SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()').pluck().get(),
    );
  } finally {
    db.close();
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
// The workers run the compiled CLI, as installed (not the sources through tsx).
childrenRunCompiled();
const { child: sandbox, baseUrl } = await spawnSandbox(['--speed', '0', '--balance', '1e9', '--seed', '7']);
const proxy = delayMs > 0 ? await startTcpProxy({ port: pg.port, delayMs }) : undefined;
const fleet: Fleet = { port: pg.port, sandboxPid: sandbox.proc.pid ?? 0, proxy };
if (proxy) log(`the workers reach PostgreSQL through a proxy that delays each chunk ${delayMs} ms each way`);
try {
  const runs: Record<'oneCore' | 'one' | 'two', FleetFigures[]> = { oneCore: [], one: [], two: [] };
  const rounds = Number(process.env.BENCH_ROUNDS ?? 2);
  // The sandbox keeps the pictures it drew: an untimed run first, so that no measured round draws them.
  await fleetRate(pg.freshDatabase(), baseUrl, 1, fleet);
  for (let i = 0; i < rounds; i++) {
    runs.oneCore.push(await fleetRate(pg.freshDatabase(), baseUrl, 1, fleet, '0'));
    runs.one.push(await fleetRate(pg.freshDatabase(), baseUrl, 1, fleet));
    runs.two.push(await fleetRate(pg.freshDatabase(), baseUrl, 2, fleet));
    const [oneCore, one, two] = [runs.oneCore[i], runs.one[i], runs.two[i]];
    const said = (f: FleetFigures | undefined) =>
      `${round(f?.rate ?? 0, 0)} tasks/s (steady ${round(f?.steadyRate ?? 0, 0)}, ${f?.coresBusy} cores busy)`;
    log(
      `round ${i + 1}: one worker on one core ${said(oneCore)}, one worker ${said(one)}, two workers ${said(two)}`,
    );
  }
  const claimMicros = claimCost(pg.freshDatabase(), 10_000);
  log(`a claim of 64 from a queue of 10,000, per task claimed: ${round(claimMicros)} µs`);
  // The best round of each, with the CPU and waits of that same round.
  const best = (xs: FleetFigures[]) => xs.reduce((a, b) => (b.rate > a.rate ? b : a));
  const oneCore = best(runs.oneCore);
  const one = best(runs.one);
  const two = best(runs.two);
  const figures = {
    tasks,
    concurrency,
    pgDelayMs: delayMs,
    tasksPerSecond: { oneWorker: round(one.rate, 0), twoWorkers: round(two.rate, 0) },
    ratio: round(two.rate / one.rate),
    steadyTasksPerSecond: { oneWorker: round(one.steadyRate, 0), twoWorkers: round(two.steadyRate, 0) },
    steadyRatio: round(two.steadyRate / one.steadyRate),
    // The fleet given a core per worker: the whole run (worker, PostgreSQL, sandbox) on one core, then two
    // workers on both.
    oneWorkerOnOneCore: { tasksPerSecond: round(oneCore.rate, 0), steady: round(oneCore.steadyRate, 0) },
    coreScaling: round(two.rate / oneCore.rate),
    steadyCoreScaling: round(two.steadyRate / oneCore.steadyRate),
    coresBusy: { oneWorker: one.coresBusy, twoWorkers: two.coresBusy, machine: availableParallelism() },
    cpuMsPerTask: { oneWorker: one.cpuMsPerTask, twoWorkers: two.cpuMsPerTask },
    tasksPerCpuSecond: { oneWorker: one.tasksPerCpuSecond, twoWorkers: two.tasksPerCpuSecond },
    sessions: { oneWorker: one.waits, twoWorkers: two.waits },
    claimMicrosPerTask: round(claimMicros),
  };
  process.stdout.write(`${JSON.stringify(figures)}\n`);
} finally {
  sandbox.proc.kill('SIGTERM');
  await proxy?.close();
  pg.stop();
}
