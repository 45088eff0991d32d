// Answers the store must survive: the same img_uuid for two tasks, a cost the API did not state, a lost
// answer proved accepted by a callback, and a failed job submitted again.
import { describe, expect, it } from 'vitest';
import { submit, task, useStoreWithRun } from './helpers.js';

const ctx = useStoreWithRun();

describe('answers to a submission', () => {
  it('a second task answered with an img_uuid another task has is in doubt, not a crash; nothing is booked twice', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a'), task('b')]);
    submit(store, 'r1', 'a', 'uuid-1', 3);
    const attempt = store.submissions.recordSubmitIntent('r1', 'b');
    const recorded = store.submissions.recordSubmitted('r1', 'b', attempt, {
      imgUuid: 'uuid-1',
      cost: 3,
      keyFingerprint: 'fp',
    });
    expect(recorded).toEqual({
      state: 'in_doubt',
      message:
        'the API answered with job uuid-1, which task a of run r1 already has: this submission may or may not have been charged',
    });
    expect(store.tasks.getTask('r1', 'b')).toMatchObject({ state: 'in_doubt', imgUuid: null });
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({ state: 'submitted', imgUuid: 'uuid-1' });
    expect(store.ledger.runSpent('r1')).toEqual({ charged: 3, refunded: 0, net: 3 });
  });

  it('a cost the API did not state is booked at the list price and marked as assumed', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a', {}, 2.5)]);
    const attempt = store.submissions.recordSubmitIntent('r1', 'a');
    store.submissions.recordSubmitted('r1', 'a', attempt, {
      imgUuid: 'uuid-a',
      cost: undefined,
      listPrice: 2.5,
      keyFingerprint: 'fp',
    });
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({
      state: 'submitted',
      cost: 2.5,
      costAssumed: true,
    });
    expect(store.ledger.runSpent('r1')).toEqual({ charged: 2.5, refunded: 0, net: 2.5 });
  });

  it('a task in doubt adopts the job a callback proved, once; its attempt says it was recovered', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a', {}, 2)]);
    const attempt = store.submissions.recordSubmitIntent('r1', 'a');
    store.submissions.recordInDoubt('r1', 'a', attempt, { message: 'connection reset after sending' });
    const answer = { imgUuid: 'uuid-a', cost: undefined, listPrice: 2, keyFingerprint: 'fp' };
    expect(store.submissions.adoptInDoubt('r1', 'a', answer)).toBe(true);
    expect(store.submissions.adoptInDoubt('r1', 'a', answer)).toBe(false);
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({
      state: 'submitted',
      imgUuid: 'uuid-a',
      recovered: true,
      costAssumed: true,
    });
    expect(store.submissions.attemptsOf('r1', 'a')).toMatchObject([
      {
        attemptNo: 1,
        outcome: 'submitted',
        imgUuid: 'uuid-a',
        message: expect.stringMatching(/^recovered from doubt/),
      },
    ]);
    expect(store.ledger.runSpent('r1').charged).toBe(2);
  });

  it('a failed job goes back to pending as a new attempt; each job keeps its charge and refund', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a', {}, 2)]);
    submit(store, 'r1', 'a', 'uuid-1', 2);
    store.jobs.recordJobStatus('uuid-1', 'failed', { status: 'failed' }, 'poll');
    expect(store.submissions.chargedAttempts('r1', 'a')).toBe(1);
    expect(store.tasks.requeueTasks('r1', ['a'], ['failed'])).toEqual(['a']);
    submit(store, 'r1', 'a', 'uuid-2', 2);
    expect(store.submissions.chargedAttempts('r1', 'a')).toBe(2);
    expect(store.submissions.attemptsOf('r1', 'a').map((a) => [a.attemptNo, a.imgUuid])).toEqual([
      [1, 'uuid-1'],
      [2, 'uuid-2'],
    ]);
    expect(store.ledger.runSpent('r1')).toEqual({ charged: 4, refunded: 2, net: 2 });
  });
});
