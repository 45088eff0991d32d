import { describe, expect, it } from 'vitest';
import { backoffDelay } from '../../src/api/backoff.js';

const fixed = (r: number) => () => r;

describe('backoffDelay', () => {
  it.each<[number, number, number]>([
    // attempt, random, expected ms (base 500, cap 30 000)
    [0, 0, 0],
    [0, 0.5, 250],
    [0, 0.999, 499],
    [1, 0.5, 500],
    [2, 0.5, 1000],
    [3, 1 - 1e-9, 3999],
    [5, 0.5, 8000],
    [6, 0.5, 15000],
    [7, 0.5, 15000], // 64 000 capped to 30 000
    [20, 0.5, 15000],
    [2000, 0.25, 7500], // 2^2000 overflows; the cap still holds
  ])('attempt %i with random %f waits %i ms', (attempt, r, expected) => {
    expect(backoffDelay(attempt, { baseMs: 500, capMs: 30_000, random: fixed(r) })).toBe(expected);
  });

  it('never waits longer than the cap, whatever the random source returns', () => {
    for (const r of [1, 2, Number.NaN, -1]) {
      const delay = backoffDelay(10, { baseMs: 1000, capMs: 5000, random: fixed(r) });
      expect(delay).toBeGreaterThanOrEqual(0);
      expect(delay).toBeLessThanOrEqual(5000);
    }
  });

  it('waits nothing with a zero base even for huge attempts', () => {
    expect(backoffDelay(5000, { baseMs: 0, capMs: 5000, random: fixed(0.9) })).toBe(0);
  });

  it.each<[number, number, number, RegExp]>([
    [-1, 500, 1000, /^attempt: must be a finite number >= 0, got -1$/],
    [1.5, 500, 1000, /^attempt: must be a whole number, got 1.5$/],
    [0, Number.NaN, 1000, /^baseMs: must be a finite number >= 0, got NaN$/],
    [0, 500, -5, /^capMs: must be a finite number >= 0, got -5$/],
  ])('refuses attempt %s, base %s, cap %s', (attempt, baseMs, capMs, message) => {
    expect(() => backoffDelay(attempt, { baseMs, capMs, random: fixed(0.5) })).toThrow(message);
  });
});
