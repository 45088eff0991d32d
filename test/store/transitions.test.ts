import { describe, expect, it } from 'vitest';
import { canMove, nextStateOnJobStatus, type TaskState } from '../../src/store/index.js';

describe('a job status moves a task forward only', () => {
  it.each<[TaskState, string, TaskState]>([
    ['submitted', 'pending', 'submitted'],
    ['submitted', 'processing', 'running'],
    ['submitted', 'success', 'downloading'],
    ['submitted', 'failed', 'failed'],
    ['running', 'processing', 'running'],
    ['running', 'success', 'downloading'],
    ['running', 'failed', 'failed'],
    // Late, repeated or reordered news changes nothing.
    ['running', 'pending', 'running'],
    ['downloading', 'processing', 'downloading'],
    ['downloading', 'pending', 'downloading'],
    ['downloading', 'success', 'downloading'],
    ['downloading', 'failed', 'downloading'],
    ['done', 'processing', 'done'],
    ['done', 'failed', 'done'],
    ['failed', 'success', 'failed'],
    ['failed', 'processing', 'failed'],
    // The words the service's documentation also uses, in any case, mean what they say.
    ['running', 'completed', 'downloading'],
    ['submitted', 'SUCCEEDED', 'downloading'],
    ['running', ' Done ', 'downloading'],
    ['running', 'canceled', 'failed'],
    ['submitted', 'ERROR', 'failed'],
    ['submitted', 'Processing', 'running'],
    ['submitted', ' PROCESSING ', 'running'],
    // Undocumented statuses mean "not finished yet".
    ['submitted', 'WAITING', 'submitted'],
    ['running', 'queued', 'running'],
    ['running', '', 'running'],
    // A stalled job still ends either way, but processing news does not give it its slot back.
    ['stalled', 'processing', 'stalled'],
    ['stalled', 'success', 'downloading'],
    ['stalled', 'failed', 'failed'],
    // Paid results being fetched again are decided by the files, never by job news.
    ['unfetched', 'failed', 'unfetched'],
    ['unfetched', 'success', 'unfetched'],
    ['lost', 'success', 'lost'],
    // A job status never touches a task that has no job.
    ['pending', 'success', 'pending'],
    ['in_doubt', 'success', 'in_doubt'],
    ['rejected', 'failed', 'rejected'],
  ])('%s + %j -> %s', (from, status, to) => {
    expect(nextStateOnJobStatus(from, status)).toBe(to);
  });
});

describe('the task life cycle', () => {
  it.each<[TaskState, TaskState, boolean]>([
    ['pending', 'submitting', true],
    ['submitting', 'submitted', true],
    ['submitting', 'in_doubt', true],
    ['submitting', 'pending', true],
    ['in_doubt', 'submitted', true],
    ['in_doubt', 'pending', true],
    ['downloading', 'done', true],
    ['blocked', 'pending', true],
    // Anything that could lead to a second charge is refused.
    ['submitted', 'pending', false],
    ['submitted', 'submitting', false],
    ['running', 'pending', false],
    ['done', 'submitting', false],
    ['failed', 'submitting', false],
    ['in_doubt', 'submitting', false],
    ['pending', 'submitted', false],
    // Paid results are given up only when the service no longer has them; a failure can be retried.
    ['running', 'stalled', true],
    ['stalled', 'running', true],
    ['stalled', 'pending', false],
    ['downloading', 'unfetched', true],
    ['downloading', 'failed', false],
    ['unfetched', 'downloading', true],
    ['unfetched', 'pending', false],
    ['unfetched', 'lost', true],
    ['lost', 'pending', false],
    ['failed', 'pending', true],
    // Choosing results (docs/review.md): a re-roll the user asks for is a new attempt of a done task; a
    // downstream of a rejected result is skipped, and waits again when the result is approved or re-rolled.
    ['done', 'pending', true],
    ['pending', 'skipped', true],
    ['skipped', 'pending', true],
    ['skipped', 'submitting', false],
    // A downstream blocked (over budget) whose upstream result is rejected is skipped too: the store's skip
    // statement takes pending and blocked tasks alike (src/store/chains.ts).
    ['blocked', 'skipped', true],
  ])('%s -> %s allowed: %s', (from, to, allowed) => {
    expect(canMove(from, to)).toBe(allowed);
  });
});
