// The embedded sandbox's memory across processes (`run --sandbox` twice, with a review in between): each
// job that finishes is appended, as one JSON line, to a file beside the sandbox's state database, and the
// next embedded sandbox reads them back, so a downstream approved after the first run ended still gets its
// upstream's job record and files. Files are recipes (src/sandbox/files.ts): only their tokens are kept.
// The account's moves (charges, refunds, a balance set) are kept there too, so the next embedded sandbox
// starts from the balance the last one left, and `balance --sandbox` shows what sandbox runs spent so far.
// A reset line (`run --sandbox --sandbox-reset`) starts the account afresh: moves before it are history.

import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { findEntry } from '../catalog/index.js';
import { Account, type AccountMove } from './account.js';
import type { FileRecipe, FileStore } from './files.js';
import type { SandboxJob } from './jobs.js';
import { createRandom } from './random.js';
import { planItems } from './results.js';

/** The journal beside a state file: `state/sandbox.db` -> `state/sandbox-jobs.jsonl`. */
export function journalBeside(stateFile: string): string {
  return join(dirname(stateFile), 'sandbox-jobs.jsonl');
}

type Kept = Omit<SandboxJob, 'entry' | 'callbacks'> & { model: string };

/** A line of the journal that is about the account, not a job. */
type AccountLine = { account: AccountMove | { kind: 'reset' } };

/** The file a line goes to; a line that cannot be written loses memory, never the sandbox's service. */
function append(file: string, line: unknown): void {
  try {
    mkdirSync(dirname(file), { recursive: true });
    appendFileSync(file, `${JSON.stringify(line)}\n`);
  } catch {
    // The sandbox keeps serving: only a later process will not know this.
  }
}

/** Keeps one move of the account, as it happens. */
export function keepAccountMove(file: string, move: AccountMove): void {
  append(file, { account: move } satisfies AccountLine);
}

/** Starts the account afresh: the next embedded sandbox begins at its starting balance and quota. */
export function resetAccount(file: string): void {
  append(file, { account: { kind: 'reset' } } satisfies AccountLine);
}

function isMove(value: unknown): value is AccountMove | { kind: 'reset' } {
  const m = value as { kind?: unknown; cost?: unknown; month?: unknown; balance?: unknown } | null;
  if (m === null || typeof m !== 'object') return false;
  if (m.kind === 'reset') return true;
  if (m.kind === 'set') return typeof m.balance === 'number' && Number.isFinite(m.balance);
  return (
    (m.kind === 'charge' || m.kind === 'refund') &&
    typeof m.cost === 'number' &&
    Number.isFinite(m.cost) &&
    typeof m.month === 'string'
  );
}

/** The account's moves since the last reset, in order; none when there is no journal yet. */
export function accountMoves(file: string): AccountMove[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  let moves: AccountMove[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{"account":')) continue;
    let parsed: unknown;
    try {
      parsed = (JSON.parse(line) as AccountLine).account;
    } catch {
      continue;
    }
    if (!isMove(parsed)) continue;
    if (parsed.kind === 'reset') moves = [];
    else moves.push(parsed);
  }
  return moves;
}

/**
 * The account of the embedded sandbox whose journal this is, as the next one will start: from `balance`
 * (the sandbox's starting balance), with every move since the last reset made again.
 */
export function journalAccount(file: string, balance: number, quota: number | null): Account {
  const account = new Account(balance, quota);
  account.replay(accountMoves(file));
  return account;
}

/** Appends a finished job (success or failed); a line that cannot be written loses memory, not money. */
export function keepJob(file: string, job: SandboxJob): void {
  if (job.status !== 'success' && job.status !== 'failed') return;
  const { entry, callbacks: _callbacks, ...rest } = job;
  const kept: Kept = { ...rest, model: entry.model };
  append(file, kept);
}

/**
 * The jobs of earlier embedded sandboxes, with their files registered again in `files` under the same
 * tokens. Their links live `linkTtlMs` from now: a new sandbox process serves them anew. Lines that do not
 * read as a job (a line cut by a crash) are skipped.
 */
export function restoreJobs(
  file: string,
  files: FileStore,
  nowMs: number,
  linkTtlMs: number,
  link: (token: string, index: number) => string,
): SandboxJob[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const jobs = new Map<string, SandboxJob>();
  for (const line of text.split('\n')) {
    const job = line.trim() === '' ? undefined : parseJob(line, files, nowMs + linkTtlMs, link);
    if (job !== undefined) jobs.set(job.id, job);
  }
  return [...jobs.values()];
}

function parseJob(
  line: string,
  files: FileStore,
  expiresAt: number,
  link: (token: string, index: number) => string,
): SandboxJob | undefined {
  let kept: Kept;
  try {
    kept = JSON.parse(line) as Kept;
  } catch {
    return undefined;
  }
  const entry = typeof kept.model === 'string' ? findEntry(kept.model) : undefined;
  if (entry === undefined || typeof kept.id !== 'string') return undefined;
  const { model: _model, ...rest } = kept;
  const job: SandboxJob = { ...rest, entry, callbacks: [] };
  if (job.status !== 'success' || job.items === null) return job;
  // The recipes are drawn again from the job's own seed, exactly as when it succeeded.
  const planned = planItems(entry, job.body, job.media, createRandom(job.seed));
  job.items = job.items.map((item, index) => {
    const recipe: FileRecipe | null | undefined = planned[index]?.recipe;
    if (recipe === null || recipe === undefined || item.type === 'json') return item;
    const token = files.add(job.id, index, recipe, expiresAt);
    job.fileTokens[index] = token;
    return { ...item, value: link(token, index) };
  });
  job.linkExpiresAt = expiresAt;
  return job;
}
