import { describe, expect, it } from 'vitest';
import { probeMany } from '../../src/media/probe.js';
import type { MediaKind, Prober } from '../../src/media/types.js';

/** A prober that answers after a tick and records what it was asked and how many ran at once. */
function countingProber() {
  const calls: [string, MediaKind][] = [];
  let inFlight = 0;
  let most = 0;
  const prober: Prober = async (location, kind) => {
    calls.push([location, kind]);
    inFlight++;
    most = Math.max(most, inFlight);
    await new Promise((r) => setTimeout(r, 5));
    inFlight--;
    if (location.includes('boom')) throw new Error('exploded');
    return { ok: true, seconds: location.length, container: 'mp4' };
  };
  return { prober, calls, most: () => most };
}

describe('probeMany', () => {
  it('measures each distinct location once, at most `concurrency` at a time', async () => {
    const { prober, calls, most } = countingProber();
    const items = ['a', 'bb', 'a', 'ccc', 'dddd', 'bb', 'eeeee'].map((location) => ({
      location,
      kind: 'video' as const,
    }));
    const results = await probeMany(prober, items, 2);
    expect(calls.map(([l]) => l).sort()).toEqual(['a', 'bb', 'ccc', 'dddd', 'eeeee']);
    expect(most()).toBe(2);
    expect([...results.keys()].sort()).toEqual(['a', 'bb', 'ccc', 'dddd', 'eeeee']);
    expect(results.get('ccc')).toEqual({ ok: true, seconds: 3, container: 'mp4' });
  });

  it('checks a location against the first kind it is listed with', async () => {
    const { prober, calls } = countingProber();
    await probeMany(
      prober,
      [
        { location: 'x', kind: 'audio' },
        { location: 'x', kind: 'video' },
      ],
      4,
    );
    expect(calls).toEqual([['x', 'audio']]);
  });

  it('turns a throwing prober into a reason for that location only', async () => {
    const { prober } = countingProber();
    const results = await probeMany(
      prober,
      [
        { location: 'https://h/boom.mp4?sig=1', kind: 'video' },
        { location: 'ok', kind: 'video' },
      ],
      2,
    );
    expect(results.get('https://h/boom.mp4?sig=1')).toEqual({
      ok: false,
      reason: 'cannot measure https://h/boom.mp4?…: exploded',
    });
    expect(results.get('ok')?.ok).toBe(true);
  });

  it.each([0, 1.5, Number.NaN])('refuses a concurrency of %s', async (concurrency) => {
    await expect(probeMany(countingProber().prober, [], concurrency)).rejects.toThrow(
      `concurrency: must be an integer >= 1, got ${concurrency}`,
    );
  });
});
