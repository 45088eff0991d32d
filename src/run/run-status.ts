// One run as `mediabatch status <run>` shows it: its counts, its money, the tasks that need the user
// (most urgent first) and its chains, read from the store.

import { describeRun, type RunAccount, type StepCommand } from '../account/index.js';
import { type ReviewSummary, reviewSummary } from '../review/index.js';
import {
  activeMsOf,
  type ProblemTaskRow,
  type RunRecord,
  type Store,
  type TaskState,
  UNFINISHED,
} from '../store/index.js';
import { shownRunState } from './lease.js';

/** The tasks `status <run>` lists with their errors, most urgent first: paid without a result comes first. */
export const PROBLEM_STATES: readonly TaskState[] = [
  'unfetched',
  'lost',
  'in_doubt',
  'stalled',
  'failed',
  'rejected',
  'blocked',
];
/** `status <run>` lists at most this many tasks that need the user; the counts above it are complete. */
export const STATUS_PROBLEM_LIMIT = 50;

export interface ChainLine {
  task: string;
  state: TaskState;
  after: Array<{ name: string; task: string; state: TaskState | null; review?: string }>;
}

/** The run's chained tasks with their upstreams and states, the first STATUS_PROBLEM_LIMIT of them. */
function chainsOf(store: Store, runId: string): { list: ChainLine[]; more: number } {
  const links = store.chains.upstreamsOfRun(runId);
  const list: ChainLine[] = [];
  for (const [taskId, ups] of links) {
    if (list.length === STATUS_PROBLEM_LIMIT) break;
    const task = store.tasks.getTask(runId, taskId);
    if (task === undefined) continue;
    list.push({
      task: taskId,
      state: store.reviews.shownStateOf(runId, taskId) ?? task.state,
      after: ups.map((u) => upstreamLine(store, runId, u.name, u.upstreamId)),
    });
  }
  return { list, more: Math.max(0, links.size - list.length) };
}

/**
 * An upstream as the chain tables show it (`status` and the view's): its state, and for a reviewed one
 * where its result stands.
 */
export function upstreamLine(
  store: Store,
  runId: string,
  name: string,
  upstreamId: string,
): ChainLine['after'][number] {
  const up = store.tasks.getTask(runId, upstreamId);
  const line = { name, task: upstreamId, state: up?.state ?? null };
  if (up === undefined || !up.review) return line;
  return { ...line, review: up.verdict ?? (up.state === 'done' ? 'awaiting review' : 'review pending') };
}

export interface RunStatus {
  /** The run, its state as shown (a run whose holder died is interrupted). */
  run: RunRecord;
  counts: Record<TaskState, number>;
  spent: ReturnType<Store['reportReads']['runTotals']>;
  /** The tasks that need the user, the first STATUS_PROBLEM_LIMIT of them. */
  problems: ProblemTaskRow[];
  /** Unfinished states listed after the problem states (pending tasks that gave up for now). */
  others: TaskState[];
  paid: ReturnType<Store['reportReads']['notOnDiskByState']>;
  paidTasks: number;
  paidTokens: number;
  chains: { list: ChainLine[]; more: number };
  /** Reviewed tasks' decisions and re-roll spend; undefined without `review: true` tasks. */
  review?: ReviewSummary;
  /** The run's one account: counts, money and next steps come from it. */
  account: RunAccount;
}

/** Everything `status <run>` shows of one run. */
export function readRunStatus(
  store: Store,
  recorded: RunRecord,
  now: Date,
  command?: StepCommand,
): RunStatus {
  const state = shownRunState(store, recorded, now);
  const run = { ...recorded, state, activeMs: activeMsOf(store, recorded, state, now) };
  const account = describeRun(store, run.id, {
    shownState: (r) => shownRunState(store, r, now),
    ...(command ? { command } : {}),
  });
  const paid = account.paid_without_result;
  // Pending tasks that gave up for now (retries exhausted) carry their reason too: listed last.
  const others = UNFINISHED.filter((s) => !PROBLEM_STATES.includes(s));
  const problems = store.reportReads.problemTasks(
    run.id,
    [...PROBLEM_STATES, ...others],
    STATUS_PROBLEM_LIMIT,
    others,
  );
  return {
    run,
    account,
    counts: account.by_state,
    spent: {
      estimated: account.estimate.tokens,
      charged: account.money.charged,
      refunded: account.money.refunded,
      net: account.money.net,
    },
    problems,
    others,
    paid: { unfetched: paid.unfetched, stalled: paid.stalled, lost: paid.lost },
    paidTasks: paid.tasks,
    paidTokens: paid.tokens,
    chains: chainsOf(store, run.id),
    ...withReview(reviewSummary(store, run.id)),
  };
}

function withReview(review: ReviewSummary | undefined): { review?: ReviewSummary } {
  return review === undefined ? {} : { review };
}
