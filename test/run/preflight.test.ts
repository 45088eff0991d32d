import { describe, expect, it } from 'vitest';
import { decidePreflight, fitsBudget } from '../../src/run/preflight.js';
import { toMicro } from '../../src/util/money.js';

const base = { remainingMax: 100, remainingTokens: 80, chargedSoFar: 0, allowPartial: false };

describe('decidePreflight', () => {
  it.each([
    ['fits everything', { balance: 1000, budget: 250 }, true, []],
    [
      'over balance',
      { balance: 99 },
      false,
      ['the run can cost up to 100 tokens but the balance is 99 tokens'],
    ],
    [
      'over quota',
      { quota: { limit: 5000, used: 4950, source: 'from configuration' } },
      false,
      [
        'the run can cost up to 100 tokens but only 50 tokens of the quota (5,000 tokens, from configuration) are left this period',
      ],
    ],
    [
      'over budget after earlier charges',
      { budget: 120, chargedSoFar: 30 },
      false,
      [
        'the run can cost up to 100 tokens but the budget of 120 tokens leaves 90 tokens (30 tokens charged already)',
      ],
    ],
    ['exactly at the balance', { balance: 100 }, true, []],
    [
      'quota already past',
      { quota: { limit: 5000, used: 5020, source: 'from configuration' } },
      false,
      [
        'the run can cost up to 100 tokens but the quota (5,000 tokens, from configuration) is already 20 tokens over this period',
      ],
    ],
    [
      'budget already past (lowered after charges)',
      { budget: 20, chargedSoFar: 30 },
      false,
      [
        'the run can cost up to 100 tokens but the budget of 20 tokens is already 10 tokens over (30 tokens charged already)',
      ],
    ],
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
    // 0.2 + 0.2 + 0.2 is 0.6000000000000001 in floats: micro-tokens keep it exact.
    [0.6, 0.2, 0.2, 0.2, true],
    [0.6, 0.2, 0.2, 0.200001, false],
  ])('budget %s, charged %s, in flight %s, task %s -> %s', (budget, charged, inFlight, task, fits) => {
    const micro = (n: number | undefined) => (n === undefined ? undefined : toMicro(n));
    expect(fitsBudget(micro(budget), toMicro(charged), toMicro(inFlight), toMicro(task))).toBe(fits);
  });

  it('in-flight estimates added and taken away in any order come back to exactly 0', () => {
    const prices = [0.2, 1.63, 62.82, 17.5, 0.02, 4.81, 10.47];
    let inFlight = 0;
    for (const p of prices) inFlight += toMicro(p);
    for (const p of [...prices].reverse()) inFlight -= toMicro(p);
    expect(inFlight).toBe(0);
    // The float sum that once kept a run waiting forever does not come back to 0.
    let float = 0;
    for (const p of prices) float += p;
    for (const p of [...prices].reverse()) float -= p;
    expect(float).not.toBe(0);
  });
});
