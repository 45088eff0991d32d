// `npx tsx bench/postgres.ts [tasks] [concurrency]`: the runner with its state in PostgreSQL against the
// same runner with its state in SQLite, one after the other in one process against one sandbox at speed 0
// (the figure is a ratio, so it holds on a busy machine), and the store's round trip on each backend.
// PostgreSQL is a throwaway server on loopback, started here like the tests start theirs.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, type Store } from '../src/store/index.js';
import { spawnSandbox } from '../test/helpers/child.js';
import { startPostgres } from '../test/helpers/postgres.js';
import { cliInProcess } from './lib/in-process.js';
import { writeImagesManifest } from './lib/manifests.js';
import { round } from './lib/measure.js';

const tasks = Number(process.argv[2] ?? 5000);
const concurrency = Number(process.argv[3] ?? 64);
const log = (line: string) => process.stderr.write(`bench: ${line}\n`);

async function runOnce(state: string, sandboxUrl: string): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-pg-'));
  try {
    const file = await writeImagesManifest(dir, { name: 'pgbench', count: tasks, concurrency });
    const env = {
      MEDIABATCH_API_KEY: 'sandbox-key',
      MEDIABATCH_BASE_URL: sandboxUrl,
      MEDIABATCH_POLL_SCALE: '0.01',
    };
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
    if (run.code !== 0) throw new Error(`run exited ${run.code}: ${run.stderr}`);
    return tasks / ((performance.now() - start) / 1000);
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
  const rates: Record<'sqlite' | 'postgres', number[]> = { sqlite: [], postgres: [] };
  for (let i = 0; i < 2; i++) {
    rates.sqlite.push(await runOnce('sqlite', baseUrl));
    rates.postgres.push(await runOnce(pg.freshDatabase(), baseUrl));
    log(
      `round ${i + 1}: SQLite ${round(rates.sqlite[i] ?? 0, 0)} tasks/s, PostgreSQL ${round(rates.postgres[i] ?? 0, 0)} tasks/s`,
    );
  }
  const best = (xs: number[]) => Math.max(...xs);
  const figures = {
    tasks,
    concurrency,
    pointReadMicros: { sqlite: round(sqliteUs), postgres: round(pgUs) },
    tasksPerSecond: { sqlite: round(best(rates.sqlite), 0), postgres: round(best(rates.postgres), 0) },
    ratio: round(best(rates.postgres) / best(rates.sqlite)),
  };
  process.stdout.write(`${JSON.stringify(figures)}\n`);
} finally {
  sandbox.proc.kill('SIGTERM');
  pg.stop();
}
