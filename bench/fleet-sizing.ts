// `npx tsx bench/fleet-sizing.ts [tasks]`: the measured figures docs/fleet.md sizes a fleet from. One run of
// `tasks` images with its state in a throwaway PostgreSQL on loopback (sandbox at speed 0): rows and bytes
// each table holds per task afterwards, and the WAL the run wrote per task. Then the cost of a claim: a
// `FOR UPDATE SKIP LOCKED` claim of one pending row from a queue of 200,000, driven by pgbench with 1 and
// 2 clients, bare and under the store's writer lock (ratios on this machine, not a promise for another).
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSandbox } from '../test/helpers/child.js';
import { postgresBinaries, startPostgres } from '../test/helpers/postgres.js';
import { cliInProcess } from './lib/in-process.js';
import { writeImagesManifest } from './lib/manifests.js';
import { round } from './lib/measure.js';

const tasks = Number(process.argv[2] ?? 2000);
const log = (line: string) => process.stderr.write(`bench: ${line}\n`);
const bin = postgresBinaries();

function psql(url: string, sql: string): string {
  return execFileSync(join(bin, 'psql'), ['-qAt', '-d', url, '-c', sql], { encoding: 'utf8' }).trim();
}

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

/** The same claim in the shape of the store's writing transactions: under the database's one writer lock. */
const LOCKED_CLAIM = `BEGIN;
SELECT pg_advisory_xact_lock(1835361385);
${CLAIM}COMMIT;
`;

/** Claims per second from pgbench with `clients` connections, for `seconds`, on a fresh queue. */
async function claimsPerSecond(
  url: string,
  dir: string,
  clients: number,
  seconds: number,
  claim = CLAIM,
): Promise<number> {
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
  await writeFile(script, claim);
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
  const lockedOne = await claimsPerSecond(plain, dir, 1, 8, LOCKED_CLAIM);
  const lockedTwo = await claimsPerSecond(plain, dir, 2, 8, LOCKED_CLAIM);
  log(
    `the same under the writer lock: 1 client ${round(lockedOne, 0)}/s, 2 clients ${round(lockedTwo, 0)}/s`,
  );
  const figures = {
    tasks,
    bytesPerTask: round(bytes / tasks, 0),
    walBytesPerTask: round(walBytes / tasks, 0),
    rowsPerTask: Object.fromEntries(sizes.map((t) => [t.table, round(t.rows / tasks, 2)])),
    claimsPerSecond: { oneClient: round(one, 0), twoClients: round(two, 0) },
    underWriterLock: { oneClient: round(lockedOne, 0), twoClients: round(lockedTwo, 0) },
  };
  process.stdout.write(`${JSON.stringify(figures)}\n`);
} finally {
  sandbox.proc.kill('SIGTERM');
  await rm(dir, { recursive: true, force: true });
  pg.stop();
}
