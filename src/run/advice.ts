// The advice about a run that needs the user, as text: `status` prints it and the view shows it. The
// commands in it are built from the run's own invocation (src/run/invocation.ts).

import { commandLine, type RunInvocation } from '../results/invocation.js';
import { isNotOnDisk, type TaskState, UNFINISHED } from '../store/index.js';

/** Tasks in doubt: what it means, and the command that submits them again (and what that risks). */
export function inDoubtAdvice(count: number, inv: RunInvocation): string {
  return `${count} task(s) in doubt: sent, but the answer was lost, so they may have been charged. Check the account, then \`${commandLine(inv, { command: 'run', retryInDoubt: true })}\` submits them again (possibly charged twice).`;
}

/**
 * The unfinished tasks that `run` continues, as the advice counts them: not those held by a review (the
 * review's line says what to do) nor the paid ones not on disk (their line says it).
 */
export function tasksToContinue(counts: Readonly<Record<TaskState, number>>): number {
  return UNFINISHED.filter((st) => !isNotOnDisk(st) && st !== 'awaiting_review').reduce(
    (n, st) => n + counts[st],
    0,
  );
}

/** Unfinished tasks of a run that is not going: the command that continues it. */
export function unfinishedAdvice(count: number, inv: RunInvocation): string {
  return `${count} task(s) unfinished: \`${commandLine(inv, { command: 'run' })}\` continues the run.`;
}
