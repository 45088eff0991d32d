import { describe, expect, it } from 'vitest';
import { decidePreflight, fitsBudget } from '../../src/run/preflight.js';

const base = { remainingMax: 100, remainingTokens: 80, chargedSoFar: 0, allowPartial: false };

describe('decidePreflight', () => {
  it.each([
    ['fits everything', { balance: 1000, budget: 250 }, true, []],
    ['over balance', { balance: 99 }, false, ['the run can cost up to 100 tokens but the balance is 99']],
    [
      'over quota',
      { quota: { limit: 5000, used: 4950, source: 'from configuration' } },
      false,
      [
        'the run can cost up to 100 tokens but only 50 of the quota (5000, from configuration) are left this period',
      ],
    ],
    [
      'over budget after earlier charges',
      { budget: 120, chargedSoFar: 30 },
      false,
      ['the run can cost up to 100 tokens but the budget leaves 90 (budget 120, 30 charged already)'],
    ],
    ['exactly at the balance', { balance: 100 }, true, []],
  ])('%s', (_name, extra, ok, refusals) => {
    const decision = decidePreflight({ ...base, ...extra });
    expect(decision.ok).toBe(ok);
    expect(decision.refusals).toEqual(refusals);
  });

  it('lets a run start over its limits with --allow-partial, still naming them', () => {
    const decision = decidePreflight({ ...base, balance: 10, allowPartial: true });
    expect(decision.ok).toBe(true);
    expect(decision.refusals).toHaveLength(1);
    expect(decision.leftAfter.balance).toBe(-90);
  });
});

describe('fitsBudget', () => {
  it.each([
    [undefined, 1000, 1000, 1000, true],
    [100, 50, 30, 20, true],
    [100, 50, 30, 20.01, false],
    [250, 0, 0, 250, true],
    [0.6, 0.2, 0.2, 0.2, true],
  ])('budget %s, charged %s, in flight %s, task %s -> %s', (budget, charged, inFlight, task, fits) => {
    expect(fitsBudget(budget, charged, inFlight, task)).toBe(fits);
  });
});
