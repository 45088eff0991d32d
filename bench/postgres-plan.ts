// `npx tsx bench/postgres-plan.ts [--tasks N] [--source]`: a new run of N flat-image tasks planned into a
// PostgreSQL state, as a worker does it: `mediabatch run <manifest> --state postgres://… --limit 1`, which
// stores every task of the plan before it submits (--limit needs them all), then sends one. Its wall time
// and peak memory are the figures (1,000,000 tasks: under 60 s and 300 MB wanted), beside the same command
// on a SQLite file in the same run. 100,000 tasks by default; `npm run bench -- --million` runs 1,000,000.
// PostgreSQL is a throwaway server on loopback (test/helpers/postgres.ts), fsync off as in the tests.
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliArgv, REPO, spawnSandbox } from '../test/helpers/child.js';
import { postgresBinaries, startPostgres } from '../test/helpers/postgres.js';
import { writeImagesManifest } from './lib/manifests.js';
import { cliMeasured, type Measured, round, spawnMeasured } from './lib/measure.js';

export interface PlanIntoFigures {
  tasks: number;
  postgres: { seconds: number; peakRssMb: number; stored: number };
  sqlite: { seconds: number; peakRssMb: number };
}

/** Why PostgreSQL figures cannot be taken here (no server programs, no client library), or undefined. */
export function postgresMissing(): string | undefined {
  try {
    postgresBinaries();
    execFileSync(process.execPath, ['-e', "require('libpq')"], { stdio: 'ignore', cwd: REPO });
    return undefined;
  } catch (error) {
    return (error as Error).message.split('\n')[0] ?? 'PostgreSQL is not available';
  }
}

function storedTasks(url: string): number {
  const plain = url.replace(/\?.*$/, '');
  const out = execFileSync(
    join(postgresBinaries(), 'psql'),
    ['-qAt', '-d', plain, '-c', 'SELECT count(*) FROM tasks'],
    {
      encoding: 'utf8',
    },
  );
  return Number(out.trim());
}

export async function measurePlanInto(
  sandboxUrl: string,
  tasks: number,
  o: { compiled?: boolean; log?: (line: string) => void } = {},
): Promise<PlanIntoFigures> {
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-pgplan-'));
  const pg = await startPostgres();
  const env = {
    MEDIABATCH_API_KEY: 'sandbox-key',
    MEDIABATCH_BASE_URL: sandboxUrl,
    MEDIABATCH_POLL_SCALE: '0.01',
  };
  const cli = (cwd: string, args: string[]): Promise<Measured> =>
    o.compiled === false ? spawnMeasured(cliArgv(args), { cwd, env }) : cliMeasured(args, { cwd, env });
  // Each backend in a folder of its own: a run's output folder belongs to the state that made it.
  const run = async (backend: string, state: (folder: string) => string, extra: string[] = []) => {
    const folder = join(dir, backend);
    await mkdir(folder);
    const file = await writeImagesManifest(folder, { name: 'planned', count: tasks });
    const m = await cli(folder, [
      '--state',
      state(folder),
      'run',
      file,
      '--yes',
      '--no-probe',
      '--limit',
      '1',
      ...extra,
    ]);
    // --limit 1 leaves the rest pending: exit 4 (unfinished), with every task stored.
    if (m.code !== 4) throw new Error(`run on ${backend} exited ${m.code}: ${m.stderr.slice(-2500)}`);
    o.log?.(`${backend}: ${tasks} tasks planned and stored in ${round(m.ms / 1000)} s, ${m.peakRssMb} MB`);
    return m;
  };
  try {
    const url = pg.freshDatabase();
    // One machine, one disk: the results of this one worker may go to a local folder.
    const onPg = await run('postgres', () => url, ['--allow-local-output']);
    const stored = storedTasks(url);
    const onSqlite = await run('sqlite', (folder) => join(folder, 'state.db'));
    return {
      tasks,
      postgres: { seconds: round(onPg.ms / 1000), peakRssMb: onPg.peakRssMb, stored },
      sqlite: { seconds: round(onSqlite.ms / 1000), peakRssMb: onSqlite.peakRssMb },
    };
  } finally {
    pg.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const at = process.argv.indexOf('--tasks');
  const tasks = at > 0 ? Number(process.argv[at + 1]) : 100_000;
  const missing = postgresMissing();
  if (missing !== undefined) {
    process.stderr.write(`bench: PostgreSQL figures skipped: ${missing}\n`);
  } else {
    const { child, baseUrl } = await spawnSandbox(['--speed', '0', '--balance', '1e9', '--seed', '7']);
    try {
      const figures = await measurePlanInto(baseUrl, tasks, {
        compiled: !process.argv.includes('--source'),
        log: (line) => process.stderr.write(`bench: ${line}\n`),
      });
      process.stdout.write(`${JSON.stringify(figures)}\n`);
    } finally {
      child.proc.kill('SIGTERM');
      await child.exited;
    }
  }
}
