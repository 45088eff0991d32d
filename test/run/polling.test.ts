import { describe, expect, it } from 'vitest';
import { CATALOG } from '../../src/catalog/index.js';
import {
  DEFAULT_POLL_PROFILES,
  DueQueue,
  fallbackProfiles,
  JobDurations,
  nextLookDelay,
  observedJobMs,
} from '../../src/run/polling.js';

const video = { lowMs: 30_000, highMs: 90_000 };
const image = { lowMs: 3_000, highMs: 8_000 };

describe('nextLookDelay', () => {
  it.each([
    ['image', image, 0, 4_000],
    ['image', image, 1_000, 3_000],
    ['image', image, 4_000, 2_000],
    ['image', image, 11_999, 2_000],
    ['image', image, 14_000, 2_000],
    ['image', image, 30_000, 9_000],
    ['image', image, 600_000, 10_000],
    ['video', video, 0, 32_500],
    ['video', video, 31_500, 1_000],
    ['video', video, 32_500, 5_000],
    ['video', video, 134_000, 5_000],
    ['video', video, 155_000, 10_000],
    ['video', video, 3_600_000, 30_000],
  ] as const)('%s %o after %i ms waits %i ms', (kind, expected, elapsed, ms) => {
    expect(nextLookDelay(DEFAULT_POLL_PROFILES[kind], expected, elapsed)).toBe(ms);
  });

  it('never waits longer than the recommended 5 s while a job is within 1.5 times its expected time', () => {
    for (const kind of ['image', 'audio', 'video'] as const) {
      for (let elapsed = video.lowMs; elapsed < video.highMs * 1.5; elapsed += 250) {
        expect(nextLookDelay(DEFAULT_POLL_PROFILES[kind], video, elapsed)).toBeLessThanOrEqual(5_000);
      }
    }
  });

  it('slows to the fallback interval when callbacks are expected', () => {
    const slow = fallbackProfiles(DEFAULT_POLL_PROFILES, 60_000);
    expect(nextLookDelay(slow.image, image, 0)).toBe(60_000);
    expect(nextLookDelay(slow.video, video, 60_000)).toBe(60_000);
    expect(nextLookDelay(slow.video, video, 600_000)).toBe(60_000);
  });
});

describe('JobDurations', () => {
  const flat = CATALOG['flat-image'];
  const studio = CATALOG['studio-2-6'];

  it('expects the catalog figures, scaled by the run, until five jobs of the model were seen', () => {
    const d = new JobDurations(0.1);
    expect(d.expect(flat, {})).toEqual({ lowMs: 300, highMs: 800 });
    expect(d.expect(studio, { duration: 10, resolution: '1080p' })).toEqual({ lowMs: 9_000, highMs: 27_000 });
    for (let i = 0; i < 4; i++) d.observe(flat, {}, 1_500);
    expect(d.expect(flat, {})).toEqual({ lowMs: 300, highMs: 800 });
  });

  it('moves the first look to what the run sees, per model and relative to each request size', () => {
    const d = new JobDurations();
    // Twenty images of 12.0 to 15.8 s: the shortest is put under the shortest seen (12 s) by the usual gap
    // between two of them (0.2 s) and by a tenth of the second shortest.
    for (let i = 0; i < 20; i++) d.observe(flat, {}, 12_000 + 200 * i);
    const learnt = d.expect(flat, {});
    expect(learnt.lowMs).toBeCloseTo(12_200 * 0.9);
    expect(learnt.highMs).toBe(15_800);
    // Another model keeps the catalog's figures.
    expect(d.expect(CATALOG['pixel-lite'], {})).toEqual({ lowMs: 3_000, highMs: 8_000 });
    // Twenty 5 s videos taking 40 s teach that a 10 s one takes about 80 s at the least; the longest expected
    // time stays the catalog's (180 s): the first videos to end are the short ones.
    for (let i = 0; i < 20; i++) d.observe(studio, { duration: 5 }, 40_000);
    expect(d.expect(studio, { duration: 10 })).toEqual({ lowMs: 72_000, highMs: 180_000 });
  });

  it('a few long jobs never move the first look later than the catalog says: a short one after them is seen in time', () => {
    const d = new JobDurations();
    // Five videos of 46-85 s (30-90 s expected): one draw in five is like this.
    for (const ms of [46_400, 64_200, 71_200, 72_800, 85_100]) d.observe(studio, {}, ms);
    const expected = d.expect(studio, {});
    expect(expected.lowMs).toBe(30_000);
    // A 33 s video is looked at 32.5 s after submission and seen done at the next look, 5 s later.
    expect(nextLookDelay(DEFAULT_POLL_PROFILES.video, expected, 0)).toBe(32_500);
    // Jobs quicker than the catalog says bring the first look earlier at once.
    const quick = new JobDurations();
    for (const ms of [20_000, 21_000, 22_000, 23_000, 24_000]) quick.observe(studio, {}, ms);
    expect(quick.expect(studio, {}).lowMs).toBe(18_000);
  });

  it('from twenty jobs on, the shortest is put under the shortest seen by the wider of their gap and a tenth', () => {
    const d = new JobDurations();
    // Twenty videos from 46 to 84 s: a tenth under the second shortest (43.2 s) is below 46 s less the usual gap (44 s).
    for (let i = 0; i < 20; i++) d.observe(studio, {}, 46_000 + 2_000 * i);
    expect(d.expect(studio, {}).lowMs).toBe(43_200);
    // Twenty spread over 10-200 s: the gap (10 s) says more than a tenth.
    const wide = new JobDurations();
    for (let i = 0; i < 20; i++) wide.observe(studio, {}, 10_000 + 10_000 * i);
    expect(wide.expect(studio, {}).lowMs).toBe(0);
  });

  it('ignores figures that are not a duration', () => {
    const d = new JobDurations();
    for (const ms of [Number.NaN, -1, 0, Number.POSITIVE_INFINITY, 1, 1, 1, 1]) d.observe(flat, {}, ms);
    expect(d.expect(flat, {})).toEqual({ lowMs: 3_000, highMs: 8_000 });
  });
});

describe('observedJobMs', () => {
  it('takes the service figure within what the looks prove, and the middle without one', () => {
    const t = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
    expect(observedJobMs(4_000, 6_000, t(0), t(5))).toBe(5_000);
    // A clock that disagrees with ours is held to the bounds.
    expect(observedJobMs(4_000, 6_000, t(0), t(50))).toBe(6_000);
    expect(observedJobMs(4_000, 6_000, t(10), t(11))).toBe(4_000);
    expect(observedJobMs(4_000, 6_000, undefined, t(5))).toBe(5_000);
    expect(observedJobMs(4_000, 8_000, 'soon', 17)).toBe(6_000);
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
