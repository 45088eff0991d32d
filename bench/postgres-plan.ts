// `npx tsx bench/postgres-plan.ts [--tasks N] [--source]`: a new run of N flat-image tasks planned into a
// PostgreSQL state, as a worker does it: `mediabatch run <manifest> --state postgres://… --limit 1`, which
// stores every task of the plan before it submits (--limit needs them all), then sends one. Its wall time,
// peak memory and CPU (this process's, and the server's) are the figures (1,000,000 tasks: under 60 s and
// 300 MB wanted), beside the same command on a SQLite file in the same run. Then a worker on a new
// PostgreSQL run of N tasks (`run`, which stores the rest while it submits), stopped after 15 s of
// submitting: its peak memory. 100,000 tasks by default; `npm run bench -- --million` runs 1,000,000.
// PostgreSQL is a throwaway server on loopback (test/helpers/postgres.ts), fsync off as in the tests.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliArgv, REPO, spawnSandbox } from '../test/helpers/child.js';
import { postgresBinaries, startPostgres } from '../test/helpers/postgres.js';
import { writeImagesManifest } from './lib/manifests.js';
import { cliMeasured, type Measured, round, spawnMeasured } from './lib/measure.js';
import { type RunAtScale, runAtScale } from './million.js';

export interface PlanIntoFigures {
  tasks: number;
  postgres: {
    seconds: number;
    peakRssMb: number;
    stored: number;
    /** CPU seconds of the mediabatch process, and of the PostgreSQL server meanwhile (every process of it). */
    cpuSeconds: number;
    serverCpuSeconds: number;
  };
  sqlite: { seconds: number; peakRssMb: number; cpuSeconds: number };
  /** A worker on a new PostgreSQL run of as many tasks, stopped after 15 s of submitting. */
  worker: RunAtScale;
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

const TICKS_PER_SECOND = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** Fields of /proc/<pid>/stat after the command name: utime is the 12th, cstime the 15th. */
function statFields(pid: string): string[] {
  try {
    return (readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1] ?? '').split(' ');
  } catch {
    return [];
  }
}

/**
 * CPU seconds the server listening on `port` has used: its postmaster's own and that of its children,
 * those gone (a backend ends with its connection) and those running.
 */
function serverCpuSeconds(port: number): number {
  const pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  const postmaster = pids.find((pid) => {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      return argv.some((a) => a.endsWith('/postgres')) && argv.join(' ').includes(`-p ${port} `);
    } catch {
      return false;
    }
  });
  if (postmaster === undefined) return Number.NaN;
  const own = statFields(postmaster).slice(11, 15).map(Number);
  let ticks = own.reduce((a, b) => a + b, 0);
  for (const pid of pids) {
    const f = statFields(pid);
    if (f[1] === postmaster) ticks += Number(f[11]) + Number(f[12]);
  }
  return ticks / TICKS_PER_SECOND;
}

export async function measurePlanInto(
  sandboxUrl: string,
  tasks: number,
  o: {
    compiled?: boolean;
    log?: (line: string) => void;
    /** How long the worker submits before its Ctrl-C; 15 s by default. */
    workerSeconds?: number;
  } = {},
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
  const folderWith = async (name: string) => {
    const folder = join(dir, name);
    await mkdir(folder);
    return { folder, file: await writeImagesManifest(folder, { name: 'planned', count: tasks }) };
  };
  // One machine, one disk: the results of these workers may go to a local folder.
  const local = ['--allow-local-output'];
  const run = async (backend: string, state: (folder: string) => string, extra: string[] = []) => {
    const { folder, file } = await folderWith(backend);
    const args = ['--state', state(folder), 'run', file, '--yes', '--no-probe', '--limit', '1'];
    const m = await cli(folder, [...args, ...extra]);
    // --limit 1 leaves the rest pending: exit 4 (unfinished), with every task stored.
    if (m.code !== 4) throw new Error(`run on ${backend} exited ${m.code}: ${m.stderr.slice(-2500)}`);
    o.log?.(
      `${backend}: ${tasks} tasks planned and stored in ${round(m.ms / 1000)} s, ${m.peakRssMb} MB, ${round(m.cpuSeconds)} s CPU`,
    );
    return m;
  };
  try {
    const url = pg.freshDatabase();
    const serverBefore = serverCpuSeconds(pg.port);
    const onPg = await run('postgres', () => url, local);
    const serverCpu = round(serverCpuSeconds(pg.port) - serverBefore);
    o.log?.(`postgres: the server's CPU meanwhile ${serverCpu} s`);
    const stored = storedTasks(url);
    const onSqlite = await run('sqlite', (folder) => join(folder, 'state.db'));
    const { folder, file } = await folderWith('worker');
    const worker = await runAtScale(folder, file, tasks, env, {
      big: tasks,
      small: tasks,
      rateSeconds: o.workerSeconds ?? 15,
      compiled: o.compiled !== false,
      state: pg.freshDatabase(),
      extra: local,
    });
    o.log?.(`postgres worker of ${tasks} tasks: ${JSON.stringify(worker)}`);
    return {
      tasks,
      postgres: {
        seconds: round(onPg.ms / 1000),
        peakRssMb: onPg.peakRssMb,
        stored,
        cpuSeconds: round(onPg.cpuSeconds),
        serverCpuSeconds: serverCpu,
      },
      sqlite: {
        seconds: round(onSqlite.ms / 1000),
        peakRssMb: onSqlite.peakRssMb,
        cpuSeconds: round(onSqlite.cpuSeconds),
      },
      worker,
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
