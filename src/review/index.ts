// Choosing results: what the CLI's `review` and the view's POST routes call. Listing what
// awaits a decision, pricing a re-roll against what the run's budget leaves, and deciding (approve,
// reject, re-roll) with a per-task outcome. No CLI concerns here: no printing, no exit codes, no prompts.

import { userInfo } from 'node:os';
import picomatch from 'picomatch';
import { MediabatchError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import { decideReserving, owedSoFar, runMoney } from '../money/index.js';
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
import { fromMicro, roomText, roundTokens, tokensOf, toMicro } from '../util/money.js';
import { fmtTokensExact } from '../util/numbers.js';
import { keepEarlierResult } from './files.js';
import { type RerollWorstCase, rerollWorstCase } from './reroll-worst.js';

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
  return store.reviews.awaiting(runId).map((t) => ({
    taskId: t.taskId,
    model: t.model,
    attempt: t.attempt,
    version: t.version,
    cost: t.cost,
    finishedAt: t.finishedAt?.toISOString() ?? null,
    files: store.files.filesOfTask(runId, t.taskId).map((f) => f.path),
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
  const tasks = store.tasks.tasksOfRun(runId).map((t) => t.taskId);
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
  /** What the re-rolls add to the run's worst case: their own prices and their downstreams priced again. */
  worst: RerollWorstCase & {
    /** The run's worst case as the next `run` weighs it (net charged plus every pending task at most), now and after. */
    now: number;
    after: number;
    /** What the budget leaves after the re-rolls at worst (negative: over); undefined without a budget. */
    leftAfter: number | undefined;
  };
  /** The next `run` would refuse to start: the worst case after the re-rolls is over the budget. */
  nextRunRefuses: boolean;
  /** The prompt's words, the same in the CLI and on the page. */
  text: string;
}

/** The price of re-rolling these tasks (each at its worst case), against what the run's budget leaves. */
export function rerollPrice(store: Store, runId: string, taskIds: readonly string[]): RerollPrice {
  const run = requireRun(store, runId);
  const tasks = taskIds.map((taskId) => {
    const task = store.tasks.getTask(runId, taskId);
    return { taskId, price: task?.estimate.max ?? 0 };
  });
  const totalMicro = tasks.reduce((n, t) => n + toMicro(t.price), 0);
  // The store's budget and figures: what the runner and every other spender of the run check too.
  const money = runMoney(store, run.id);
  const budget = money.budget === undefined ? undefined : fromMicro(money.budget);
  const leftMicro = money.budget === undefined ? undefined : money.budget - money.committed;
  const worst = runWorstCase(store, runId, taskIds, budget);
  const price = {
    tasks,
    total: fromMicro(totalMicro),
    budget,
    committed: fromMicro(money.committed),
    left: leftMicro === undefined ? undefined : fromMicro(Math.max(0, leftMicro)),
    fits: leftMicro === undefined || totalMicro <= leftMicro,
    worst,
    nextRunRefuses: worst.leftAfter !== undefined && worst.leftAfter < 0,
  };
  return { ...price, text: rerollText(price) };
}

/**
 * The run's worst case as the next `run`'s preflight weighs it (net charged, what it holds in doubt or in
 * flight, plus every pending task at its worst), now and once these re-rolls are recorded
 * (src/review/reroll-worst.ts).
 */
function runWorstCase(
  store: Store,
  runId: string,
  taskIds: readonly string[],
  budget: number | undefined,
): RerollPrice['worst'] {
  const links = store.chains.upstreamsOfRun(runId);
  const direct = new Map<string, string[]>();
  for (const [taskId, ups] of links) {
    for (const { upstreamId } of ups) direct.set(upstreamId, [...(direct.get(upstreamId) ?? []), taskId]);
  }
  const below = new Set<string>();
  const queue = [...taskIds];
  for (let next = queue.pop(); next !== undefined; next = queue.pop()) {
    for (const down of direct.get(next) ?? []) {
      if (below.has(down) || taskIds.includes(down)) continue;
      below.add(down);
      queue.push(down);
    }
  }
  const taskOf = (id: string) => store.tasks.getTask(runId, id);
  const known = (t: TaskRecord | undefined): t is TaskRecord => t !== undefined;
  const figures = rerollWorstCase({
    rerolled: taskIds.map(taskOf).filter(known),
    downstreams: [...below].map(taskOf).filter(known),
    upstreamsOf: (id) => (links.get(id) ?? []).map((l) => l.upstreamId),
    taskOf,
  });
  const pendingMax = store.tasks.pendingByModel(runId).reduce((n, m) => n + toMicro(m.max), 0);
  // What the run may still owe counts as the preflight counts it: tasks in doubt or in flight may be charged.
  const owed = owedSoFar(store, runId);
  const nowMicro = owed.spent + owed.reserved + pendingMax;
  const afterMicro = nowMicro + toMicro(figures.adds);
  return {
    ...figures,
    now: fromMicro(nowMicro),
    after: fromMicro(afterMicro),
    leftAfter: budget === undefined ? undefined : fromMicro(toMicro(budget) - afterMicro),
  };
}

/**
 * What the prompt says: the re-rolls' own price, their downstreams priced again, the run's worst case
 * before and after, what the budget leaves, and, when it would, that the next `run` would refuse.
 */
function rerollText(p: Omit<RerollPrice, 'text'>): string {
  const { worst } = p;
  const n = p.tasks.length;
  const downs =
    worst.repriced.length === 0
      ? ''
      : ` and ${worst.repriced.length} downstream task(s) priced again (up to ${tokensOf(worst.downstreams)} more)`;
  const parts = [
    `Re-roll ${n} result(s): up to ${tokensOf(worst.own)} for the re-roll${n === 1 ? '' : 's'}${downs}; the run's worst case goes from ${fmtTokensExact(worst.now)} to ${tokensOf(worst.after)}`,
  ];
  if (p.budget === undefined) parts.push('no budget is set.');
  else if (worst.leftAfter !== undefined && worst.leftAfter >= 0)
    parts.push(`the budget of ${tokensOf(p.budget)} leaves ${tokensOf(worst.leftAfter)} after it.`);
  else
    parts.push(
      `over the budget of ${tokensOf(p.budget)} by ${tokensOf(-(worst.leftAfter ?? 0))}: the next \`run\` would refuse to start (it could cost up to ${tokensOf(worst.after)}); re-roll fewer, reject the downstreams you do not need, or raise budget.`,
    );
  return parts.join('; ');
}

/**
 * Why re-rolls that do not fit in what the run's budget leaves are refused, the same from `review` and the
 * page: what they cost, and what the budget leaves or, spent past it already, by how much it is over.
 */
export function rerollRefusal(price: RerollPrice): string {
  const room =
    price.budget === undefined
      ? 'no budget is set'
      : `the budget of ${tokensOf(price.budget)} ${roomText(toMicro(price.budget) - toMicro(price.committed))}`;
  return `re-rolling ${price.tasks.length} task(s) may cost up to ${tokensOf(price.total)} and ${room}: nothing was sent; raise budget in the manifest to re-roll`;
}

export interface DecideOptions {
  note?: string;
  /** The version the deciding party saw (from listAwaiting); one number for a single task, or per task. */
  expectedVersion?: number | Readonly<Record<string, number>>;
  /** Who decides; the local user (os.userInfo) by default. */
  by?: string;
}

/**
 * Approves, rejects or re-rolls each task and says per task what happened. Re-rolls of one ask are
 * recorded in one transaction that reserves their worst cases in the store: all of them fit in what the
 * run's budget leaves, or none is recorded (every task refused with the reason), whoever else asks at
 * the same moment. A re-rolled task's earlier result is kept at `<task>/attempt-<n>/`.
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
  const asks = taskIds.map((taskId) => {
    const expectedVersion =
      typeof opts.expectedVersion === 'number' ? opts.expectedVersion : opts.expectedVersion?.[taskId];
    const req = {
      verdict,
      by,
      ...(opts.note !== undefined && { note: opts.note }),
      ...(expectedVersion !== undefined && { expectedVersion }),
    };
    return { taskId, req };
  });
  if (verdict !== 'reroll') return asks.map(({ taskId, req }) => store.reviews.decide(runId, taskId, req));
  const outcomes = decideReserving(store, runId, asks);
  const refused = outcomes.find((o) => !o.ok && o.overBudget === true);
  if (refused !== undefined && !refused.ok) {
    const price = rerollPrice(store, runId, taskIds);
    // The run's budget leaves room, so another limit refused (a fired run's budget_per_period): the
    // store's line names it.
    const reason = price.fits ? `${refused.reason}: nothing was sent` : rerollRefusal(price);
    return outcomes.map((o) => ({ taskId: o.taskId, ok: false, reason, overBudget: true }));
  }
  // The re-rolls are recorded; then each earlier result is moved to `attempt-<n>/` and its rows dropped:
  // a process dying in between leaves the rows (and the files) for finishEarlierResult, which the next
  // run calls before it sends the re-roll, so the earlier result is never overwritten nor forgotten.
  for (const outcome of outcomes) {
    if (outcome.ok && outcome.changed) await finishEarlierResult(store, run, outcome.taskId);
  }
  return outcomes;
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
  const task = store.tasks.getTask(run.id, taskId);
  if (task === undefined || !task.review || task.attempt < 2 || task.state !== 'pending') return;
  const rows = store.files.filesOfTask(run.id, taskId);
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
  store.reviews.dropEarlierFiles(run.id, taskId);
}

/** The run's folder on disk, or undefined for a bucket (its objects are not moved; a re-roll overwrites them). */
export function localRunDir(run: RunRecord): string | undefined {
  const { output } = keptSettings(run);
  if (output === undefined || isBucketLocation(output)) return undefined;
  return runLocation(output, run.id);
}

function downstreamIndex(store: Store, runId: string): Map<string, string[]> {
  const index = new Map<string, string[]>();
  for (const [taskId, ups] of store.chains.upstreamsOfRun(runId)) {
    for (const { upstreamId } of ups) index.set(upstreamId, [...(index.get(upstreamId) ?? []), taskId]);
  }
  return index;
}

function requireRun(store: Store, runId: string): RunRecord {
  const run = store.runs.getRun(runId);
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
  if (!store.reviews.hasReviewed(runId)) return undefined;
  const counts = store.reviews.reviewCounts(runId);
  const spend = store.reviews.rerollSpend(runId);
  const asked = store.reviews.decisionsOf(runId).filter((d) => d.verdict === 'reroll').length;
  const net = fromMicro(toMicro(spend.charged) - toMicro(spend.refunded));
  return { ...counts, waiting: store.reviews.waitingOnReview(runId), rerolls: { asked, ...spend, net } };
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
  if (!store.reviews.hasReviewed(runId)) return facts;
  for (const t of store.reviews.reviewedTasks(runId)) {
    const status = t.verdict ?? (t.state === 'done' ? ('awaiting' as const) : ('waiting' as const));
    facts.set(t.taskId, { status, attempt: t.attempt, version: t.version, decisions: [] });
  }
  for (const d of store.reviews.decisionsOf(runId)) {
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
