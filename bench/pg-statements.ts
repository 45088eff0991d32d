// `npx tsx bench/pg-statements.ts [tasks]`: where one worker's PostgreSQL round trips and the server's time
// go, statement by statement. One run of images (concurrency 64, sandbox at speed 0) on a throwaway
// PostgreSQL with pg_stat_statements loaded; it prints each statement the client sent with its count per
// task (libpq's calls counted, as bench/postgres.ts does), then the server's execution and planning time per
// task of the statements that took the most (statements run by triggers at commit count apart). Not part of
// `npm run bench`: it is the tool for finding what to cut, bench/postgres.ts measures the result.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PgDb } from '../src/store/pg/db.js';
import { spawnSandbox } from '../test/helpers/child.js';
import { onLibpqCalls, waits } from '../test/helpers/libpq-calls.js';
import { startPostgres } from '../test/helpers/postgres.js';
import { cliInProcess } from './lib/in-process.js';
import { writeImagesManifest } from './lib/manifests.js';

const tasks = Number(process.argv[2] ?? 2000);
const oneLine = (sql: string, n = 160) => sql.replace(/\s+/g, ' ').trim().slice(0, n);

/**
 * Counts this process's libpq statements by text while `recording` (prepared ones by their text; those sent
 * in a pipeline marked `(piped)`), its round trips (the calls that wait for the server), and after which
 * statement each pipeline's wait came.
 */
function countStatements(): {
  counts: Map<string, number>;
  trips: { n: number };
  recording: { on: boolean };
} {
  const names = new Map<string, string>();
  const counts = new Map<string, number>();
  const trips = { n: 0 };
  const recording = { on: false };
  let last = '';
  const add = (key: string) => {
    if (recording.on) counts.set(key, (counts.get(key) ?? 0) + 1);
  };
  onLibpqCalls((method, args) => {
    if (recording.on && waits(method)) trips.n += 1;
    if (method === 'sendQueryPrepared' || method === 'sendQueryParams') {
      last = method === 'sendQueryParams' ? String(args[0]) : (names.get(String(args[0])) ?? '?');
      add(`(piped) ${oneLine(last)}`);
    }
    if (method === 'pipelineSync') add(`(waited: sync after) ${oneLine(last, 100)}`);
    if (method === 'sendFlushRequest') add(`(waited: flush after) ${oneLine(last, 100)}`);
    if (method === 'prepare') {
      names.set(String(args[0]), String(args[1]));
      add(`(prepare) ${oneLine(String(args[1]))}`);
    } else if (method === 'exec') add(`(exec) ${oneLine(String(args[0]))}`);
    else if (method === 'execPrepared') add(oneLine(names.get(String(args[0])) ?? '?'));
  });
  return { counts, trips, recording };
}

const { counts, trips, recording } = countStatements();
const pg = await startPostgres();
const setup = new PgDb(pg.url('postgres'));
setup.exec(`ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`);
setup.close();
pg.pause();
pg.resume();
const { child: sandbox, baseUrl } = await spawnSandbox(['--speed', '0', '--balance', '1e9', '--seed', '7']);
const dir = await mkdtemp(join(tmpdir(), 'mb-bench-pg-stmts-'));
try {
  const state = pg.freshDatabase();
  const stats = new PgDb(state);
  stats.exec('CREATE EXTENSION pg_stat_statements');
  stats.exec('SELECT pg_stat_statements_reset()');
  const file = await writeImagesManifest(dir, { name: 'pgstmts', count: tasks, concurrency: 64 });
  recording.on = true;
  const run = await cliInProcess(
    ['--state', state, 'run', file, '--yes', '--no-probe', '--allow-local-output'],
    dir,
    { MEDIABATCH_API_KEY: 'sandbox-key', MEDIABATCH_BASE_URL: baseUrl, MEDIABATCH_POLL_SCALE: '0.01' },
  );
  recording.on = false;
  if (run.code !== 0) throw new Error(`run exited ${run.code}: ${run.stderr}`);
  const perTask = (n: number) => (n / tasks).toFixed(3);
  const statements = [...counts.values()].reduce((a, b) => a + b, 0);
  process.stdout.write(
    `round trips per task: ${perTask(trips.n)}, statements sent per task: ${perTask(statements)} (${tasks} tasks)\n`,
  );
  for (const [sql, n] of [...counts].sort((a, b) => b[1] - a[1])) {
    if (n / tasks >= 0.01) process.stdout.write(`${perTask(n)}\t${sql}\n`);
  }
  const rows = stats
    .prepare(
      `SELECT calls, total_exec_time + total_plan_time AS ms, query FROM pg_stat_statements s
       JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database() ORDER BY 2 DESC`,
    )
    .all() as { calls: number; ms: number; query: string }[];
  const serverUs = rows.reduce((n, r) => n + r.ms, 0) * (1000 / tasks);
  process.stdout.write(`\nthe server's execution and planning time: ${serverUs.toFixed(0)} µs per task\n`);
  for (const r of rows.slice(0, 25)) {
    const us = (r.ms * 1000) / tasks;
    process.stdout.write(`${us.toFixed(1)} µs/task\t${r.calls} calls\t${oneLine(r.query)}\n`);
  }
  stats.close();
} finally {
  sandbox.proc.kill('SIGTERM');
  pg.stop();
  await rm(dir, { recursive: true, force: true });
}
