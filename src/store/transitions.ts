// The task life cycle as data. The store refuses any move not listed here, so a bug in the runner
// cannot, for example, put a charged task back to pending and submit it twice.

import { jobPhase } from '../api/job-status.js';
import type { TaskState } from './types.js';

/** Which states a task may move to from each state, through the store's ordinary operations. */
export const TASK_MOVES: Readonly<Record<TaskState, readonly TaskState[]>> = {
  // `rejected` without a POST: a chained task whose filled-in request breaks its model's rules.
  // `skipped`: a downstream of a result the user rejected; never sent, nothing charged.
  pending: ['submitting', 'blocked', 'rejected', 'skipped'],
  // Shown, never stored (src/store/shown-state.ts): the table keeps such a task `pending`, so nothing moves
  // from or to it.
  awaiting_review: [],
  // The POST may have gone out: only its answer (or the lack of one) decides what comes next.
  submitting: ['submitted', 'rejected', 'pending', 'in_doubt'],
  // A late answer (or a callback naming the job) can resolve the doubt; a retry happens only on request.
  in_doubt: ['submitted', 'pending'],
  submitted: ['running', 'stalled', 'downloading', 'unfetched', 'failed'],
  running: ['downloading', 'stalled', 'unfetched', 'failed'],
  // Past its deadline: its slot is released, but the job is still watched and may still end either way.
  stalled: ['running', 'downloading', 'unfetched', 'failed'],
  // Charged and succeeded: only the files decide. A result that cannot be had yet is `unfetched`, retried
  // by every later run; `lost` only when the service itself no longer has the job.
  downloading: ['done', 'unfetched', 'lost'],
  unfetched: ['downloading', 'done', 'lost'],
  // Only a re-roll the user asks for (src/store/reviews.ts) sends a done task back: a new attempt, a new charge.
  done: ['pending'],
  // A failed job was refunded: sending it again (retries, --retry-failed) costs nothing twice.
  failed: ['pending'],
  rejected: ['pending'],
  blocked: ['pending', 'skipped'],
  lost: [],
  // The rejected upstream was approved after all, or re-rolled: the downstream waits for it again.
  skipped: ['pending'],
};

export function canMove(from: TaskState, to: TaskState): boolean {
  return TASK_MOVES[from].includes(to);
}

/** The states a task can be in when `to` is entered. */
export function statesBefore(to: TaskState): TaskState[] {
  return (Object.keys(TASK_MOVES) as TaskState[]).filter((from) => canMove(from, to));
}

/** States in which nothing was ever charged for the task's current body: safe to edit in place. */
export const NEVER_CHARGED: readonly TaskState[] = ['pending', 'rejected', 'blocked', 'skipped'];

/** States a user may send back to pending on request (`--retry-in-doubt`, `--accept-changes`, retrying failures). */
export const REQUEUEABLE: readonly TaskState[] = ['in_doubt', 'failed', 'rejected', 'blocked'];

/** States whose job is still being produced by the service: watched by polls and callbacks. */
export const WATCHED: readonly TaskState[] = ['submitted', 'running', 'stalled'];

/** States a run has not finished with: a later `run` has work to do for them. */
export const UNFINISHED: readonly TaskState[] = [
  'pending',
  'awaiting_review',
  'submitting',
  'submitted',
  'running',
  'stalled',
  'downloading',
  'unfetched',
];

/**
 * States of a task that still owes the user something: sent (so paid or possibly paid) and not on
 * disk yet. An older run holding such tasks is resumed before a new run starts.
 */
export const OWED: readonly TaskState[] = [
  ...UNFINISHED.filter((s) => s !== 'pending' && s !== 'awaiting_review'),
  'in_doubt',
];

// Re-exported so that `../store/index.js` keeps offering the status reading it applies.
export { isDocumentedJobStatus, type JobPhase, jobPhase } from '../api/job-status.js';

/** The task state a job status leads to; undefined when it leaves the task where it is. */
export function taskStateForJobStatus(status: string): TaskState | undefined {
  const phase = jobPhase(status);
  if (phase === 'success') return 'downloading';
  if (phase === 'failed') return 'failed';
  return status.trim().toLowerCase() === 'processing' ? 'running' : undefined;
}

/**
 * The moves a job status may cause. Narrower than TASK_MOVES: once a job is seen succeeding, only the
 * download decides what follows (a later `failed` report for it is a contradiction, not news).
 */
const JOB_STATUS_MOVES: Partial<Record<TaskState, readonly TaskState[]>> = {
  submitted: ['running', 'downloading', 'failed'],
  running: ['downloading', 'failed'],
  // A stalled job still processing stays stalled (its slot stays released) until it ends.
  stalled: ['downloading', 'failed'],
};

/** The states a job status may move a task from into `target` (JOB_STATUS_MOVES read backwards). */
export function statesMovingTo(target: TaskState): TaskState[] {
  return (Object.entries(JOB_STATUS_MOVES) as [TaskState, readonly TaskState[]][])
    .filter(([, to]) => to.includes(target))
    .map(([from]) => from);
}

/**
 * Where a job status takes a task that is in `from`: forward only, so a repeated or late event
 * (a `processing` callback arriving after `success`) changes nothing.
 */
export function nextStateOnJobStatus(from: TaskState, status: string): TaskState {
  const target = taskStateForJobStatus(status);
  if (target === undefined) return from;
  return JOB_STATUS_MOVES[from]?.includes(target) === true ? target : from;
}
