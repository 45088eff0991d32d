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
import { CpuSampler, postgresPids } from './lib/pg-profile.js';

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
// Statements run by triggers are counted too (apart from the statements that fired them), and the time
// spent planning apart from the time executing.
const settings = new PgDb(pg.url('postgres'));
settings.exec(`ALTER SYSTEM SET pg_stat_statements.track = 'all'`);
settings.exec('ALTER SYSTEM SET pg_stat_statements.track_planning = on');
settings.exec('SELECT pg_reload_conf()');
settings.close();
const { child: sandbox, baseUrl } = await spawnSandbox(['--speed', '0', '--balance', '1e9', '--seed', '7']);
const dir = await mkdtemp(join(tmpdir(), 'mb-bench-pg-stmts-'));
try {
  const state = pg.freshDatabase();
  const stats = new PgDb(state);
  stats.exec('CREATE EXTENSION pg_stat_statements');
  stats.exec('SELECT pg_stat_statements_reset()');
  const file = await writeImagesManifest(dir, { name: 'pgstmts', count: tasks, concurrency: 64 });
  const walBefore = String(stats.prepare('SELECT pg_current_wal_lsn() AS lsn').pluck().get());
  const cpu = new CpuSampler({ postgres: () => postgresPids(pg.port) });
  cpu.start();
  recording.on = true;
  const run = await cliInProcess(
    ['--state', state, 'run', file, '--yes', '--no-probe', '--allow-local-output'],
    dir,
    { MEDIABATCH_API_KEY: 'sandbox-key', MEDIABATCH_BASE_URL: baseUrl, MEDIABATCH_POLL_SCALE: '0.01' },
  );
  recording.on = false;
  const serverCpu = cpu.stop().postgres ?? 0;
  if (run.code !== 0) throw new Error(`run exited ${run.code}: ${run.stderr}`);
  const perTask = (n: number) => (n / tasks).toFixed(3);
  const statements = [...counts.values()].reduce((a, b) => a + b, 0);
  process.stdout.write(
    `round trips per task: ${perTask(trips.n)}, statements sent per task: ${perTask(statements)} (${tasks} tasks)\n`,
  );
  for (const [sql, n] of [...counts].sort((a, b) => b[1] - a[1])) {
    if (n / tasks >= 0.01) process.stdout.write(`${perTask(n)}\t${sql}\n`);
  }
  const wal = Number(
    stats.prepare('SELECT pg_current_wal_lsn() - CAST(? AS pg_lsn) AS bytes').pluck().get(walBefore),
  );
  const rows = stats
    .prepare(
      `SELECT calls, total_exec_time AS exec, total_plan_time AS plan, plans, toplevel, query
       FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
       WHERE d.datname = current_database() ORDER BY total_exec_time + total_plan_time DESC`,
    )
    .all() as {
    calls: number;
    exec: number;
    plan: number;
    plans: number;
    toplevel: boolean;
    query: string;
  }[];
  // A statement a trigger runs is inside the time of the statement that fired it: only top-level ones add up.
  const top = rows.filter((r) => r.toplevel);
  const us = (ms: number) => ((ms * 1000) / tasks).toFixed(1);
  const sum = (f: (r: (typeof rows)[number]) => number) => top.reduce((n, r) => n + f(r), 0);
  process.stdout.write(
    `\nthe server's execution and planning time: ${us(sum((r) => r.exec + r.plan))} µs per task` +
      ` (planning ${us(sum((r) => r.plan))}); PostgreSQL's CPU ${((serverCpu * 1000) / tasks).toFixed(2)} ms` +
      ` per task; WAL ${(wal / tasks).toFixed(0)} bytes per task\n`,
  );
  process.stdout.write('µs/task (of it planning)\tcalls\tplans\tstatement (+ = run by a trigger)\n');
  for (const r of rows.slice(0, 40)) {
    process.stdout.write(
      `${us(r.exec + r.plan)} (${us(r.plan)})\t${r.calls}\t${r.plans}\t${r.toplevel ? '' : '+ '}${oneLine(r.query)}\n`,
    );
  }
  const tables = stats
    .prepare(
      `SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
       WHERE n_tup_ins + n_tup_upd > 0 ORDER BY n_tup_upd DESC`,
    )
    .all() as { relname: string; n_tup_ins: number; n_tup_upd: number; n_tup_hot_upd: number }[];
  process.stdout.write('\ntable\tinserts\tupdates\tof them HOT\n');
  for (const t of tables)
    process.stdout.write(`${t.relname}\t${t.n_tup_ins}\t${t.n_tup_upd}\t${t.n_tup_hot_upd}\n`);
  const indexes = stats
    .prepare(
      `SELECT relname, indexrelname, idx_scan FROM pg_stat_user_indexes
       WHERE relname IN (SELECT relname FROM pg_stat_user_tables WHERE n_tup_ins + n_tup_upd > 0)
       ORDER BY relname, idx_scan DESC`,
    )
    .all() as { relname: string; indexrelname: string; idx_scan: number }[];
  process.stdout.write('\nindex\tscans\n');
  for (const i of indexes) process.stdout.write(`${i.relname}.${i.indexrelname}\t${i.idx_scan}\n`);
  stats.close();
} finally {
  sandbox.proc.kill('SIGTERM');
  pg.stop();
  await rm(dir, { recursive: true, force: true });
}
