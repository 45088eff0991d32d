// The store's reservations one method at a time: what each leaves in the table (amount, kind, state) and
// in the run's figures, and the exact refusal line, so that a wrong sign, a lost row or a reservation
// taken twice shows here as the user would meet it: a spend let through, or one refused for nothing.
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { OverBudgetError, type Store } from '../../src/store/index.js';
import { FakeClock, rawDatabase, submit, task, useTempDirs } from './helpers.js';

const temp = useTempDirs();
const connections: Array<{ close(): unknown }> = [];
afterEach(() => {
  for (const c of connections.splice(0)) c.close();
});
const M = 1_000_000;
const NOW = '2025-03-31T23:00:00.000Z';

interface Row {
  task_id: string;
  kind: string;
  amount: number;
  state: string;
  charged: number | null;
}

/** A store with run `r` (budget 20 unless said) and tasks a (reviewed), b, c, d of 3 tokens each. */
function setUp(settings: Record<string, unknown> = { budget: 20 }): {
  store: Store;
  rows: () => Row[];
  sql: (s: string) => void;
} {
  const file = join(temp.dir(), 'state.db');
  const store = temp.open(file, { now: new FakeClock().now });
  store.runs.createRun({ id: 'r', manifestPath: '/m/a.yaml', manifestName: 'a', settings });
  store.tasks.upsertTasks('r', [{ ...task('a'), review: true }, task('b'), task('c'), task('d')]);
  const raw = rawDatabase(file);
  connections.push(raw);
  return {
    store,
    rows: () =>
      raw
        .prepare('SELECT task_id, kind, amount, state, charged FROM reservations ORDER BY id')
        .all() as Row[],
    sql: (s) => raw.exec(s),
  };
}

function refusal(spend: () => unknown): OverBudgetError {
  try {
    spend();
  } catch (error) {
    if (error instanceof OverBudgetError) return error;
    throw error;
  }
  throw new Error('the spend was recorded');
}

/** Task a done with a charge of 2, then re-rolled: it holds 3 for its next submission. */
function rerolled(store: Store): void {
  submit(store, 'r', 'a', 'u-a', 2);
  store.tasks.moveTask('r', 'a', 'downloading', null);
  store.tasks.markDone('r', 'a');
  const [outcome] = store.reviews.decideMany('r', [{ taskId: 'a', req: { verdict: 'reroll', by: 'ana' } }]);
  expect(outcome).toMatchObject({ ok: true });
}

describe('reservations in the store', () => {
  it('figures of a run it does not know: nothing, no budget, no period', () => {
    const { store } = setUp();
    expect(store.reservations.figures('nope')).toEqual({
      budget: undefined,
      charged: 0,
      refunded: 0,
      held: 0,
      doubt: 0,
      period: undefined,
    });
  });

  it('an intent reserves the worst case as first, retry or doubt by what came before', () => {
    const { store, rows } = setUp();
    store.submissions.recordSubmitIntent('r', 'b');
    expect(rows()).toEqual([{ task_id: 'b', kind: 'first', amount: 3 * M, state: 'held', charged: null }]);
    expect(store.reservations.heldFor('r', 'b')).toBe(3 * M);

    // Charged, then failed and refunded: sent again, an automatic retry.
    store.submissions.recordSubmitted('r', 'b', 1, {
      imgUuid: 'u-b',
      cost: 2,
      keyFingerprint: 'fp0000000000',
    });
    store.jobs.recordJobStatus('u-b', 'failed', { status: 'failed' }, 'poll');
    store.tasks.requeueTasks('r', ['b'], ['failed']);
    store.submissions.recordSubmitIntent('r', 'b');
    // Answer lost: doubt; sent again on the user's word, a retry of doubt.
    store.submissions.recordSubmitIntent('r', 'c');
    store.submissions.recordInDoubt('r', 'c', 1, { message: 'lost' });
    expect(store.reservations.heldFor('r', 'c')).toBe(0);
    store.tasks.requeueTasks('r', ['c'], ['in_doubt']);
    store.submissions.recordSubmitIntent('r', 'c');
    expect(rows()).toEqual([
      { task_id: 'b', kind: 'first', amount: 3 * M, state: 'settled', charged: 2 * M },
      { task_id: 'b', kind: 'retry', amount: 3 * M, state: 'held', charged: null },
      { task_id: 'c', kind: 'first', amount: 3 * M, state: 'released', charged: null },
      { task_id: 'c', kind: 'doubt', amount: 3 * M, state: 'held', charged: null },
    ]);
  });

  it('an intent finding a doubt still open gives it up and reserves anew', () => {
    const { store, rows, sql } = setUp({ budget: 6 });
    sql(
      `INSERT INTO reservations (run_id, task_id, kind, amount, state, reserved_at) VALUES ('r', 'b', 'first', ${3 * M}, 'doubt', '${NOW}')`,
    );
    store.submissions.recordSubmitIntent('r', 'b');
    // The doubt was given up first: 3 + 3 of 6 fits only so.
    expect(rows().map((r) => [r.kind, r.state])).toEqual([
      ['first', 'released'],
      ['first', 'held'],
    ]);
    expect(store.reservations.figures('r')).toMatchObject({ held: 3 * M, doubt: 0 });
  });

  it('a re-roll sent takes over its reservation, even when the budget is full; a dearer one grows by the difference', () => {
    const { store, rows } = setUp({ budget: 8 });
    rerolled(store);
    expect(store.reservations.heldFor('r', 'a')).toBe(3 * M);
    // The budget lowered under what the run holds: the re-roll was reserved already, it is sent on it.
    store.runs.updateRunSettings('r', { budget: 4 });
    expect(store.submissions.recordSubmitIntent('r', 'a')).toBe(2);
    expect(rows().filter((r) => r.state === 'held')).toEqual([
      { task_id: 'a', kind: 'reroll', amount: 3 * M, state: 'held', charged: null },
    ]);

    // Another re-roll, priced higher when sent (5): it needs 2 more, and the budget must hold those.
    const again = setUp({ budget: 7 });
    rerolled(again.store);
    again.sql(`UPDATE tasks SET est_max = 5 WHERE run_id = 'r' AND task_id = 'a'`);
    again.store.runs.updateRunSettings('r', { budget: 6.999999 });
    expect(refusal(() => again.store.submissions.recordSubmitIntent('r', 'a')).message).toBe(
      'a may cost up to 2 tokens and the budget of 6.999999 tokens leaves 1.999999 tokens (2 tokens spent, 3 tokens reserved for tasks asked for, in flight or in doubt)',
    );
    again.store.runs.updateRunSettings('r', { budget: 7 });
    expect(again.store.submissions.recordSubmitIntent('r', 'a')).toBe(2);
    expect(again.rows().filter((r) => r.state === 'held')).toEqual([
      { task_id: 'a', kind: 'reroll', amount: 5 * M, state: 'held', charged: null },
    ]);
  });

  it('re-rolls of one ask: all or none, a task already holding one keeps it, the line names how many', () => {
    const { store, rows } = setUp({ budget: 12 });
    store.reservations.reserveRerolls('r', ['b'], NOW);
    store.reservations.reserveRerolls('r', ['b', 'c'], NOW);
    expect(rows().map((r) => [r.task_id, r.kind, r.amount, r.state])).toEqual([
      ['b', 'reroll', 3 * M, 'held'],
      ['c', 'reroll', 3 * M, 'held'],
    ]);
    submit(store, 'r', 'a', 'u-a', 4);
    store.jobs.recordJobStatus('u-a', 'failed', { status: 'failed' }, 'poll');
    store.runs.updateRunSettings('r', { budget: 11 });
    // 4 − 4 spent, 6 held: two more (6) pass 11.
    const error = refusal(() => store.reservations.reserveRerolls('r', ['c', 'd', 'a'], NOW));
    expect(error.message).toBe(
      '2 tasks may cost up to 6 tokens and the budget of 11 tokens leaves 5 tokens (0 tokens spent, 6 tokens reserved for tasks asked for, in flight or in doubt)',
    );
    expect(error.name).toBe('OverBudgetError');
    expect(rows()).toHaveLength(3);
  });

  it('an answer settles held or doubt; a release gives back held only, unless doubt is named', () => {
    const { store, rows } = setUp();
    for (const id of ['b', 'c', 'd']) store.submissions.recordSubmitIntent('r', id);
    store.submissions.recordInDoubt('r', 'c', 1, { message: 'lost' });
    store.submissions.recordInDoubt('r', 'd', 1, { message: 'lost' });

    store.reservations.release('r', 'c', NOW);
    expect(store.reservations.figures('r')).toMatchObject({ held: 3 * M, doubt: 6 * M });
    store.reservations.release('r', 'c', NOW, ['doubt']);
    store.reservations.settle('r', 'd', 1 * M, NOW);
    store.reservations.release('r', 'b', NOW);
    expect(rows().map((r) => [r.task_id, r.state, r.charged])).toEqual([
      ['b', 'released', null],
      ['c', 'released', null],
      ['d', 'settled', 1 * M],
    ]);
    expect(store.reservations.figures('r')).toMatchObject({ held: 0, doubt: 0 });
  });

  it('refuses with what is spent and reserved, doubt and refunds counted, never a negative room', () => {
    const { store } = setUp({ budget: 10 });
    submit(store, 'r', 'a', 'u-a', 3);
    submit(store, 'r', 'b', 'u-b', 2);
    store.jobs.recordJobStatus('u-b', 'failed', { status: 'failed' }, 'poll');
    store.submissions.recordSubmitIntent('r', 'c');
    store.submissions.recordInDoubt('r', 'c', 1, { message: 'lost' });
    // 3 spent + 3 in doubt = 6 of 10: d (3) fits with 1 to spare, so a budget of 8.999999 refuses it.
    store.runs.updateRunSettings('r', { budget: 8.999999 });
    expect(refusal(() => store.submissions.recordSubmitIntent('r', 'd')).message).toBe(
      'd may cost up to 3 tokens and the budget of 8.999999 tokens leaves 2.999999 tokens (3 tokens spent, 3 tokens reserved for tasks asked for, in flight or in doubt)',
    );
    store.runs.updateRunSettings('r', { budget: 5 });
    const over = refusal(() => store.submissions.recordSubmitIntent('r', 'd'));
    // Spent and reserved past a budget lowered under them: by how much it is over, not "leaves 0".
    expect(over.message).toBe(
      'd may cost up to 3 tokens and the budget of 5 tokens is already 1 token over (3 tokens spent, 3 tokens reserved for tasks asked for, in flight or in doubt)',
    );
    expect(over.leftMicro).toBe(0);
    store.runs.updateRunSettings('r', { budget: 9 });
    expect(store.submissions.recordSubmitIntent('r', 'd')).toBe(1);
  });

  it('keeps the budget a runner sets, and none', () => {
    const { store } = setUp();
    store.reservations.setBudget('r', 4 * M);
    expect(store.reservations.figures('r').budget).toBe(4 * M);
    store.reservations.setBudget('r', undefined);
    expect(store.reservations.figures('r').budget).toBeUndefined();
    for (const id of ['a', 'b', 'c', 'd']) store.submissions.recordSubmitIntent('r', id);
    expect(store.reservations.figures('r').held).toBe(12 * M);
  });

  it('counts held worst cases of pending tasks apart (re-rolls not sent yet)', () => {
    const { store } = setUp();
    expect(store.reservations.heldForPending('r')).toBe(0);
    rerolled(store);
    store.submissions.recordSubmitIntent('r', 'b');
    expect(store.reservations.heldForPending('r')).toBe(3 * M);
    expect(store.reservations.figures('r').held).toBe(6 * M);
  });
});
