// The stage for a fleet's chaos tests: a real PostgreSQL, the sandbox in a process of its own (so a worker
// blocked on the database never stalls it), an S3 server, a temp folder with the manifest, and workers:
// `mediabatch --state postgres://… run <manifest> --yes` child processes that can be killed with SIGKILL,
// routed through a TCP proxy, and counted. What the tests check comes from outside the workers: the
// sandbox's books (`/_sandbox/state`), the bucket's objects and the database's rows.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { stringify } from 'yaml';
import type { SandboxState } from '../../src/sandbox/server.js';
import { openStore, type Store } from '../../src/store/index.js';
import { type Child, spawnCli, spawnSandbox } from './child.js';
import { type Postgres, postgresBinaries, startPostgres } from './postgres.js';
import { FAST_POLLS, type RunEnv, SANDBOX_KEY } from './run-env.js';
import { S3_KEY_ID, S3_SECRET, startS3, type TestS3 } from './s3.js';

export interface FleetStage {
  pg: Postgres;
  s3: TestS3;
  dir: string;
  /** The sandbox's own base URL (no proxy in front). */
  sandboxUrl: string;
  /** A fresh database for one test, its URL (mediabatch's own timeouts). */
  database(): string;
  /** Writes a manifest into the folder whose results go to the bucket under `out/`. */
  manifest(
    file: string,
    body: { name: string; concurrency?: number; budget?: number; tasks: unknown[] },
  ): Promise<string>;
  /** The environment a worker needs: the sandbox, its key, the bucket's endpoint and credentials. */
  env(extra?: Record<string, string>): Record<string, string>;
  /** `mediabatch --state <state> <args…>` as a child process in the folder. */
  spawn(state: string, args: string[], extraEnv?: Record<string, string>): Child;
  sandbox(): Promise<SandboxState>;
  /** Each object of the bucket whose name ends with one of `suffixes`, by key. */
  objects(suffixes?: string[]): string[];
  /** Rows of a query run by psql (not by mediabatch's client), each a list of text fields. */
  sql(state: string, query: string): string[][];
  /** Opens the state for reading what the workers wrote; closes it after `read`. */
  read<T>(state: string, read: (store: Store) => T): T;
  close(): Promise<void>;
}

/**
 * A worker: `mediabatch --state <state> run <file> --yes --allow-local-output` as a child process in `env`'s
 * folder, against its sandbox (the workers of a test share that folder for their results); `extra` adds to
 * its environment.
 */
export function spawnWorker(
  env: Pick<RunEnv, 'dir' | 'sandbox'>,
  state: string,
  file: string,
  extra: Record<string, string> = {},
): Child {
  return spawnCli(['--state', state, 'run', file, '--yes', '--allow-local-output'], {
    cwd: env.dir,
    env: {
      MEDIABATCH_API_KEY: SANDBOX_KEY,
      MEDIABATCH_BASE_URL: env.sandbox.baseUrl,
      MEDIABATCH_POLL_SCALE: FAST_POLLS,
      ...extra,
    },
  });
}

export async function startFleetStage(sandboxFlags: string[] = []): Promise<FleetStage> {
  // The tests stop the server as a crash would: what it acknowledged must survive, as in production.
  const pg = await startPostgres({ durableCommits: true });
  const s3 = await startS3('fleet-results');
  const { child: sandboxChild, baseUrl: sandboxUrl } = await spawnSandbox([
    '--api-key',
    SANDBOX_KEY,
    '--balance',
    '100000',
    '--seed',
    '35',
    ...sandboxFlags,
  ]);
  const dir = await mkdtemp(join(tmpdir(), 'mb-fleet-chaos-'));
  const children: Child[] = [];
  const env = (extra: Record<string, string> = {}) => ({
    MEDIABATCH_API_KEY: SANDBOX_KEY,
    MEDIABATCH_BASE_URL: sandboxUrl,
    MEDIABATCH_POLL_SCALE: FAST_POLLS,
    MEDIABATCH_STORAGE_ENDPOINT: s3.endpoint,
    AWS_ACCESS_KEY_ID: S3_KEY_ID,
    AWS_SECRET_ACCESS_KEY: S3_SECRET,
    AWS_REGION: 'us-east-1',
    ...extra,
  });
  return {
    pg,
    s3,
    dir,
    sandboxUrl,
    // Without the helper's 5 s statement timeout: workers wait for each other's locks as long as mediabatch
    // lets them by default, as on a real server.
    database: () => pg.freshDatabase().replace(/\?options=[^&]*/, '?application_name=mediabatch-worker'),
    async manifest(file, body) {
      await writeFile(
        join(dir, file),
        stringify({ version: 1, output: `s3://${s3.bucket}/out`, concurrency: 4, ...body }),
      );
      return file;
    },
    env,
    spawn(state, args, extraEnv = {}) {
      const child = spawnCli(['--state', state, ...args], { cwd: dir, env: env(extraEnv) });
      children.push(child);
      return child;
    },
    async sandbox() {
      const res = await request(`${sandboxUrl}/_sandbox/state`);
      return (await res.body.json()) as SandboxState;
    },
    objects(suffixes = ['.png', '.mp4', '.mp3', '.wav']) {
      // s3rver keeps each object as `<key>._S3rver_object` under the bucket's folder.
      const root = join(s3.dir, s3.bucket);
      const marker = '._S3rver_object';
      return readdirSync(root, { recursive: true })
        .map(String)
        .filter((f) => f.endsWith(marker))
        .map((f) => f.slice(0, -marker.length))
        .filter((key) => suffixes.some((s) => key.endsWith(s)))
        .sort();
    },
    sql(state, query) {
      const out = execFileSync(
        join(postgresBinaries(), 'psql'),
        ['-At', '-F', '\t', '-d', state, '-c', query],
        {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      return out
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => line.split('\t'));
    },
    read(state, read) {
      const store = openStore(state);
      try {
        return read(store);
      } finally {
        store.close();
      }
    },
    async close() {
      for (const child of children) {
        if (child.proc.exitCode === null && child.proc.signalCode === null) child.proc.kill('SIGKILL');
      }
      await Promise.all(children.map((c) => c.exited));
      sandboxChild.proc.kill('SIGTERM');
      await sandboxChild.exited;
      await s3.close();
      pg.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** What the sandbox charged, by the prompt (or text) of the request that created each job. */
export function jobsByPrompt(state: SandboxState): Map<string, SandboxState['jobs']> {
  const out = new Map<string, SandboxState['jobs']>();
  for (const job of state.jobs) {
    const body = job.request as { prompt?: unknown; text?: unknown } | null;
    const key = String(body?.prompt ?? body?.text ?? '?');
    out.set(key, [...(out.get(key) ?? []), job]);
  }
  return out;
}

/** The sandbox's net charge in micro-tokens (what the ledger must equal). */
export function sandboxNet(state: SandboxState): number {
  return state.jobs.reduce((n, j) => n + Math.round(j.cost * 1e6) - Math.round(j.refunded * 1e6), 0);
}

/** Resolves once `check` holds, polling every `everyMs`; rejects after `timeoutMs`. */
export async function until(
  check: () => Promise<boolean> | boolean,
  timeoutMs: number,
  everyMs = 50,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
