// `npx tsx bench/postgres.ts [tasks] [concurrency]`: the runner with its state in PostgreSQL against the
// same runner with its state in SQLite, one after the other in one process against one sandbox at speed 0
// (the figure is a ratio, so it holds on a busy machine), and the store's round trip on each backend.
// PostgreSQL is a throwaway server on loopback, started here like the tests start theirs. Each run also
// says its round trips to the server per task (libpq calls counted) and the CPU milliseconds per task of
// the runner (this process), PostgreSQL's processes and the sandbox.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, type Store } from '../src/store/index.js';
import { spawnSandbox } from '../test/helpers/child.js';
import { startPostgres } from '../test/helpers/postgres.js';
import { cliInProcess } from './lib/in-process.js';
import { writeImagesManifest } from './lib/manifests.js';
import { round } from './lib/measure.js';
import { CpuSampler, countRoundTrips, postgresPids } from './lib/pg-profile.js';

const tasks = Number(process.argv[2] ?? 5000);
const concurrency = Number(process.argv[3] ?? 64);
const log = (line: string) => process.stderr.write(`bench: ${line}\n`);

const roundTrips = countRoundTrips();

interface RunFigures {
  rate: number;
  /** libpq calls per task, by kind (0 on SQLite). */
  roundTripsPerTask: Record<string, number>;
  cpuMsPerTask: Record<string, number>;
}

async function runOnce(
  state: string,
  sandboxUrl: string,
  sandboxPid: number,
  port: number,
): Promise<RunFigures> {
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-pg-'));
  try {
    const file = await writeImagesManifest(dir, { name: 'pgbench', count: tasks, concurrency });
    const env = {
      MEDIABATCH_API_KEY: 'sandbox-key',
      MEDIABATCH_BASE_URL: sandboxUrl,
      MEDIABATCH_POLL_SCALE: '0.01',
    };
    const cpu = new CpuSampler({
      runner: () => [process.pid],
      postgres: () => postgresPids(port),
      sandbox: () => [sandboxPid],
    });
    const tripsBefore = roundTrips();
    cpu.start();
    const start = performance.now();
    const run = await cliInProcess(
      [
        '--state',
        state === 'sqlite' ? join(dir, 'state.db') : state,
        'run',
        file,
        '--yes',
        '--no-probe',
        '--allow-local-output',
      ],
      dir,
      env,
    );
    const rate = tasks / ((performance.now() - start) / 1000);
    const seconds = cpu.stop();
    if (run.code !== 0) throw new Error(`run exited ${run.code}: ${run.stderr}`);
    const trips = roundTrips();
    const perTask = (n: number) => round(n / tasks);
    return {
      rate,
      roundTripsPerTask: Object.fromEntries(
        Object.entries(trips).map(([kind, n]) => [
          kind,
          perTask(n - (tripsBefore[kind as keyof typeof trips] ?? 0)),
        ]),
      ),
      cpuMsPerTask: Object.fromEntries(Object.entries(seconds).map(([g, n]) => [g, perTask(n * 1000)])),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Microseconds per statement: a point read of one task, n times. */
function pointRead(store: Store, n: number): number {
  store.runs.createRun({ id: 'lat', manifestPath: '/m', manifestName: 'm', settings: {} });
  const start = performance.now();
  for (let i = 0; i < n; i++) store.tasks.getTask('lat', 'none');
  return ((performance.now() - start) * 1000) / n;
}

const pg = await startPostgres();
const { child: sandbox, baseUrl } = await spawnSandbox(['--speed', '0', '--balance', '1e9', '--seed', '7']);
try {
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-pg-lat-'));
  const sqliteStore = openStore(join(dir, 'lat.db'));
  const pgStore = openStore(pg.freshDatabase());
  const sqliteUs = pointRead(sqliteStore, 20_000);
  const pgUs = pointRead(pgStore, 20_000);
  sqliteStore.close();
  pgStore.close();
  await rm(dir, { recursive: true, force: true });
  log(`a point read: SQLite ${round(sqliteUs)} µs, PostgreSQL on loopback ${round(pgUs)} µs`);

  // Alternating, twice each, so neither backend always runs on the warmer sandbox.
  const runs: Record<'sqlite' | 'postgres', RunFigures[]> = { sqlite: [], postgres: [] };
  const rounds = Number(process.env.BENCH_ROUNDS ?? 2);
  const pid = sandbox.proc.pid ?? 0;
  // The sandbox keeps the pictures it drew: the first run against it draws them all, the others find them.
  // An untimed run first makes every measured round alike (otherwise round 1 of SQLite pays for drawing).
  await runOnce('sqlite', baseUrl, pid, pg.port);
  for (let i = 0; i < rounds; i++) {
    runs.sqlite.push(await runOnce('sqlite', baseUrl, pid, pg.port));
    runs.postgres.push(await runOnce(pg.freshDatabase(), baseUrl, pid, pg.port));
    log(
      `round ${i + 1}: SQLite ${round(runs.sqlite[i]?.rate ?? 0, 0)} tasks/s, PostgreSQL ${round(runs.postgres[i]?.rate ?? 0, 0)} tasks/s; ${JSON.stringify({ sqlite: runs.sqlite[i], postgres: runs.postgres[i] })}`,
    );
  }
  const best = (xs: RunFigures[]) => xs.reduce((a, b) => (b.rate > a.rate ? b : a));
  const sqlite = best(runs.sqlite);
  const postgres = best(runs.postgres);
  const figures = {
    tasks,
    concurrency,
    pointReadMicros: { sqlite: round(sqliteUs), postgres: round(pgUs) },
    tasksPerSecond: { sqlite: round(sqlite.rate, 0), postgres: round(postgres.rate, 0) },
    ratio: round(postgres.rate / sqlite.rate),
    roundTripsPerTask: postgres.roundTripsPerTask,
    cpuMsPerTask: { sqlite: sqlite.cpuMsPerTask, postgres: postgres.cpuMsPerTask },
  };
  process.stdout.write(`${JSON.stringify(figures)}\n`);
} finally {
  sandbox.proc.kill('SIGTERM');
  pg.stop();
}
