// mediabatch as a child process, for tests that kill it: the CLI's bundle built for this test run (see
// test/helpers/cli-bundle.ts), or `node --import tsx src/cli/main.ts ...` outside vitest (the torture's
// and the bench's own runs).
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The variable naming the bundle's entry for the test processes; unset, children run through tsx. */
export const CLI_BUNDLE_VARIABLE = 'MB_TEST_CLI_BUNDLE';

export const REPO = fileURLToPath(new URL('../../', import.meta.url));
const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));
const TSX = pathToFileURL(`${REPO}node_modules/tsx/dist/loader.mjs`).href;

export interface Child {
  proc: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code, or the signal's name when it was killed. */
  exited: Promise<number | string>;
  /** Resolves when stdout contains `text` (or the process ended first: false). */
  waitFor(text: string): Promise<boolean>;
}

/** The command line that runs `mediabatch <args>` from the sources (for callers that spawn it themselves). */
export function cliArgv(args: string[]): string[] {
  const bundle = process.env[CLI_BUNDLE_VARIABLE];
  if (bundle !== undefined && existsSync(bundle)) return [process.execPath, bundle, ...args];
  return [process.execPath, '--import', TSX, MAIN, ...args];
}

export function spawnCli(args: string[], opts: { cwd: string; env: Record<string, string> }): Child {
  const [command, ...rest] = cliArgv(args);
  const proc = spawn(command ?? process.execPath, rest, {
    cwd: opts.cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  const waiters: { text: string; resolve: (seen: boolean) => void }[] = [];
  proc.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString('utf8');
    for (const w of [...waiters]) {
      if (out.includes(w.text)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(true);
      }
    }
  });
  proc.stderr?.on('data', (chunk: Buffer) => {
    err += chunk.toString('utf8');
  });
  const exited = new Promise<number | string>((resolve) => {
    proc.on('exit', (code, signal) => {
      for (const w of waiters.splice(0)) w.resolve(false);
      resolve(code ?? signal ?? 'unknown');
    });
  });
  return {
    proc,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitFor: (text) =>
      out.includes(text)
        ? Promise.resolve(true)
        : new Promise<boolean>((resolve) => {
            if (proc.exitCode !== null || proc.signalCode !== null) resolve(false);
            else waiters.push({ text, resolve });
          }),
  };
}

/** `mediabatch sandbox --port 0 ...` in its own process; resolves with its base URL (its first stdout line). */
export async function spawnSandbox(flags: string[]): Promise<{ child: Child; baseUrl: string }> {
  const child = spawnCli(['sandbox', '--port', '0', ...flags], { cwd: REPO, env: {} });
  const ready = await child.waitFor('\n');
  if (!ready) throw new Error(`sandbox did not start: ${child.stderr()}`);
  const baseUrl = child.stdout().split('\n')[0]?.trim() ?? '';
  return { child, baseUrl };
}

/** A small seeded generator (mulberry32), so kill moments are the same on every run of the test. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * `mediabatch <args>` run again and again, each run killed with SIGKILL at a random moment after its
 * preflight (the first `maxKills` runs), until one ends by itself with 0 or 2. Resolves to every run's
 * exit code or signal, in order; any other ending throws with the run's stderr.
 */
export async function runWithKills(o: {
  args: string[];
  cwd: string;
  env: Record<string, string>;
  random: () => number;
  maxKills: number;
  maxDelayMs: number;
}): Promise<(number | string)[]> {
  const codes: (number | string)[] = [];
  for (let round = 0; ; round++) {
    const child = spawnCli(o.args, { cwd: o.cwd, env: o.env });
    if (round < o.maxKills && (await child.waitFor('  To submit:'))) {
      await new Promise((r) => setTimeout(r, Math.floor(o.random() * o.maxDelayMs)));
      child.proc.kill('SIGKILL');
    }
    const code = await child.exited;
    codes.push(code);
    if (code === 0 || code === 2) return codes;
    if (code !== 'SIGKILL') throw new Error(`run exited ${code}: ${child.stderr()}`);
    if (round > o.maxKills) throw new Error(`run did not end after ${round + 1} runs`);
  }
}
