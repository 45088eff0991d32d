// The money module (src/money) against a real store: the runner's view of a run's money is the store's
// figures read back, its own submissions in flight counted once, and a spend fits only when the run's
// budget and, for a fired run, the period's hold it. What a preflight reads as owed is the store's too.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  decideReserving,
  OverBudgetError,
  owedSoFar,
  periodMoney,
  RunMoney,
  runMoney,
  spendFromPeriod,
} from '../../src/money/index.js';
import { WriteQueue } from '../../src/run/writes.js';
import type { Store } from '../../src/store/index.js';
import { FakeClock, submit, task, useTempDirs } from '../store/helpers.js';

const temp = useTempDirs();
const M = 1_000_000;

/** A store with run `r` of /m/a.yaml (budget in settings, if any) and tasks a–e of 3 tokens each. */
function storeWithRun(budget?: number): Store {
  const store = temp.open(join(temp.dir(), 'state.db'), { now: new FakeClock().now });
  const settings = budget === undefined ? {} : { budget };
  store.runs.createRun({ id: 'r', manifestPath: '/m/a.yaml', manifestName: 'a', settings });
  store.tasks.upsertTasks('r', [{ ...task('a'), review: true }, task('b'), task('c'), task('d'), task('e')]);
  return store;
}

/** The runner's group commit, bringing the run's figures back with each batch as the runner's does. */
function groupCommit(store: Store, money: RunMoney): WriteQueue {
  return new WriteQueue(store, () => money.readWithBatch());
}

describe('runMoney: the run figures every spender reads', () => {
  it('sums what the budget holds and what it leaves, never below zero', () => {
    const store = storeWithRun(10);
    submit(store, 'r', 'a', 'u-a', 2);
    store.submissions.recordSubmitIntent('r', 'b');
    expect(runMoney(store, 'r')).toEqual({
      budget: 10 * M,
      charged: 2 * M,
      refunded: 0,
      held: 3 * M,
      doubt: 0,
      period: undefined,
      committed: 5 * M,
      left: 5 * M,
    });
    store.submissions.recordInDoubt('r', 'b', 1, { message: 'lost' });
    store.runs.updateRunSettings('r', { budget: 4 });
    expect(runMoney(store, 'r')).toMatchObject({ held: 0, doubt: 3 * M, committed: 5 * M, left: 0 });
    store.jobs.recordJobStatus('u-a', 'failed', { status: 'failed' }, 'poll');
    expect(runMoney(store, 'r')).toMatchObject({ refunded: 2 * M, committed: 3 * M, left: 1 * M });
  });

  it('leaves `left` undefined without a budget', () => {
    const store = storeWithRun();
    expect(runMoney(store, 'r')).toMatchObject({ budget: undefined, committed: 0, left: undefined });
  });
});

describe('owedSoFar: what a preflight adds to what it would send', () => {
  it('counts doubt and held worst cases, but not a re-roll whose task is still pending (counted as to send)', () => {
    const store = storeWithRun(20);
    submit(store, 'r', 'a', 'u-a', 2);
    store.tasks.moveTask('r', 'a', 'downloading', null);
    store.tasks.markDone('r', 'a');
    submit(store, 'r', 'b', 'u-b', 1);
    store.jobs.recordJobStatus('u-b', 'failed', { status: 'failed' }, 'poll');
    store.submissions.recordSubmitIntent('r', 'c');
    store.submissions.recordSubmitIntent('r', 'd');
    store.submissions.recordInDoubt('r', 'd', 1, { message: 'lost' });
    const [rerolled] = decideReserving(store, 'r', [{ taskId: 'a', req: { verdict: 'reroll', by: 'ana' } }]);
    expect(rerolled).toMatchObject({ ok: true });
    // Held: c (3, in flight) and a (3, the re-roll, pending); doubt: d (3). Spent: 2 + 1 − 1.
    expect(runMoney(store, 'r')).toMatchObject({ held: 6 * M, doubt: 3 * M });
    expect(owedSoFar(store, 'r')).toEqual({ spent: 2 * M, reserved: 6 * M });
  });
});

describe('a period budget (budget_per_period) of a fired run', () => {
  it('is set in micro-tokens and read with every run of the manifest', () => {
    const store = storeWithRun();
    // A run the scheduler did not fire spends from no period.
    spendFromPeriod(store, 'r', undefined);
    expect(runMoney(store, 'r').period).toBeUndefined();
    spendFromPeriod(store, 'r', { period: '2025-03', budget: 7.5000004 });
    submit(store, 'r', 'a', 'u-a', 2);
    store.submissions.recordSubmitIntent('r', 'b');
    expect(runMoney(store, 'r').period).toEqual({
      period: '2025-03',
      budget: 7_500_000,
      spent: 2 * M,
      reserved: 3 * M,
    });
    expect(periodMoney(store, '/m/a.yaml', '2025-03')).toEqual({ spent: 2 * M, reserved: 3 * M });
  });
});

describe('RunMoney: the runner’s money', () => {
  it('counts its own submissions once: pending before the intent, held after, gone once answered; its figures come with its commits', async () => {
    const store = storeWithRun(10);
    const money = new RunMoney(store, 'r', 10 * M);
    const writes = groupCommit(store, money);
    money.start();
    expect(money.figures).toMatchObject({ budget: 10 * M, committed: 0 });
    expect(money.budgetMicro).toBe(10 * M);
    // From here on its own writes bring the figures back: it never reads them on its own.
    const reads = { n: 0 };
    const figures = store.reservations.figures.bind(store.reservations);
    store.reservations.figures = (...args) => {
      reads.n += 1;
      return figures(...args);
    };

    money.reserving(3 * M);
    expect(money.inFlightMaxMicro).toBe(3 * M);
    expect(money.committedMicro()).toBe(0);
    // Room for 7 beside the 3 on their way; 8 fits only alone (once they are answered).
    expect(money.fits(7 * M)).toBe(true);
    expect(money.fits(7 * M + 1)).toBe(false);
    expect(money.fits(10 * M, true)).toBe(true);
    expect(money.fits(10 * M + 1, true)).toBe(false);

    await writes.write(() => store.submissions.recordSubmitIntent('r', 'b'));
    money.reserved(3 * M);
    expect(money.inFlightMaxMicro).toBe(3 * M);
    // The store holds it now, and the process counts it as its own: not twice.
    expect(money.figures.held).toBe(3 * M);
    expect(money.committedMicro()).toBe(0);
    expect(money.fits(7 * M)).toBe(true);
    expect(money.fits(7 * M + 1)).toBe(false);

    await writes.write(() =>
      store.submissions.recordSubmitted('r', 'b', 1, {
        imgUuid: 'u-b',
        cost: 2,
        keyFingerprint: 'fp0000000000',
      }),
    );
    money.answered(3 * M);
    expect(money.inFlightMaxMicro).toBe(0);
    expect(money.committedMicro()).toBe(2 * M);
    expect(money.figures).toMatchObject({ held: 0, charged: 2 * M, committed: 2 * M });
    expect(money.charged).toBe(2);
    expect(money.refunded).toBe(0);
    expect(money.fits(8 * M)).toBe(true);
    expect(money.fits(8 * M + 1)).toBe(false);
    // A write refused in its batch: the figures still come back with the commit.
    await expect(
      writes.write(() => {
        throw new Error('refused');
      }),
    ).rejects.toThrow('refused');
    expect(money.figures.charged).toBe(2 * M);
    expect(reads.n).toBe(0);

    money.reserving(3 * M);
    money.refused(3 * M);
    expect(money.inFlightMaxMicro).toBe(0);
    expect(money.committedMicro()).toBe(2 * M);

    // A write not made through the group commit (another spender's) is not seen until told.
    store.jobs.recordJobStatus('u-b', 'failed', { status: 'failed' }, 'poll');
    expect(money.refunded).toBe(0);
    money.changed();
    expect(money.refunded).toBe(2);
    expect(money.committedMicro()).toBe(0);
  });

  it('reads what another spender reserved once told, and fits nothing the store would refuse', () => {
    const store = storeWithRun(10);
    const money = new RunMoney(store, 'r', 10 * M);
    money.start();
    expect(money.fits(10 * M)).toBe(true);
    // Another process (the page's re-roll, a second runner) takes 6 of the room.
    store.submissions.recordSubmitIntent('r', 'c');
    store.submissions.recordSubmitIntent('r', 'd');
    money.changed();
    expect(money.committedMicro()).toBe(6 * M);
    expect(money.fits(4 * M)).toBe(true);
    expect(money.fits(4 * M + 1)).toBe(false);
    store.submissions.recordSubmitIntent('r', 'e');
    expect(() => store.submissions.recordSubmitIntent('r', 'b')).toThrow(OverBudgetError);
  });

  it('starts the budget it works under as the one every spender checks, or none', () => {
    const store = storeWithRun(10);
    const money = new RunMoney(store, 'r', 4 * M);
    money.start();
    expect(runMoney(store, 'r').budget).toBe(4 * M);
    const unlimited = new RunMoney(store, 'r', undefined);
    unlimited.start();
    expect(runMoney(store, 'r').budget).toBeUndefined();
    expect(unlimited.fits(Number.MAX_SAFE_INTEGER)).toBe(true);
    expect(unlimited.tightest()).toBeUndefined();
    // A budget set on the run since (the store would refuse beyond it): the runner keeps to it too.
    store.runs.updateRunSettings('r', { budget: 2 });
    unlimited.changed();
    expect(unlimited.fits(2 * M, true)).toBe(true);
    expect(unlimited.fits(2 * M + 1, true)).toBe(false);
    expect(unlimited.tightest()).toMatchObject({ setting: 'budget', leftMicro: 2 * M });
  });

  it('reads the budget the store keeps: another process lowered it', () => {
    const store = storeWithRun(10);
    const money = new RunMoney(store, 'r', 10 * M);
    money.start();
    store.runs.updateRunSettings('r', { budget: 4 });
    money.changed();
    expect(money.fits(4 * M, true)).toBe(true);
    expect(money.fits(4 * M + 1, true)).toBe(false);
    expect(money.tightest()).toEqual({
      name: 'the budget of 4 tokens',
      setting: 'budget',
      leftMicro: 4 * M,
      room: '4 tokens left',
    });
  });

  it('a fired run without a budget of its own: the period is the only limit', () => {
    const store = storeWithRun();
    spendFromPeriod(store, 'r', { period: '2025-03', budget: 5 });
    const money = new RunMoney(store, 'r', undefined);
    money.start();
    expect(money.fits(5 * M, true)).toBe(true);
    expect(money.fits(5 * M + 1, true)).toBe(false);
    expect(money.tightest()).toEqual({
      name: 'budget_per_period of 5 tokens in 2025-03',
      setting: 'budget_per_period',
      leftMicro: 5 * M,
      room: '5 tokens left',
    });
  });

  it('checks the period of a fired run beside its budget, and names the tighter one', async () => {
    const store = storeWithRun(10);
    store.runs.createRun({ id: 'other', manifestPath: '/m/a.yaml', manifestName: 'a', settings: {} });
    store.tasks.upsertTasks('other', [task('x'), task('y')]);
    submit(store, 'other', 'x', 'u-x', 2);
    const money = new RunMoney(store, 'r', 10 * M);
    money.start();
    expect(money.tightest()).toEqual({
      name: 'the budget of 10 tokens',
      setting: 'budget',
      leftMicro: 10 * M,
      room: '10 tokens left',
    });

    spendFromPeriod(store, 'r', { period: '2025-03', budget: 9 });
    money.changed();
    // The period leaves 7 (2 spent by the other run), the run's budget 10.
    expect(money.fits(7 * M, true)).toBe(true);
    expect(money.fits(7 * M + 1, true)).toBe(false);
    expect(money.tightest()).toEqual({
      name: 'budget_per_period of 9 tokens in 2025-03',
      setting: 'budget_per_period',
      leftMicro: 7 * M,
      room: '7 tokens left',
    });

    // Its own submission in flight: counted once in the period as in the run.
    money.reserving(3 * M);
    await groupCommit(store, money).write(() => store.submissions.recordSubmitIntent('r', 'b'));
    money.reserved(3 * M);
    expect(money.fits(4 * M)).toBe(true);
    expect(money.fits(4 * M + 1)).toBe(false);
    expect(money.fits(7 * M, true)).toBe(true);
    expect(money.fits(7 * M + 1, true)).toBe(false);
    expect(money.tightest()).toMatchObject({ setting: 'budget_per_period', leftMicro: 7 * M });

    // Another run's doubt takes the period below nothing: left is 0, never negative.
    store.submissions.recordSubmitIntent('other', 'y');
    store.submissions.recordInDoubt('other', 'y', 1, { message: 'lost' });
    spendFromPeriod(store, 'r', { period: '2025-03', budget: 4 });
    money.changed();
    expect(money.tightest()).toMatchObject({
      setting: 'budget_per_period',
      leftMicro: 0,
      room: expect.stringMatching(/^already \d+(\.\d+)? tokens? over$/),
    });
    expect(money.fits(0)).toBe(false);

    // A period wider than the run's budget: the run's budget is the tighter, and named.
    spendFromPeriod(store, 'r', { period: '2025-03', budget: 100 });
    store.runs.updateRunSettings('r', { budget: 5 });
    const fresh = new RunMoney(store, 'r', 5 * M);
    fresh.start();
    expect(fresh.tightest()).toEqual({
      name: 'the budget of 5 tokens',
      setting: 'budget',
      leftMicro: 2 * M,
      room: '2 tokens left',
    });
    // Equal room: the period is named, since a fired run's budget is often what the period left it (the
    // scheduler's cap), and raising `budget` would not help.
    spendFromPeriod(store, 'r', { period: '2025-03', budget: 10 });
    fresh.changed();
    expect(fresh.tightest()).toMatchObject({ setting: 'budget_per_period', leftMicro: 2 * M });
  });

  it('keeps its slots, the held worst case of a re-roll, and the estimate moved by exact prices', () => {
    const store = storeWithRun(20);
    submit(store, 'r', 'a', 'u-a', 2);
    store.tasks.moveTask('r', 'a', 'downloading', null);
    store.tasks.markDone('r', 'a');
    const money = new RunMoney(store, 'r', 20 * M);
    money.start();
    expect(money.heldFor('a')).toBe(0);
    decideReserving(store, 'r', [{ taskId: 'a', req: { verdict: 'reroll', by: 'ana' } }]);
    expect(money.heldFor('a')).toBe(3 * M);

    expect(money.slots).toBe(0);
    money.takeSlot();
    money.takeSlot();
    money.freeSlot();
    expect(money.slots).toBe(1);

    expect(money.estimateChange).toBe(0);
    money.estimateMoved(1_500_000);
    money.estimateMoved(-250_000);
    expect(money.estimateChange).toBe(1.25);
  });
});
