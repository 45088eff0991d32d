import { describe, expect, it } from 'vitest';
import { DEFAULT_POLL_PROFILES, DueQueue, fallbackProfiles, nextPollDelay } from '../../src/run/polling.js';

describe('nextPollDelay', () => {
  it.each([
    ['image', 0, 2000],
    ['image', 1, 2000],
    ['image', 2, 3000],
    ['image', 3, 4500],
    ['image', 10, 10000],
    ['video', 0, 8000],
    ['video', 3, 18000],
    ['video', 50, 30000],
  ] as const)('%s after %i polls waits %i ms', (kind, polls, ms) => {
    expect(nextPollDelay(DEFAULT_POLL_PROFILES[kind], polls)).toBe(ms);
  });

  it('slows to the fallback interval when callbacks are expected', () => {
    const slow = fallbackProfiles(DEFAULT_POLL_PROFILES, 60_000);
    expect(nextPollDelay(slow.image, 0)).toBe(60_000);
    expect(nextPollDelay(slow.video, 5)).toBe(60_000);
  });
});

describe('DueQueue', () => {
  it('returns keys in due order and only those due', () => {
    const q = new DueQueue<string>();
    for (const [at, key] of [
      [50, 'e'],
      [10, 'a'],
      [30, 'c'],
      [20, 'b'],
      [40, 'd'],
    ] as const)
      q.push(at, key);
    expect(q.popDue(25)).toEqual(['a', 'b']);
    expect(q.peekAt()).toBe(30);
    expect(q.popDue(100)).toEqual(['c', 'd', 'e']);
    expect(q.size).toBe(0);
  });

  it('stays ordered for many random pushes', () => {
    const q = new DueQueue<number>();
    let seed = 7;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed;
    };
    const values = Array.from({ length: 2000 }, () => rnd() % 10_000);
    for (const v of values) q.push(v, v);
    expect(q.popDue(Number.MAX_SAFE_INTEGER)).toEqual([...values].sort((a, b) => a - b));
  });
});
