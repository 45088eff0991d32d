// A small slice of `bench/makespan.ts` (the batch's makespan against the ideal), so that the bench keeps working: eight tasks at a
// twentieth of real time. Sanity only; the figures themselves are the bench's.
import { describe, expect, it } from 'vitest';
import { measureMakespan, mixedTasks, packedMakespan } from '../../bench/makespan.js';

describe('the makespan bench', () => {
  it('packs jobs onto slots in the order given, each on the slot that frees first', () => {
    expect(packedMakespan([5, 5, 5, 5], 2)).toBe(10);
    expect(packedMakespan([1, 1, 1, 9], 2)).toBe(10);
    expect(packedMakespan([9, 1, 1, 1], 2)).toBe(9);
    expect(packedMakespan([], 3)).toBe(0);
  });

  it('mixes one video for three images, as written by hand', () => {
    expect(mixedTasks(8).map((t) => t.model)).toEqual([
      'flat-image',
      'flat-image',
      'studio-2-6',
      'flat-image',
      'flat-image',
      'flat-image',
      'studio-2-6',
      'flat-image',
    ]);
  });

  it('measures mediabatch (polling, manifest order, callbacks) and the 5 s script on one batch', async () => {
    const f = await measureMakespan({ tasks: 8, concurrency: 4, speed: 0.05 });
    expect(f.runs.map((r) => r.who)).toEqual([
      'mediabatch polling',
      'mediabatch polling, --order manifest',
      'mediabatch with callbacks',
      'script polling every 5 s',
    ]);
    for (const r of f.runs) {
      expect(r.makespanMs).toBeGreaterThan(0);
      // Nobody beats the zero-overhead packing of the very jobs they ran, in their order (clock granularity aside).
      expect(r.ratio).toBeGreaterThanOrEqual(0.95);
      expect(r.requestsPerTask).toBeGreaterThanOrEqual(3);
      expect(Object.keys(r.toFile).sort()).toEqual(['image', 'video']);
    }
    const [polling, , callbacks] = f.runs;
    expect(callbacks?.pollsPerTask).toBeLessThan(polling?.pollsPerTask ?? 0);
    expect(f.longestFirstGain).toBeLessThanOrEqual(1);
  }, 120_000);
});
