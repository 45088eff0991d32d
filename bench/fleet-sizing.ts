// `npx tsx bench/fleet-sizing.ts [tasks]`: the measured figures docs/fleet.md sizes a fleet from. One run of
// `tasks` images with its state in a throwaway PostgreSQL on loopback (sandbox at speed 0): rows and bytes
// each table holds per task afterwards, and the WAL the run wrote per task. Then the cost of a claim: a
// `FOR UPDATE SKIP LOCKED` claim of one pending row from a queue of 200,000, driven by pgbench with 1 and
// 2 clients (the database alone). Then the store's own turns as workers take them now (row locks, and per
// run its money lock and its counts lock): worker processes that claim, record each intent and each answer
// through the store (bench/fleet-sizing-child.ts), one worker, two on one run, two on two runs (ratios on
// this machine, not a promise for another).
import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { openStore } from '../src/store/index.js';
import { PgDb } from '../src/store/pg/db.js';
import { spawnSandbox } from '../test/helpers/child.js';
import { type Postgres, postgresBinaries, startPostgres } from '../test/helpers/postgres.js';
import { cliInProcess } from './lib/in-process.js';
import { writeImagesManifest } from './lib/manifests.js';
import { round } from './lib/measure.js';
import { CpuSampler, postgresPids } from './lib/pg-profile.js';
import { psql } from './lib/psql.js';

const tasks = Number(process.argv[2] ?? 2000);
const log = (line: string) => process.stderr.write(`bench: ${line}\n`);
const bin = postgresBinaries();

/** Rows and bytes (heap, indexes, TOAST) of every table of the state, after one run. */
function tableSizes(url: string): Array<{ table: string; rows: number; bytes: number }> {
  const names = psql(url, `SELECT relname FROM pg_stat_user_tables ORDER BY relname`).split('\n');
  return names
    .filter((n) => n !== '')
    .map((table) => ({
      table,
      rows: Number(psql(url, `SELECT count(*) FROM "${table}"`)),
      bytes: Number(psql(url, `SELECT pg_total_relation_size('"${table}"')`)),
    }));
}

const CLAIM = `UPDATE queue SET state = 'claimed', holder = 'w', lease_until = now() + interval '60 s'
  WHERE id = (SELECT id FROM queue WHERE run_id = 'r' AND state = 'pending' ORDER BY id LIMIT 1
              FOR UPDATE SKIP LOCKED) RETURNING id;
`;

/** Pending tasks stored per run for the store's turns: more than two workers get through in the time. */
const TURN_TASKS = 20_000;

/** One line of bench/fleet-sizing-child.ts. */
interface WorkerFigures {
  tasks: number;
  claims: number;
  seconds: number;
  cpuMs: number;
}

/** Runs r0, r1, … each with a budget (so each intent takes its run's money lock) and TURN_TASKS pending tasks. */
function seedRuns(url: string, runs: number): void {
  const store = openStore(url);
  try {
    for (let r = 0; r < runs; r++) {
      const id = `r${r}`;
      store.runs.createRun({
        id,
        manifestPath: `/m/${id}.yaml`,
        manifestName: id,
        settings: { budget: 1e9 },
      });
      store.tasks.upsertTasks(
        id,
        Array.from({ length: TURN_TASKS }, (_, i) => ({
          taskId: `t${i}`,
          model: 'flat-image',
          endpoint: '/api/v1/images/generations',
          wireBody: JSON.stringify({ model: 'flat-image', prompt: `p${i}` }),
          estimate: { tokens: 0.2, min: 0.2, max: 0.2, basis: '0.2 per image', assumedPrice: false },
        })),
      );
    }
  } finally {
    store.close();
  }
}

/** The database's sessions while the workers go: the most connected, and the share of theirs waiting for a lock. */
interface Sessions {
  connections: number;
  lockWaitShare: number;
}

/** Looks at pg_stat_activity every 20 ms over `ms` from `startAt`, on a connection of its own. */
async function sampleSessions(url: string, startAt: number, ms: number): Promise<Sessions> {
  const db = new PgDb(url);
  const look = db.prepare(
    `SELECT count(*) AS sessions, count(*) FILTER (WHERE wait_event_type = 'Lock') AS waiting
     FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
  );
  try {
    await new Promise((r) => setTimeout(r, Math.max(0, startAt - Date.now() + 500)));
    let connections = 0;
    let sessions = 0;
    let waiting = 0;
    while (Date.now() < startAt + ms - 500) {
      const row = look.get() as { sessions: number; waiting: number };
      connections = Math.max(connections, row.sessions);
      sessions += row.sessions;
      waiting += row.waiting;
      await new Promise((r) => setTimeout(r, 20));
    }
    return { connections, lockWaitShare: sessions === 0 ? 0 : waiting / sessions };
  } finally {
    db.close();
  }
}

/**
 * Tasks per second through the store's claim, intent and answer, and the workers' CPU per task: `workers`
 * processes on a fresh database, worker i on run i % `runs` (seedRuns).
 */
async function storeTurns(
  pg: Postgres,
  workers: number,
  runs: number,
  seconds: number,
): Promise<{ tasksPerSecond: number; workerCpuMsPerTask: number; serverCpuMsPerTask: number } & Sessions> {
  const url = pg.freshDatabase();
  seedRuns(url, runs);
  const plain = url.replace(/\?.*$/, '');
  psql(plain, 'ANALYZE');
  // Time for every child to start (tsx) before they go together.
  const startAt = Date.now() + 4000;
  const sampler = sampleSessions(plain, startAt, seconds * 1000);
  // The server's CPU over the same time (its processes, from /proc): what the workers' turns cost it.
  const server = new CpuSampler({ server: () => postgresPids(pg.port) });
  setTimeout(() => server.start(), startAt - Date.now());
  const outs = await Promise.all(
    Array.from({ length: workers }, (_, i) =>
      promisify(execFile)(
        process.execPath,
        [
          '--import',
          'tsx',
          'bench/fleet-sizing-child.ts',
          url,
          `r${i % runs}`,
          String(seconds),
          String(startAt),
        ],
        { encoding: 'utf8' },
      ),
    ),
  );
  const figures = outs.map((o) => JSON.parse(o.stdout.trim().split('\n').at(-1) ?? '{}') as WorkerFigures);
  const tasks = figures.reduce((n, f) => n + f.tasks, 0);
  const longest = Math.max(...figures.map((f) => f.seconds));
  const cpuMs = figures.reduce((n, f) => n + f.cpuMs, 0);
  const serverSeconds = server.stop().server ?? 0;
  return {
    tasksPerSecond: tasks / longest,
    workerCpuMsPerTask: cpuMs / tasks,
    serverCpuMsPerTask: (serverSeconds * 1000) / tasks,
    ...(await sampler),
  };
}

/** Claims per second from pgbench with `clients` connections, for `seconds`, on a fresh queue. */
async function claimsPerSecond(url: string, dir: string, clients: number, seconds: number): Promise<number> {
  psql(
    url,
    `DROP TABLE IF EXISTS queue;
     CREATE TABLE queue (id bigserial PRIMARY KEY, run_id text NOT NULL, state text NOT NULL,
       holder text, lease_until timestamptz);
     CREATE INDEX queue_pending ON queue (run_id, id) WHERE state = 'pending';
     INSERT INTO queue (run_id, state) SELECT 'r', 'pending' FROM generate_series(1, 200000);`,
  );
  psql(url, 'VACUUM ANALYZE queue');
  const script = join(dir, 'claim.sql');
  await writeFile(script, CLAIM);
  const out = execFileSync(
    join(bin, 'pgbench'),
    ['-n', '-f', script, '-c', String(clients), '-j', String(clients), '-T', String(seconds), url],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const tps = /tps = ([\d.]+)/.exec(out)?.[1];
  if (tps === undefined) throw new Error(`pgbench said no tps:\n${out}`);
  return Number(tps);
}

const pg = await startPostgres();
const { child: sandbox, baseUrl } = await spawnSandbox(['--speed', '0', '--balance', '1e9', '--seed', '7']);
const dir = await mkdtemp(join(tmpdir(), 'mb-bench-fleet-'));
try {
  const state = pg.freshDatabase();
  const plain = state.replace(/\?.*$/, '');
  const file = await writeImagesManifest(dir, { name: 'sizing', count: tasks, concurrency: 64 });
  const walBefore = psql(plain, 'SELECT pg_current_wal_lsn()');
  const env = {
    MEDIABATCH_API_KEY: 'sandbox-key',
    MEDIABATCH_BASE_URL: baseUrl,
    MEDIABATCH_POLL_SCALE: '0.01',
  };
  const run = await cliInProcess(
    ['--state', state, 'run', file, '--yes', '--no-probe', '--allow-local-output'],
    dir,
    env,
  );
  if (run.code !== 0) throw new Error(`run exited ${run.code}: ${run.stderr}`);
  const walBytes = Number(psql(plain, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '${walBefore}')`));
  const sizes = tableSizes(plain).filter((t) => t.rows > 0);
  const bytes = sizes.reduce((n, t) => n + t.bytes, 0);
  for (const t of sizes) {
    log(`${t.table}: ${round(t.rows / tasks, 2)} rows/task, ${round(t.bytes / tasks, 0)} bytes/task`);
  }
  log(
    `all tables: ${round(bytes / tasks, 0)} bytes/task; WAL written by the run: ${round(walBytes / tasks, 0)} bytes/task`,
  );

  const one = await claimsPerSecond(plain, dir, 1, 8);
  const two = await claimsPerSecond(plain, dir, 2, 8);
  log(
    `SKIP LOCKED claim: 1 client ${round(one, 0)}/s (${round(1e6 / one, 0)} µs each), 2 clients ${round(two, 0)}/s`,
  );
  const turns = {
    oneWorker: await storeTurns(pg, 1, 1, 8),
    twoWorkersOneRun: await storeTurns(pg, 2, 1, 8),
    twoWorkersTwoRuns: await storeTurns(pg, 2, 2, 8),
  };
  for (const [name, t] of Object.entries(turns)) {
    log(
      `the store's claim, intent and answer, ${name}: ${round(t.tasksPerSecond, 0)} tasks/s, CPU ms/task workers ${round(t.workerCpuMsPerTask, 2)} / server ${round(t.serverCpuMsPerTask, 2)}, ${t.connections} connections, ${round(t.lockWaitShare * 100, 0)} % of their samples waiting for a lock`,
    );
  }
  const figures = {
    tasks,
    bytesPerTask: round(bytes / tasks, 0),
    walBytesPerTask: round(walBytes / tasks, 0),
    rowsPerTask: Object.fromEntries(sizes.map((t) => [t.table, round(t.rows / tasks, 2)])),
    claimsPerSecond: { oneClient: round(one, 0), twoClients: round(two, 0) },
    storeTasksPerSecond: Object.fromEntries(
      Object.entries(turns).map(([name, t]) => [name, round(t.tasksPerSecond, 0)]),
    ) as Record<keyof typeof turns, number>,
    workerCpuMsPerTask: round(turns.oneWorker.workerCpuMsPerTask, 2),
    serverCpuMsPerTask: round(turns.oneWorker.serverCpuMsPerTask, 2),
    connectionsOfTwoWorkers: turns.twoWorkersOneRun.connections,
    lockWaitPercent: Object.fromEntries(
      Object.entries(turns).map(([name, t]) => [name, round(t.lockWaitShare * 100, 0)]),
    ) as Record<keyof typeof turns, number>,
  };
  process.stdout.write(`${JSON.stringify(figures)}\n`);
} finally {
  sandbox.proc.kill('SIGTERM');
  await rm(dir, { recursive: true, force: true });
  pg.stop();
}
