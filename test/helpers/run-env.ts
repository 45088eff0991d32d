// A temp folder, a sandbox on loopback and a real SQLite file, for tests that drive `mediabatch run`
// end to end in-process. Everything is removed by close().
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import Database from 'better-sqlite3';
import { stringify } from 'yaml';
import type { SandboxOptions } from '../../src/sandbox/options.js';
import { type Sandbox, type SandboxState, startSandbox } from '../../src/sandbox/server.js';
import { type CliRun, cli } from './cli.js';
import { shellWords } from './shell-words.js';

export const SANDBOX_KEY = 'sandbox-key';

/** A task row of the state database, as the crash tests read it back. */
export interface TaskRow {
  task_id: string;
  state: string;
  img_uuid: string | null;
  cost: number | null;
  refunded: number | null;
  body: string;
}

export interface TaskDecl {
  id: string;
  model: string;
  input: Record<string, unknown>;
  repeat?: number;
  media_seconds?: number;
  /** The task(s) this one waits for and takes results from: the manifest's `after` (docs/chains.md). */
  after?: string | Record<string, string>;
  matrix?: Record<string, unknown>;
  /** Its result must be approved before its downstreams go on: the manifest's `review` (docs/review.md). */
  review?: boolean;
}

export interface ManifestDecl {
  name?: string;
  concurrency?: number;
  budget?: number;
  output?: string;
  order?: 'longest' | 'manifest';
  review?: boolean;
  tasks: TaskDecl[];
}

export interface RunOptions {
  env?: Record<string, string>;
  /** Where SIGINT/SIGTERM come from; the env's own emitter by default. */
  signals?: EventEmitter;
  /** The CLI's clock; the real one by default (the store and the sandbox use the real one too). */
  now?: () => Date;
  /** The person at the terminal answering the confirmation; absent: no terminal. */
  ask?: (question: string) => Promise<boolean | 'interrupted'>;
}

export interface RunEnv {
  dir: string;
  db: string;
  sandbox: Sandbox;
  signals: EventEmitter;
  /** Writes a manifest (YAML) into the folder; returns its file name relative to the folder. */
  manifest(decl: ManifestDecl, file?: string): Promise<string>;
  /** `mediabatch --state <db> <args...>` with the sandbox's URL and key in the environment. */
  run(args: string[], opts?: RunOptions): Promise<CliRun>;
  /**
   * A command mediabatch printed, typed as printed: split into words by /bin/sh and run in the folder,
   * with the sandbox's URL and key in the environment (where a user of the API keeps them) and a person
   * at the terminal who answers yes (`opts.ask` otherwise). Nothing is added to its words.
   */
  type(line: string, opts?: RunOptions): Promise<CliRun>;
  state(): SandboxState;
  /** Every file under the folder, relative paths, sorted. */
  files(under?: string): Promise<string[]>;
  /** Read-only rows of the state database. */
  query<T>(sql: string, ...params: unknown[]): T[];
  close(): Promise<void>;
}

/** 0.01 turns seconds of polling into tens of milliseconds. */
export const FAST_POLLS = '0.01';

export async function makeRunEnv(sandboxOptions: SandboxOptions = {}): Promise<RunEnv> {
  const dir = await mkdtemp(join(tmpdir(), 'mb-run-'));
  const sandbox = await startSandbox({ port: 0, speed: 0, seed: 7, apiKey: SANDBOX_KEY, ...sandboxOptions });
  const db = join(dir, 'state.db');
  const signals = new EventEmitter();
  // What every command of the env gets, whether called by its words (run) or typed as printed (type).
  const common = (opts: RunOptions) => ({
    env: {
      MEDIABATCH_API_KEY: sandboxOptions.apiKey ?? SANDBOX_KEY,
      MEDIABATCH_BASE_URL: sandbox.baseUrl,
      MEDIABATCH_POLL_SCALE: FAST_POLLS,
      ...opts.env,
    },
    cwd: dir,
    signals: opts.signals ?? signals,
    now: opts.now ?? (() => new Date()),
  });
  const env: RunEnv = {
    dir,
    db,
    sandbox,
    signals,
    async manifest(decl, file = 'batch.yaml') {
      const body = {
        version: 1,
        name: decl.name ?? 'batch',
        concurrency: decl.concurrency ?? 4,
        ...(decl.budget !== undefined ? { budget: decl.budget } : {}),
        ...(decl.order !== undefined ? { order: decl.order } : {}),
        ...(decl.review !== undefined ? { review: decl.review } : {}),
        output: decl.output ?? 'out',
        tasks: decl.tasks,
      };
      await writeFile(join(dir, file), stringify(body));
      return file;
    },
    run(args, opts = {}) {
      return cli(['--state', db, ...args], {
        ...common(opts),
        ...(opts.ask ? { ask: opts.ask } : {}),
      });
    },
    type(line, opts = {}) {
      const words = shellWords(line);
      if (words[0] !== 'mediabatch') throw new Error(`not a mediabatch command: ${line}`);
      return cli(words.slice(1), {
        ...common(opts),
        interactive: false,
        ask: opts.ask ?? (async () => true),
      });
    },
    state: () => sandbox.state(),
    files: (under = '.') => walk(join(dir, under), join(dir, under)),
    query<T>(sql: string, ...params: unknown[]): T[] {
      if (!existsSync(db)) return [];
      const conn = new Database(db, { readonly: true, fileMustExist: true });
      try {
        return conn.prepare(sql).all(...params) as T[];
      } finally {
        conn.close();
      }
    },
    async close() {
      await sandbox.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
  return env;
}

export async function walk(root: string, from: string = root): Promise<string[]> {
  const out: string[] = [];
  let entries: import('node:fs').Dirent[];
  try {
    entries = await readdir(from, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const entry of entries) {
    // The run folder's ownership mark is checked by its own tests, not listed with the results.
    if (entry.name === '.mediabatch-run.json') continue;
    const path = join(from, entry.name);
    if (entry.isDirectory()) out.push(...(await walk(root, path)));
    else out.push(relative(root, path));
  }
  return out.sort();
}

export async function sizeOf(path: string): Promise<number> {
  return (await stat(path)).size;
}

/** `n` tasks with distinct prompts: `<prefix>-1` … `<prefix>-n`. */
export function images(n: number, prefix = 'img', input: Record<string, unknown> = {}): TaskDecl[] {
  return Array.from({ length: n }, (_, i) => ({
    id: `${prefix}-${i + 1}`,
    model: 'flat-image',
    input: { prompt: `${prefix} number ${i + 1}`, ...input },
  }));
}

/** A speech, and a talking avatar of the sandbox's presenter that speaks it (priced by the speech's length). */
export function voiceToAvatar(e: RunEnv): TaskDecl[] {
  return [
    {
      id: 'voice',
      model: 'speech-v3',
      input: { text: 'Hello from Acme, where every mug is made by hand, slowly, in our workshop.' },
    },
    {
      id: 'avatar',
      model: 'ai-talking-avatar-video',
      after: 'voice',
      input: {
        video_url: `${e.sandbox.baseUrl}/_sandbox/media/talking-head.mp4`,
        audio_url: '{{after.audio}}',
        video_mode: 'loop',
      },
    },
  ];
}

/** Tasks of one state database, by state. */
export function taskStates(env: RunEnv, run = 'batch'): Record<string, string> {
  const rows = env.query<{ task_id: string; state: string }>(
    'SELECT task_id, state FROM tasks WHERE run_id = ? ORDER BY seq',
    run,
  );
  return Object.fromEntries(rows.map((r) => [r.task_id, r.state]));
}

/** The one line `run` prints on stderr for a non-zero exit, without the `mediabatch: ` prefix. */
export function reason(result: CliRun): string {
  const lines = result.stderr.trim().split('\n');
  const last = lines[lines.length - 1] ?? '';
  return last.replace(/^mediabatch: /, '');
}

/** The one command (in backticks) of a line mediabatch printed; fails the test when there is not exactly one. */
export function hintIn(text: string, which = 0): string {
  const found = [...text.matchAll(/`(mediabatch [^`]*)`/g)].map((m) => m[1] as string);
  const hint = found[which];
  if (hint === undefined) throw new Error(`no command #${which} in: ${text}`);
  return hint;
}
