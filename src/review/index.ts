// Choosing results (issue 25): what the CLI's `review` and the view's POST routes call. Listing what
// awaits a decision, pricing a re-roll against what the run's budget leaves, and deciding (approve,
// reject, re-roll) with a per-task outcome. No CLI concerns here: no printing, no exit codes, no prompts.

import { userInfo } from 'node:os';
import picomatch from 'picomatch';
import { MediabatchError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import { type BucketOutput, keepEarlierInBucket } from '../results/bucket.js';
import { taskFolderName } from '../results/names.js';
import { isBucketLocation, runLocation } from '../results/output.js';
import {
  type DecideOutcome,
  keptSettings,
  type RunRecord,
  type Store,
  type TaskRecord,
  type Verdict,
} from '../store/index.js';
import { fromMicro, roundTokens, toMicro } from '../util/money.js';
import { keepEarlierResult } from './files.js';

export type { DecideOutcome, Verdict } from '../store/index.js';

export class ReviewError extends MediabatchError {
  override name = 'ReviewError';
  override readonly exitCode = EXIT.invalid;
}

export interface AwaitingItem {
  taskId: string;
  model: string;
  attempt: number;
  /** Give it back as `expectedVersion`: a decision on a task that moved since is refused. */
  version: number;
  /** Tokens charged for the current result (null when the API did not say). */
  cost: number | null;
  finishedAt: string | null;
  files: string[];
  /** Tasks that take this result once it is approved. */
  downstreams: string[];
  /** What a re-roll of it may cost at most (its list price, worst case). */
  rerollPrice: number;
}

/** The reviewed results nobody decided on yet, in manifest order. */
export function listAwaiting(store: Store, runId: string): AwaitingItem[] {
  requireRun(store, runId);
  const downstreams = downstreamIndex(store, runId);
  return store.awaitingReview(runId).map((t) => ({
    taskId: t.taskId,
    model: t.model,
    attempt: t.attempt,
    version: t.version,
    cost: t.cost,
    finishedAt: t.finishedAt?.toISOString() ?? null,
    files: store.filesOfTask(runId, t.taskId).map((f) => f.path),
    downstreams: downstreams.get(t.taskId) ?? [],
    rerollPrice: t.estimate.max,
  }));
}

/** Task ids of the run that the given ids or globs (`still-mug-*`) name, in manifest order; unmatched patterns apart. */
export function matchTasks(
  store: Store,
  runId: string,
  patterns: readonly string[],
): { taskIds: string[]; unmatched: string[] } {
  const tasks = store.tasksOfRun(runId).map((t) => t.taskId);
  const hits = new Set<string>();
  const unmatched: string[] = [];
  for (const pattern of patterns) {
    const isMatch = picomatch(pattern, { dot: true });
    const found = tasks.filter((id) => id === pattern || isMatch(id));
    if (found.length === 0) unmatched.push(pattern);
    for (const id of found) hits.add(id);
  }
  return { taskIds: tasks.filter((id) => hits.has(id)), unmatched };
}

export interface RerollPrice {
  tasks: Array<{ taskId: string; price: number }>;
  /** Worst case of every re-roll asked for, in tokens. */
  total: number;
  /** The run's budget; undefined when the manifest sets none. */
  budget: number | undefined;
  /** What the run has spent (net), plus what is in doubt and re-rolls already asked for, at worst. */
  committed: number;
  /** What the budget leaves before these re-rolls; undefined without a budget. */
  left: number | undefined;
  /** Whether they all fit under the budget. */
  fits: boolean;
}

/** The price of re-rolling these tasks (each at its worst case), against what the run's budget leaves. */
export function rerollPrice(store: Store, runId: string, taskIds: readonly string[]): RerollPrice {
  const run = requireRun(store, runId);
  const tasks = taskIds.map((taskId) => {
    const task = store.getTask(runId, taskId);
    return { taskId, price: task?.estimate.max ?? 0 };
  });
  const totalMicro = tasks.reduce((n, t) => n + toMicro(t.price), 0);
  const budget = budgetOf(run);
  const committedMicro = committedOf(store, runId);
  const leftMicro = budget === undefined ? undefined : toMicro(budget) - committedMicro;
  return {
    tasks,
    total: fromMicro(totalMicro),
    budget,
    committed: fromMicro(committedMicro),
    left: leftMicro === undefined ? undefined : fromMicro(Math.max(0, leftMicro)),
    fits: leftMicro === undefined || totalMicro <= leftMicro,
  };
}

export interface DecideOptions {
  note?: string;
  /** The version the deciding party saw (from listAwaiting); one number for a single task, or per task. */
  expectedVersion?: number | Readonly<Record<string, number>>;
  /** Who decides; the local user (os.userInfo) by default. */
  by?: string;
}

/**
 * Approves, rejects or re-rolls each task, one transaction each, and says per task what happened. A
 * re-roll is refused (every task of the ask, before anything is recorded or sent) when its worst cases do
 * not fit in what the run's budget leaves; its earlier result is kept at `<task>/attempt-<n>/`.
 */
export async function decide(
  store: Store,
  runId: string,
  taskIds: readonly string[],
  verdict: Verdict,
  opts: DecideOptions = {},
): Promise<DecideOutcome[]> {
  const run = requireRun(store, runId);
  const by = opts.by ?? localUser();
  if (verdict === 'reroll') {
    const price = rerollPrice(store, runId, taskIds);
    if (!price.fits) {
      const reason = `re-rolling ${taskIds.length} task(s) may cost up to ${price.total} tokens and the budget of ${price.budget} leaves ${price.left}: nothing was sent; raise budget in the manifest to re-roll`;
      return taskIds.map((taskId) => ({ taskId, ok: false, reason }));
    }
  }
  const outcomes: DecideOutcome[] = [];
  for (const taskId of taskIds) {
    const expectedVersion =
      typeof opts.expectedVersion === 'number' ? opts.expectedVersion : opts.expectedVersion?.[taskId];
    const req = {
      verdict,
      by,
      ...(opts.note !== undefined && { note: opts.note }),
      ...(expectedVersion !== undefined && { expectedVersion }),
    };
    if (verdict !== 'reroll') {
      outcomes.push(store.decide(runId, taskId, req));
      continue;
    }
    outcomes.push(await rerollOne(store, run, taskId, req));
  }
  return outcomes;
}

/**
 * The re-roll recorded first, then the earlier result moved to `attempt-<n>/`, then its rows dropped: a
 * process dying between the two leaves the rows (and the files) for finishEarlierResult, which the next
 * run calls before it sends the re-roll, so the earlier result is never overwritten nor forgotten.
 */
async function rerollOne(
  store: Store,
  run: RunRecord,
  taskId: string,
  req: Parameters<Store['decide']>[2],
): Promise<DecideOutcome> {
  const outcome = store.decide(run.id, taskId, req);
  if (outcome.ok && outcome.changed) await finishEarlierResult(store, run, taskId);
  return outcome;
}

/**
 * Keeps a re-rolled task's earlier result at `<task>/attempt-<n>/` (on disk, or copied server-side in the
 * bucket) and then forgets its rows. Idempotent, and a no-op unless the task is a re-roll not sent yet
 * whose earlier rows are still there (pending, attempt 2 or more): the runner calls it before sending. A
 * bucket run's result needs `bucket` (the runner's): without it the rows stay for the runner.
 */
export async function finishEarlierResult(
  store: Store,
  run: RunRecord,
  taskId: string,
  bucket?: BucketOutput,
): Promise<void> {
  const task = store.getTask(run.id, taskId);
  if (task === undefined || !task.review || task.attempt < 2 || task.state !== 'pending') return;
  const rows = store.filesOfTask(run.id, taskId);
  // No rows: already kept (a later failure of the re-roll may have left its own job.json: not the earlier one).
  if (rows.length === 0) return;
  const earlier = task.attempt - 1;
  const runDir = localRunDir(run);
  if (runDir !== undefined) {
    await keepEarlierResult(runDir, { ...task, attempt: earlier }, rows);
  } else {
    if (bucket === undefined) return;
    const locations = rows.map((f) => f.path);
    await keepEarlierInBucket(bucket, taskFolderName(taskId), earlier, locations);
  }
  store.dropEarlierFiles(run.id, taskId);
}

/** The run's folder on disk, or undefined for a bucket (its objects are not moved; a re-roll overwrites them). */
export function localRunDir(run: RunRecord): string | undefined {
  const { output } = keptSettings(run);
  if (output === undefined || isBucketLocation(output)) return undefined;
  return runLocation(output, run.id);
}

function budgetOf(run: RunRecord): number | undefined {
  return keptSettings(run).budget;
}

/** Net spend, the worst case of what is in doubt or being submitted, and re-rolls already asked for. */
function committedOf(store: Store, runId: string): number {
  const spent = store.runSpent(runId);
  const unsure = store
    .tasksByState(runId, ['in_doubt', 'submitting'])
    .reduce((n, t: TaskRecord) => n + toMicro(t.estimate.max), 0);
  const queued = toMicro(store.queuedRerollMax(runId));
  return toMicro(spent.charged) - toMicro(spent.refunded) + unsure + queued;
}

function downstreamIndex(store: Store, runId: string): Map<string, string[]> {
  const index = new Map<string, string[]>();
  for (const [taskId, ups] of store.upstreamsOfRun(runId)) {
    for (const { upstreamId } of ups) index.set(upstreamId, [...(index.get(upstreamId) ?? []), taskId]);
  }
  return index;
}

function requireRun(store: Store, runId: string): RunRecord {
  const run = store.getRun(runId);
  if (run === undefined) throw new ReviewError(`run ${runId}: not found in ${store.file}`);
  return run;
}

function localUser(): string {
  try {
    return userInfo().username;
  } catch {
    // A user without a passwd entry (some containers): the id is still someone.
    return `uid ${process.getuid?.() ?? 'unknown'}`;
  }
}

export interface ReviewSummary {
  reviewed: number;
  awaiting: number;
  /** Tasks to submit that wait for a reviewed result nobody approved yet. */
  waiting: number;
  approved: number;
  rejected: number;
  /** Re-rolls asked for (decisions), and what their jobs cost: a re-roll is a second ask, shown apart. */
  rerolls: { asked: number; jobs: number; charged: number; refunded: number; net: number };
}

/** Undefined for a run without `review: true` tasks. */
export function reviewSummary(store: Store, runId: string): ReviewSummary | undefined {
  if (!store.hasReviewed(runId)) return undefined;
  const counts = store.reviewCounts(runId);
  const spend = store.rerollSpend(runId);
  const asked = store.decisionsOf(runId).filter((d) => d.verdict === 'reroll').length;
  const net = fromMicro(toMicro(spend.charged) - toMicro(spend.refunded));
  return { ...counts, waiting: store.waitingOnReview(runId), rerolls: { asked, ...spend, net } };
}

export interface TaskReviewFacts {
  status: 'waiting' | 'awaiting' | 'approved' | 'rejected';
  attempt: number;
  version: number;
  decisions: Array<{ verdict: Verdict; attempt: number; note: string | null; by: string; at: string }>;
}

/** Per reviewed task, where its result stands and every decision on it (reports and gallery). */
export function reviewFacts(store: Store, runId: string): Map<string, TaskReviewFacts> {
  const facts = new Map<string, TaskReviewFacts>();
  if (!store.hasReviewed(runId)) return facts;
  for (const t of store.reviewedTasks(runId)) {
    const status = t.verdict ?? (t.state === 'done' ? ('awaiting' as const) : ('waiting' as const));
    facts.set(t.taskId, { status, attempt: t.attempt, version: t.version, decisions: [] });
  }
  for (const d of store.decisionsOf(runId)) {
    facts.get(d.taskId)?.decisions.push({
      verdict: d.verdict,
      attempt: d.attempt,
      note: d.note,
      by: d.decidedBy,
      at: d.decidedAt.toISOString(),
    });
  }
  return facts;
}

/** The run's review figures as report.json's `review` (undefined without reviewed tasks). */
export function reportReview(store: Store, runId: string): ReviewSummary | undefined {
  const summary = reviewSummary(store, runId);
  if (summary === undefined) return undefined;
  const r = summary.rerolls;
  return {
    ...summary,
    rerolls: {
      ...r,
      charged: roundTokens(r.charged),
      refunded: roundTokens(r.refunded),
      net: roundTokens(r.net),
    },
  };
}
