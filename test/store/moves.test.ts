// The life cycle's table (src/store/transitions.ts) as the store applies it: every legitimate move after
// payment is accepted and keeps the one charge; every move the table refuses is refused with the line
// that names it. A state missing from a list would strand a paid task (a stalled job that finishes
// could never be fetched) or refuse a user's request; one added would risk a second charge.
import { describe, expect, it } from 'vitest';
import { chooseRun } from '../../src/run/resume.js';
import {
  canMove,
  NEVER_CHARGED,
  OWED,
  REQUEUEABLE,
  type Store,
  type TaskState,
  WATCHED,
} from '../../src/store/index.js';
import { submit, T0, task, useStoreWithRun, useTempDirs } from './helpers.js';

const ctx = useStoreWithRun();

/** The states a task reaches through the store's own operations (awaiting_review is shown, never stored). */
const REACHABLE = [
  'pending',
  'submitting',
  'in_doubt',
  'submitted',
  'running',
  'stalled',
  'downloading',
  'unfetched',
  'done',
  'failed',
  'rejected',
  'blocked',
  'lost',
] as const satisfies readonly TaskState[];

type Reachable = (typeof REACHABLE)[number];

/** Each task costs 3 tokens; its job id is `uuid-<task id>`. */
const COST = 3;

/** Brings a new pending task to `state` the way a run would, paying for it where a run would. */
function reach(store: Store, taskId: string, state: Reachable, runId = 'r1'): void {
  store.tasks.upsertTasks(runId, [task(taskId, {}, COST)]);
  const uuid = `uuid-${taskId}`;
  const job = (status: string) =>
    store.jobs.recordJobStatus(uuid, status, { img_uuid: uuid, status }, 'poll');
  const sent = () => store.submissions.recordSubmitIntent(runId, taskId);
  const unsent: Partial<Record<Reachable, () => unknown>> = {
    pending: () => undefined,
    blocked: () => store.tasks.markBlocked(runId, taskId, 'over budget'),
    submitting: sent,
    in_doubt: () => store.submissions.recordInDoubt(runId, taskId, sent(), { message: 'connection reset' }),
    rejected: () =>
      store.submissions.recordNotCharged(runId, taskId, sent(), {
        outcome: 'rejected',
        httpStatus: 400,
        message: 'bad',
      }),
  };
  const before = unsent[state];
  if (before !== undefined) {
    before();
    return;
  }
  submit(store, runId, taskId, uuid, COST);
  if (state === 'stalled') store.tasks.moveTask(runId, taskId, 'stalled', 'past its deadline');
  else if (state !== 'submitted') {
    job(state === 'running' ? 'processing' : state === 'failed' ? 'failed' : 'success');
    if (state === 'done') store.tasks.markDone(runId, taskId);
    if (state === 'unfetched' || state === 'lost')
      store.tasks.moveTask(runId, taskId, 'unfetched', 'link expired');
    if (state === 'lost') store.tasks.moveTask(runId, taskId, 'lost', 'the service answered 404');
  }
}

const stateOf = (store: Store, taskId: string) => store.tasks.getTask('r1', taskId)?.state;

describe('every legitimate move after payment is accepted and keeps one charge', () => {
  it.each<[Reachable, string, TaskState, (s: Store, id: string) => unknown]>([
    // The answer to the POST arrives: the job is watched and its charge booked once.
    ['submitting', 'the answer', 'submitted', (s, id) => submit2(s, id)],
    // A late callback names the job of a submission in doubt: the doubt is resolved, not paid again.
    ['in_doubt', 'a late answer', 'submitted', (s, id) => adopt(s, id)],
    // Past its deadline the slot is released, the job still watched.
    ['submitted', 'past its deadline', 'stalled', (s, id) => s.tasks.moveTask('r1', id, 'stalled', 'late')],
    ['running', 'past its deadline', 'stalled', (s, id) => s.tasks.moveTask('r1', id, 'stalled', 'late')],
    // The job finished: its files are fetched, from wherever the job was.
    ['submitted', 'files fetched', 'downloading', (s, id) => s.tasks.moveTask('r1', id, 'downloading', null)],
    ['running', 'files fetched', 'downloading', (s, id) => s.tasks.moveTask('r1', id, 'downloading', null)],
    ['stalled', 'files fetched', 'downloading', (s, id) => s.tasks.moveTask('r1', id, 'downloading', null)],
    ['unfetched', 'fetched again', 'downloading', (s, id) => s.tasks.moveTask('r1', id, 'downloading', null)],
    ['stalled', 'success news', 'downloading', (s, id) => news(s, id, 'success')],
    ['stalled', 'failure news', 'failed', (s, id) => news(s, id, 'failed')],
    ['submitted', 'processing news', 'running', (s, id) => news(s, id, 'processing')],
    ['submitted', 'success news', 'downloading', (s, id) => news(s, id, 'success')],
    ['running', 'success news', 'downloading', (s, id) => news(s, id, 'success')],
    // A failed job is refunded.
    ['submitted', 'failure news', 'failed', (s, id) => news(s, id, 'failed')],
    ['running', 'failure news', 'failed', (s, id) => news(s, id, 'failed')],
    // A paid result that cannot be had yet waits for a later run.
    ['submitted', 'link expired', 'unfetched', (s, id) => s.tasks.moveTask('r1', id, 'unfetched', 'expired')],
    ['running', 'link expired', 'unfetched', (s, id) => s.tasks.moveTask('r1', id, 'unfetched', 'expired')],
    ['stalled', 'link expired', 'unfetched', (s, id) => s.tasks.moveTask('r1', id, 'unfetched', 'expired')],
    [
      'downloading',
      'link expired',
      'unfetched',
      (s, id) => s.tasks.moveTask('r1', id, 'unfetched', 'expired'),
    ],
    // The files are on disk.
    ['downloading', 'files on disk', 'done', (s, id) => s.tasks.markDone('r1', id)],
    ['unfetched', 'files on disk', 'done', (s, id) => s.tasks.markDone('r1', id)],
    // The service no longer has the job: given up, the charge kept on the books.
    ['downloading', 'gone', 'lost', (s, id) => s.tasks.moveTask('r1', id, 'lost', 'HTTP 404')],
    ['unfetched', 'gone', 'lost', (s, id) => s.tasks.moveTask('r1', id, 'lost', 'HTTP 404')],
  ])('%s + %s -> %s', (from, _what, to, move) => {
    const store = ctx.store();
    reach(store, 't', from);
    move(store, 't');
    expect(stateOf(store, 't')).toBe(to);
    expect(canMove(from, to)).toBe(true);
    // One charge for the task whatever the path (an answer books it, nothing after charges again); only
    // a failure gives it back.
    expect(store.ledger.runSpent('r1')).toEqual({
      charged: COST,
      refunded: to === 'failed' ? COST : 0,
      net: to === 'failed' ? 0 : COST,
    });
  });
});

describe("every move before payment, or on the user's request, is accepted and charges nothing", () => {
  const attempt = (s: Store, id: string) => s.submissions.attemptsOf('r1', id).at(-1)?.attemptNo ?? 0;
  it.each<[Reachable, string, TaskState, (s: Store, id: string) => unknown]>([
    // A chained task whose filled-in request breaks its model's rules is never sent.
    ['pending', 'a filled-in request refused', 'rejected', (s, id) => s.chains.rejectUnsent('r1', id, 'bad')],
    // The answer to the POST says it was refused: the task ends, or waits to be sent again.
    [
      'submitting',
      'HTTP 400',
      'rejected',
      (s, id) =>
        s.submissions.recordNotCharged('r1', id, attempt(s, id), { outcome: 'rejected', message: 'bad' }),
    ],
    [
      'submitting',
      'HTTP 503 before acting',
      'pending',
      (s, id) =>
        s.submissions.recordNotCharged('r1', id, attempt(s, id), { outcome: 'not_charged', message: 'busy' }),
    ],
    // No answer after the request went out: in doubt, never sent again on its own.
    [
      'submitting',
      'a reset',
      'in_doubt',
      (s, id) => s.submissions.recordInDoubt('r1', id, attempt(s, id), { message: 'x' }),
    ],
    ['submitting', 'a crash', 'in_doubt', (s) => s.submissions.recoverInterruptedSubmissions('r1')],
    // The user asks: --retry-in-doubt, a retry of failures (refunded), --accept-changes, a raised budget.
    ['in_doubt', '--retry-in-doubt', 'pending', (s, id) => s.tasks.requeueTasks('r1', [id], ['in_doubt'])],
    ['failed', 'a retry', 'pending', (s, id) => s.tasks.requeueTasks('r1', [id], ['failed'])],
    ['rejected', 'a changed request', 'pending', (s, id) => s.tasks.requeueTasks('r1', [id], ['rejected'])],
    ['blocked', 'a raised budget', 'pending', (s, id) => s.tasks.unblock('r1', id)],
  ])('%s + %s -> %s', (from, _what, to, move) => {
    const store = ctx.store();
    reach(store, 't', from);
    const spent = store.ledger.runSpent('r1');
    move(store, 't');
    expect(stateOf(store, 't')).toBe(to);
    expect(canMove(from, to)).toBe(true);
    expect(store.ledger.runSpent('r1')).toEqual(spent);
  });
});

function submit2(store: Store, taskId: string): void {
  const attempt = store.submissions.attemptsOf('r1', taskId).at(-1)?.attemptNo ?? 0;
  store.submissions.recordSubmitted('r1', taskId, attempt, {
    imgUuid: `uuid-${taskId}`,
    cost: COST,
    keyFingerprint: 'fp',
  });
}

function adopt(store: Store, taskId: string): void {
  expect(
    store.submissions.adoptInDoubt('r1', taskId, {
      imgUuid: `uuid-${taskId}`,
      cost: COST,
      keyFingerprint: 'fp',
    }),
  ).toBe(true);
}

function news(store: Store, taskId: string, status: string): void {
  store.jobs.recordJobStatus(`uuid-${taskId}`, status, { status }, 'callback');
}

/** The store's operations that move a task to one state, whatever state it is in. */
const MOVES: Array<[TaskState, (s: Store, id: string) => unknown]> = [
  ['stalled', (s, id) => s.tasks.moveTask('r1', id, 'stalled', 'late')],
  ['unfetched', (s, id) => s.tasks.moveTask('r1', id, 'unfetched', 'expired')],
  ['downloading', (s, id) => s.tasks.moveTask('r1', id, 'downloading', null)],
  ['lost', (s, id) => s.tasks.moveTask('r1', id, 'lost', 'HTTP 404')],
  ['done', (s, id) => s.tasks.markDone('r1', id)],
  ['blocked', (s, id) => s.tasks.markBlocked('r1', id, 'over budget')],
  ['submitting', (s, id) => s.submissions.recordSubmitIntent('r1', id)],
];

describe('the store moves a task exactly where the life cycle allows', () => {
  it.each(MOVES.map(([to, move]) => [to, move] as const))('to %s', (to, move) => {
    const store = ctx.store();
    for (const from of REACHABLE) {
      reach(store, from, from);
      const spent = store.ledger.runSpent('r1');
      if (canMove(from, to)) {
        move(store, from);
        expect(stateOf(store, from), `${from} -> ${to}`).toBe(to);
      } else {
        expect(() => move(store, from), `${from} -> ${to}`).toThrow(
          `run r1: task ${from}: cannot move from ${from} to ${to}: this is a bug in mediabatch, please report it`,
        );
        expect(stateOf(store, from)).toBe(from);
      }
      expect(store.ledger.runSpent('r1')).toEqual(spent);
    }
  });
});

describe('the lists of states the store and the runner read', () => {
  it('sends back to pending, when the user asks, exactly the tasks in doubt, failed, rejected or blocked', () => {
    const store = ctx.store();
    for (const state of REACHABLE) reach(store, state, state);
    const requeued = store.tasks.requeueTasks('r1', [...REACHABLE]);
    expect(requeued.sort()).toEqual(['blocked', 'failed', 'in_doubt', 'rejected']);
    expect([...REQUEUEABLE].sort()).toEqual(requeued);
    for (const id of requeued) expect(stateOf(store, id)).toBe('pending');
    // A requeue is a move the life cycle allows from each of them.
    for (const state of REQUEUEABLE) expect(canMove(state, 'pending')).toBe(true);
  });

  it('edits a changed task in place only while nothing was charged for it; a paid one needs --accept-changes', () => {
    const store = ctx.store();
    for (const state of REACHABLE) reach(store, state, state);
    const edited = REACHABLE.map((id) => task(id, { seed: 7 }, COST));
    const result = store.tasks.upsertTasks('r1', edited);
    expect(result.updated.sort()).toEqual(['blocked', 'pending', 'rejected']);
    expect(result.changed.map((c) => c.taskId).sort()).toEqual(
      REACHABLE.filter((s) => !['blocked', 'pending', 'rejected'].includes(s)).sort(),
    );
    // Skipped tasks are never sent either: the same list covers them (reached through a rejected review).
    expect([...NEVER_CHARGED].sort()).toEqual(['blocked', 'pending', 'rejected', 'skipped']);
  });

  it('polls every job still being produced, a stalled one too', () => {
    const store = ctx.store();
    for (const state of REACHABLE) reach(store, state, state);
    const watched = store.tasks.tasksToWatch('r1').map((t) => t.taskId);
    expect(watched.sort()).toEqual(['running', 'stalled', 'submitted']);
    expect([...WATCHED].sort()).toEqual(watched);
  });
});

describe('a run left behind by --new-run', () => {
  const temp = useTempDirs();

  it('counts as owed every task that was sent and is not on disk, in doubt included', () => {
    const store = temp.open(`${temp.dir()}/state.db`, { now: () => T0 });
    store.runs.createRun({ id: 'old', manifestPath: '/m/spring.yaml', manifestName: 'spring', settings: {} });
    for (const state of REACHABLE) reach(store, state, state, 'old');
    const choice = chooseRun(store, {
      manifestPath: '/m/spring.yaml',
      manifestName: 'spring',
      templateRunId: 'spring-2',
      newRun: true,
    });
    const owed = ['submitting', 'in_doubt', 'submitted', 'running', 'stalled', 'downloading', 'unfetched'];
    expect(choice.leftBehind?.owed).toBe(owed.length);
    expect([...OWED].sort()).toEqual(owed.sort());
  });
});
