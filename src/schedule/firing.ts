// What a firing of `mediabatch schedule` comes to: the worst case a run can still charge (for the period's
// budget), and what the scheduler says of a firing from what the library says of the run.

import type { MediabatchError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import type { UnattendedOutcome } from '../run/unattended.js';
import type { Store } from '../store/index.js';
import type { FiringResult } from './scheduler.js';

/**
 * What the scheduler says of a firing, from what the library says of the run; `statusCommand` is the
 * run's `status` as the one command builder words it (its state file and flags).
 */
export function firingResult(done: UnattendedOutcome, statusCommand: string): FiringResult {
  const { runId } = done;
  if (done.kind === 'refused') return { outcome: 'refused', runId, message: done.message };
  if (done.exitCode === EXIT.ok) return { outcome: 'finished', runId, message: 'every task succeeded' };
  const result = done.kind === 'ran' ? done.outcome.result : undefined;
  const message = result?.stopMessage ?? `finished with exit code ${done.exitCode}: see \`${statusCommand}\``;
  switch (done.exitCode) {
    case EXIT.interrupted:
      return { outcome: 'interrupted', runId, message };
    case EXIT.unauthorized:
      return { outcome: 'unauthorized', runId, message };
    default:
      return { outcome: 'failed', runId, message };
  }
}

/** The most a run can still charge: new tasks and tasks never sent, at their maximum estimate. */
export function worstCase(
  store: Store,
  runId: string,
  rows: Iterable<{ taskId: string; estimate: { max: number } }>,
): number {
  const known =
    store.runs.getRun(runId) === undefined
      ? undefined
      : new Map(store.tasks.tasksOfRun(runId).map((t) => [t.taskId, t.state]));
  let total = 0;
  for (const row of rows) {
    const state = known?.get(row.taskId);
    if (state === undefined || state === 'pending') total += row.estimate.max;
  }
  return total;
}

/** What the scheduler says of a firing that stopped with one of our errors, from its exit code. */
export function errorOutcome(error: MediabatchError, runId: string | undefined): FiringResult {
  const id = runId === undefined ? {} : { runId };
  const message = [...error.details, error.message].join('; ');
  switch (error.exitCode) {
    case EXIT.refused:
      return { outcome: 'refused', ...id, message };
    case EXIT.interrupted:
      return { outcome: 'interrupted', ...id, message };
    case EXIT.someFailed:
      return { outcome: 'failed', ...id, message };
    case EXIT.unauthorized:
      return { outcome: 'unauthorized', ...id, message };
    case EXIT.invalid:
      return { outcome: 'invalid', ...id, message };
    default:
      return { outcome: 'error', ...id, message };
  }
}
