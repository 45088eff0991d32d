import { describe, expect, it } from 'vitest';
import { submit, task, useStoreWithRun } from './helpers.js';

const ctx = useStoreWithRun();

describe('spend per task', () => {
  it('counts every job charged for a task, including one sent again after it was in doubt', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a'), task('b'), task('c')]);
    submit(store, 'r1', 'a', 'uuid-a1', 3, 'key-one-0000');
    submit(store, 'r1', 'b', 'uuid-b', 3, 'key-two-0000');
    store.jobs.recordJobStatus('uuid-b', 'failed', { status: 'failed' }, 'poll');
    // The first job of `a` is forgotten by the task (requeued on request) but stays in the ledger.
    store.jobs.recordJobStatus('uuid-a1', 'failed', { status: 'failed' }, 'poll');
    store.tasks.requeueTasks('r1', ['a'], ['failed']);
    submit(store, 'r1', 'a', 'uuid-a2', 2.5, 'key-one-0000');

    expect(store.spend.taskSpend('r1')).toEqual([
      { taskId: 'a', charged: 5.5, refunded: 3, net: 2.5, jobs: 2, assumedJobs: 0 },
      { taskId: 'b', charged: 3, refunded: 3, net: 0, jobs: 1, assumedJobs: 0 },
    ]);
    expect(store.tasks.getTask('r1', 'a')?.cost).toBe(2.5);
    expect(store.spend.runKeys('r1')).toEqual(['key-one-0000', 'key-two-0000']);
  });

  it('is empty for a run that spent nothing', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    expect(store.spend.taskSpend('r1')).toEqual([]);
    expect(store.spend.runKeys('r1')).toEqual([]);
    expect(store.spend.taskSpend('no-such-run')).toEqual([]);
  });
});
