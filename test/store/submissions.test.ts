import { describe, expect, it } from 'vitest';
import { StoreError } from '../../src/store/index.js';
import { rawDatabase, submit, task, useStoreWithRun } from './helpers.js';

const ctx = useStoreWithRun();

/** What another process (or the same one after kill -9) would read from the file right now. */
function readFromFile(file: string, sql: string): unknown[] {
  const db = rawDatabase(file, { readonly: true });
  try {
    return db.prepare(sql).all();
  } finally {
    db.close();
  }
}

describe('submitting a task', () => {
  it('commits the intent before the POST: another connection sees the attempt and the submitting task', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    expect(store.submissions.recordSubmitIntent('r1', 'a')).toBe(1);
    expect(readFromFile(ctx.file(), `SELECT state FROM tasks WHERE task_id = 'a'`)).toEqual([
      { state: 'submitting' },
    ]);
    expect(readFromFile(ctx.file(), 'SELECT attempt_no, outcome FROM attempts')).toEqual([
      { attempt_no: 1, outcome: null },
    ]);
  });

  it('records the answer, the job id and the charge together', () => {
    const store = ctx.store();
    const clock = ctx.clock();
    store.tasks.upsertTasks('r1', [task('a')]);
    const attemptNo = store.submissions.recordSubmitIntent('r1', 'a');
    clock.advance(1_500);
    store.submissions.recordSubmitted('r1', 'a', attemptNo, {
      imgUuid: 'uuid-a',
      cost: 2.5,
      keyFingerprint: 'abcdef012345',
    });
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({
      state: 'submitted',
      imgUuid: 'uuid-a',
      cost: 2.5,
      submittedAt: clock.now(),
    });
    expect(store.submissions.attemptsOf('r1', 'a')).toMatchObject([
      {
        attemptNo: 1,
        outcome: 'submitted',
        httpStatus: 200,
        code: 0,
        imgUuid: 'uuid-a',
        answeredAt: clock.now(),
      },
    ]);
    expect(store.ledger.runSpent('r1')).toEqual({ charged: 2.5, refunded: 0, net: 2.5 });
    expect(store.tasks.getTaskByImgUuid('uuid-a')?.taskId).toBe('a');
  });

  it('never lets a task that has a job be submitted again', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    submit(store, 'r1', 'a', 'uuid-a', 3);
    expect(() => store.submissions.recordSubmitIntent('r1', 'a')).toThrow(
      new StoreError(
        'run r1: task a: cannot move from submitted to submitting: this is a bug in mediabatch, please report it',
      ),
    );
    expect(store.submissions.attemptsOf('r1', 'a')).toHaveLength(1);
  });

  it.each([
    {
      outcome: 'rejected' as const,
      httpStatus: 400,
      code: 400,
      message: 'duration: must be 5 or 10',
      state: 'rejected',
    },
    {
      outcome: 'not_charged' as const,
      httpStatus: 200,
      code: 100,
      message: 'tokens not enough',
      state: 'pending',
    },
    {
      outcome: 'not_charged' as const,
      httpStatus: 500,
      code: 500,
      message: 'server error',
      state: 'pending',
    },
  ])('an answer known not to have charged ($code) leaves the task $state, with no charge', (answer) => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    const attemptNo = store.submissions.recordSubmitIntent('r1', 'a');
    store.submissions.recordNotCharged('r1', 'a', attemptNo, answer);
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({
      state: answer.state,
      error: answer.message,
      imgUuid: null,
    });
    expect(store.submissions.attemptsOf('r1', 'a')).toMatchObject([
      { outcome: answer.outcome, httpStatus: answer.httpStatus, code: answer.code, message: answer.message },
    ]);
    expect(store.ledger.runSpent('r1').charged).toBe(0);
  });

  it('retries after a not-charged answer with the next attempt number', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    const first = store.submissions.recordSubmitIntent('r1', 'a');
    store.submissions.recordNotCharged('r1', 'a', first, {
      outcome: 'not_charged',
      message: 'connection refused',
    });
    expect(submit(store, 'r1', 'a', 'uuid-a', 3)).toBe(2);
    expect(store.submissions.attemptsOf('r1', 'a').map((a) => a.outcome)).toEqual([
      'not_charged',
      'submitted',
    ]);
  });

  it('puts a task whose answer was lost in doubt, and keeps it from being submitted again', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    const attemptNo = store.submissions.recordSubmitIntent('r1', 'a');
    store.submissions.recordInDoubt('r1', 'a', attemptNo, {
      message: 'socket reset after the request was sent',
    });
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({ state: 'in_doubt' });
    expect(store.tasks.nextPending('r1', 10)).toEqual([]);
    expect(() => store.submissions.recordSubmitIntent('r1', 'a')).toThrow(
      'cannot move from in_doubt to submitting',
    );
  });

  it('after a crash, turns tasks left submitting into in-doubt ones', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a'), task('b'), task('c')]);
    store.submissions.recordSubmitIntent('r1', 'a');
    submit(store, 'r1', 'b', 'uuid-b', 3);
    expect(store.submissions.recoverInterruptedSubmissions('r1')).toEqual(['a']);
    expect(store.tasks.getTask('r1', 'a')?.state).toBe('in_doubt');
    expect(store.submissions.attemptsOf('r1', 'a')).toMatchObject([{ outcome: 'in_doubt' }]);
    expect(store.tasks.getTask('r1', 'b')?.state).toBe('submitted');
    expect(store.tasks.getTask('r1', 'c')?.state).toBe('pending');
  });

  it('still records a late answer for an in-doubt task, so its charge is not lost', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    const attemptNo = store.submissions.recordSubmitIntent('r1', 'a');
    store.submissions.recordInDoubt('r1', 'a', attemptNo, { message: 'timeout' });
    store.submissions.recordSubmitted('r1', 'a', attemptNo, {
      imgUuid: 'uuid-a',
      cost: 3,
      keyFingerprint: 'abcdef012345',
    });
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({ state: 'submitted', imgUuid: 'uuid-a' });
    expect(store.ledger.runSpent('r1').charged).toBe(3);
  });
});
