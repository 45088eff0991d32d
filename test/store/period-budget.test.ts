// A schedule's budget_per_period, checked by the store in the transaction of each spend of a fired run,
// beside the run's own budget: two runs of one manifest fired in one period, each with a budget the period
// cannot hold twice, never pass the period's cap, whoever spends (the runner's intent, a re-roll).
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { owedSoFar, periodMoney, runMoney, spendFromPeriod } from '../../src/money/index.js';
import { OverBudgetError, type Store } from '../../src/store/index.js';
import { FakeClock, submit, task, useTempDirs } from './helpers.js';

const temp = useTempDirs();
const MANIFEST = '/m/nightly.yaml';
const M = 1_000_000;

/** Two runs of one manifest, fired in March 2025 under a period budget of 10, each with a budget of 9. */
function twoFiredRuns(): Store {
  const store = temp.open(join(temp.dir(), 'state.db'), { now: new FakeClock().now });
  for (const id of ['r1', 'r2']) {
    store.runs.createRun({ id, manifestPath: MANIFEST, manifestName: 'nightly', settings: { budget: 9 } });
    spendFromPeriod(store, id, { period: '2025-03', budget: 10 });
  }
  store.tasks.upsertTasks('r1', [{ ...task('still'), review: true }, task('a')]);
  store.tasks.upsertTasks('r2', [task('b'), task('c')]);
  return store;
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

describe("a schedule's period budget in the store", () => {
  it('refuses the intent that would pass the period, though the run has room, and records nothing', () => {
    const store = twoFiredRuns();
    submit(store, 'r1', 'still', 'u-still', 3);
    submit(store, 'r1', 'a', 'u-a', 3);
    store.submissions.recordSubmitIntent('r2', 'b');

    // r2's own budget holds c (3 held + 3 ≤ 9); the period does not (6 spent + 3 held + 3 > 10).
    const error = refusal(() => store.submissions.recordSubmitIntent('r2', 'c'));
    expect(error.message).toBe(
      "c may cost up to 3 tokens and budget_per_period of 10 tokens leaves 1 token in 2025-03 (6 tokens spent by the manifest's runs in 2025-03, 3 tokens reserved for their tasks asked for, in flight or in doubt)",
    );
    expect([error.leftMicro, error.needMicro]).toEqual([1 * M, 3 * M]);
    // A period budget lowered under what the runs took: by how much it is over, not "leaves 0".
    spendFromPeriod(store, 'r2', { period: '2025-03', budget: 8 });
    const over = refusal(() => store.submissions.recordSubmitIntent('r2', 'c'));
    expect(over.message).toBe(
      "c may cost up to 3 tokens and budget_per_period of 8 tokens is already 1 token over in 2025-03 (6 tokens spent by the manifest's runs in 2025-03, 3 tokens reserved for their tasks asked for, in flight or in doubt)",
    );
    expect(over.leftMicro).toBe(0);
    spendFromPeriod(store, 'r2', { period: '2025-03', budget: 10 });
    expect(store.tasks.getTask('r2', 'c')?.state).toBe('pending');
    expect(store.submissions.attemptsOf('r2', 'c')).toEqual([]);
    expect(runMoney(store, 'r2')).toMatchObject({
      budget: 9 * M,
      held: 3 * M,
      left: 6 * M,
      period: { period: '2025-03', budget: 10 * M, spent: 6 * M, reserved: 3 * M },
    });

    // The answer charged less than the worst case: the period has room for c again.
    store.submissions.recordSubmitted('r2', 'b', 1, {
      imgUuid: 'u-b',
      cost: 1,
      keyFingerprint: 'fp0000000000',
    });
    expect(periodMoney(store, MANIFEST, '2025-03')).toEqual({ spent: 7 * M, reserved: 0 });
    expect(store.submissions.recordSubmitIntent('r2', 'c')).toBe(1);
    expect(periodMoney(store, MANIFEST, '2025-03')).toEqual({ spent: 7 * M, reserved: 3 * M });
  });

  it('refuses a re-roll of one run when another run of the manifest took the period', () => {
    const store = twoFiredRuns();
    submit(store, 'r1', 'still', 'u-still', 3);
    store.tasks.moveTask('r1', 'still', 'downloading', null);
    store.tasks.markDone('r1', 'still');
    submit(store, 'r2', 'b', 'u-b', 3);
    store.submissions.recordSubmitIntent('r2', 'c');

    // r1 has 3 of 9 spent: its budget holds a re-roll; the period (6 spent, 3 held) does not.
    const [outcome] = store.reviews.decideMany('r1', [
      { taskId: 'still', req: { verdict: 'reroll', by: 'ana' } },
    ]);
    expect(outcome).toEqual({
      taskId: 'still',
      ok: false,
      overBudget: true,
      reason:
        "still may cost up to 3 tokens and budget_per_period of 10 tokens leaves 1 token in 2025-03 (6 tokens spent by the manifest's runs in 2025-03, 3 tokens reserved for their tasks asked for, in flight or in doubt)",
    });
    expect(store.tasks.getTask('r1', 'still')).toMatchObject({ state: 'done', attempt: 1 });
    expect(runMoney(store, 'r1')).toMatchObject({ held: 0, doubt: 0 });
  });

  it('counts a task in doubt of any run of the manifest, and a run not fired, against the period', () => {
    const store = twoFiredRuns();
    // A run of the same manifest started by hand: no period of its own, its charges count in the period's.
    store.runs.createRun({ id: 'r3', manifestPath: MANIFEST, manifestName: 'nightly', settings: {} });
    store.tasks.upsertTasks('r3', [task('d', {}, 5)]);
    submit(store, 'r3', 'd', 'u-d', 5);
    expect(runMoney(store, 'r3').period).toBeUndefined();
    // r1's answer lost: its worst case stays reserved, it may have been charged.
    store.submissions.recordSubmitIntent('r1', 'a');
    store.submissions.recordInDoubt('r1', 'a', 1, { message: 'connection reset after the request was sent' });
    expect(runMoney(store, 'r1')).toMatchObject({ held: 0, doubt: 3 * M });

    const error = refusal(() => store.submissions.recordSubmitIntent('r2', 'b'));
    expect(error.message).toMatch(
      /^b may cost up to 3 tokens and budget_per_period of 10 tokens leaves 2 tokens in 2025-03 \(5 tokens spent by the manifest's runs in 2025-03, 3 tokens reserved/,
    );
    // Another manifest's runs are not counted.
    expect(periodMoney(store, '/m/other.yaml', '2025-03')).toEqual({ spent: 0, reserved: 0 });
    // What r1 owes beside its pending tasks: the doubt, for the next preflight to count.
    expect(owedSoFar(store, 'r1')).toEqual({ spent: 0, reserved: 3 * M });
  });

  it('leaves a run the scheduler did not fire to its own budget', () => {
    const store = temp.open(join(temp.dir(), 'state.db'), { now: new FakeClock().now });
    store.runs.createRun({
      id: 'solo',
      manifestPath: MANIFEST,
      manifestName: 'nightly',
      settings: { budget: 9 },
    });
    store.tasks.upsertTasks('solo', [task('a'), task('b'), task('c'), task('d')]);
    for (const id of ['a', 'b', 'c']) store.submissions.recordSubmitIntent('solo', id);
    const error = refusal(() => store.submissions.recordSubmitIntent('solo', 'd'));
    expect(error.message).toMatch(/^d may cost up to 3 tokens and the budget of 9 tokens leaves 0 tokens /);
  });
});
