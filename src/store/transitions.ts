// The task life cycle as data. The store refuses any move not listed here, so a bug in the runner
// cannot, for example, put a charged task back to pending and submit it twice.

import type { TaskState } from './types.js';

/** Which states a task may move to from each state, through the store's ordinary operations. */
export const TASK_MOVES: Readonly<Record<TaskState, readonly TaskState[]>> = {
  pending: ['submitting', 'blocked'],
  // The POST may have gone out: only its answer (or the lack of one) decides what comes next.
  submitting: ['submitted', 'rejected', 'pending', 'in_doubt'],
  // A late answer can still resolve the doubt; a retry happens only when the user asks (--retry-in-doubt).
  in_doubt: ['submitted', 'pending'],
  submitted: ['running', 'downloading', 'failed'],
  running: ['downloading', 'failed'],
  downloading: ['done', 'failed'],
  done: [],
  failed: [],
  rejected: [],
  blocked: ['pending'],
};

export function canMove(from: TaskState, to: TaskState): boolean {
  return TASK_MOVES[from].includes(to);
}

/** The states a task can be in when `to` is entered. */
export function statesBefore(to: TaskState): TaskState[] {
  return (Object.keys(TASK_MOVES) as TaskState[]).filter((from) => canMove(from, to));
}

/** States in which nothing was ever charged for the task's current body: safe to edit in place. */
export const NEVER_CHARGED: readonly TaskState[] = ['pending', 'rejected', 'blocked'];

/** States a user may send back to pending on request (`--retry-in-doubt`, `--accept-changes`, retrying failures). */
export const REQUEUEABLE: readonly TaskState[] = ['in_doubt', 'failed', 'rejected', 'blocked'];

/** The task state a documented job status leads to; undefined for statuses the API does not document. */
export function taskStateForJobStatus(status: string): TaskState | undefined {
  switch (status) {
    case 'pending':
      return 'submitted';
    case 'processing':
      return 'running';
    case 'success':
      return 'downloading';
    case 'failed':
      return 'failed';
    default:
      // Unknown statuses (`WAITING`, `completed`, …) mean "not finished yet", never success or failure.
      return undefined;
  }
}

/**
 * The moves a job status may cause. Narrower than TASK_MOVES: once a job is seen succeeding, only the
 * download decides what follows (a later `failed` report for it is a contradiction, not news).
 */
const JOB_STATUS_MOVES: Partial<Record<TaskState, readonly TaskState[]>> = {
  submitted: ['running', 'downloading', 'failed'],
  running: ['downloading', 'failed'],
};

/**
 * Where a job status takes a task that is in `from`: forward only, so a repeated or late event
 * (a `processing` callback arriving after `success`) changes nothing.
 */
export function nextStateOnJobStatus(from: TaskState, status: string): TaskState {
  const target = taskStateForJobStatus(status);
  if (target === undefined) return from;
  return JOB_STATUS_MOVES[from]?.includes(target) === true ? target : from;
}
