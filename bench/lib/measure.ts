// What the bench measures with: child processes with their peak RSS, percentiles, the machine.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { CLI_BUNDLE_VARIABLE, cliArgv, REPO } from '../../test/helpers/child.js';

const TIME = '/usr/bin/time';

export interface Measured {
  code: number | string;
  stdout: string;
  stderr: string;
  /** Wall time from spawn to exit. */
  ms: number;
  /** Peak resident set size of the child, in MB; NaN when it could not be read. */
  peakRssMb: number;
  /** How the peak RSS was read. */
  rssBy: 'time -v' | 'VmHWM';
  /** User plus system CPU seconds of the command (time -v); NaN without /usr/bin/time. */
  cpuSeconds: number;
}

export interface SpawnMeasuredOptions {
  cwd: string;
  env?: Record<string, string>;
  /** Called with each stdout chunk (the child's own output, without /usr/bin/time's). */
  onStdout?: (chunk: string, kill: () => void) => void;
  /** Sends SIGINT to the command itself (not to /usr/bin/time, which ignores it) after this long. */
  interruptAfterMs?: number;
  /** Called at once with a function that sends SIGINT to the command itself, for a caller that decides when. */
  interrupter?: (interrupt: () => void) => void;
}

/**
 * Runs a command and reports its peak RSS: through /usr/bin/time -v when present (exact, read by the
 * kernel at exit), else by polling VmHWM in /proc, which misses at most the last 20 ms.
 */
export function spawnMeasured(argv: string[], opts: SpawnMeasuredOptions): Promise<Measured> {
  const viaTime = existsSync(TIME);
  const [command, ...args] = viaTime ? [TIME, '-v', ...argv] : argv;
  const start = performance.now();
  const proc = spawn(command ?? '', args, {
    cwd: opts.cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let hwmKb = 0;
  const kill = () => {
    proc.kill('SIGKILL');
  };
  proc.stdout.on('data', (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    stdout += text;
    opts.onStdout?.(text, kill);
  });
  proc.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const poll = viaTime
    ? undefined
    : setInterval(() => {
        hwmKb = Math.max(hwmKb, vmHwmKb(proc.pid));
      }, 20);
  const sendInterrupt = () => {
    const target = viaTime ? childOf(proc.pid) : proc.pid;
    if (target !== undefined) process.kill(target, 'SIGINT');
  };
  opts.interrupter?.(sendInterrupt);
  const interrupt =
    opts.interruptAfterMs === undefined ? undefined : setTimeout(sendInterrupt, opts.interruptAfterMs);
  return new Promise((resolve) => {
    proc.on('exit', (code, signal) => {
      if (poll) clearInterval(poll);
      if (interrupt) clearTimeout(interrupt);
      const ms = performance.now() - start;
      let peakKb = hwmKb;
      let cpuSeconds = Number.NaN;
      if (viaTime) {
        const user = Number(/User time \(seconds\): ([\d.]+)/.exec(stderr)?.[1] ?? Number.NaN);
        const system = Number(/System time \(seconds\): ([\d.]+)/.exec(stderr)?.[1] ?? Number.NaN);
        cpuSeconds = user + system;
        peakKb = Number(/Maximum resident set size \(kbytes\): (\d+)/.exec(stderr)?.[1] ?? Number.NaN);
        stderr = stderr.replace(/\tCommand being timed:[\s\S]*$/, '');
      }
      resolve({
        code: code ?? signal ?? 'unknown',
        stdout,
        stderr,
        ms,
        peakRssMb: peakKb > 0 ? round(peakKb / 1024, 1) : Number.NaN,
        rssBy: viaTime ? 'time -v' : 'VmHWM',
        cpuSeconds,
      });
    });
  });
}

const BUNDLE = join(REPO, 'dist', 'bin', 'main.js');
const BIN = join(REPO, 'bin', 'mediabatch.js');
let compiled = false;

/**
 * `mediabatch <args>` measured, as a child of its own, built as an installed `mediabatch` runs it
 * (bin/mediabatch.js loads the CLI's bundle in dist/bin): memory figures then exclude the TypeScript loader
 * used in development (about 45 MB). dist/ is rebuilt once per bench (`npm run prepare`) so it matches the
 * sources.
 */
export function cliMeasured(args: string[], opts: SpawnMeasuredOptions): Promise<Measured> {
  return spawnMeasured(compileCli() ? [process.execPath, BIN, ...args] : cliArgv(args), opts);
}

/** dist/ rebuilt from the sources, once per bench (`npm run prepare`); false when it could not be. */
function compileCli(): boolean {
  if (!compiled) {
    execFileSync('npm', ['run', 'prepare', '--silent'], { cwd: REPO, stdio: 'inherit' });
    compiled = existsSync(BUNDLE);
  }
  return compiled;
}

/**
 * From now on, the children of test/helpers/child.ts (spawnCli) in this process run the CLI's bundle, as
 * an installed `mediabatch` does, not the sources through tsx: a worker through tsx spends about a second
 * of CPU loading and compiling its modules, which two workers on 2 cores take from each other's run.
 */
export function childrenRunCompiled(): void {
  if (compileCli()) process.env[CLI_BUNDLE_VARIABLE] = BUNDLE;
}

/** The one child of a process (the command /usr/bin/time runs). */
function childOf(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const first = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/)[0];
    return first ? Number(first) : undefined;
  } catch {
    return undefined;
  }
}

function vmHwmKb(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** The q-quantile (0..1) of unsorted values, nearest rank. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN;
}

export function round(n: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

export interface Machine {
  cpus: number;
  cpuModel: string;
  memoryGb: number;
  node: string;
  platform: string;
  date: string;
  commit: string;
}

export function machine(repo: string): Machine {
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: repo, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain'], { cwd: repo, encoding: 'utf8' }).trim();
    if (dirty) commit += ' (with uncommitted changes)';
  } catch {
    // Not a git checkout: the figures still stand, without a commit.
  }
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    memoryGb: round(totalmem() / 1024 ** 3, 1),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
    date: new Date().toISOString(),
    commit,
  };
}
