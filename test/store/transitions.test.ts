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
    // Undocumented statuses mean "not finished yet".
    ['submitted', 'WAITING', 'submitted'],
    ['running', 'completed', 'running'],
    ['running', '', 'running'],
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
    ['done', 'pending', false],
    ['done', 'submitting', false],
    ['failed', 'submitting', false],
    ['in_doubt', 'submitting', false],
    ['pending', 'submitted', false],
  ])('%s -> %s allowed: %s', (from, to, allowed) => {
    expect(canMove(from, to)).toBe(allowed);
  });
});
