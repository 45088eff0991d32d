// The torture's faults on the user's own machine inside `npm test`: the six scenarios of
// `npm run torture` at 6 tasks each, in-process with an injected clock.
import { describe, expect, it } from 'vitest';
import { scenarioTorture } from './scenarios.js';
import { SMALL } from './sizes.js';

describe("torture: faults on the user's own machine", () => {
  it('a dated run resumed the next day, a full disk freed, a budget hit mid-flight, planted links, a 2-character key, every quirk: the money guarantees hold', async () => {
    const { cases, guarantees, skipped } = await scenarioTorture(SMALL.scenarios);
    expect(guarantees.filter((g) => !g.ok)).toEqual([]);
    expect(cases).toHaveLength(6);
    // Only the full-disk scenario may be skipped (it needs root to mount a tmpfs), and it says why.
    expect(skipped.filter((s) => !s.startsWith('full output disk'))).toEqual([]);
    expect(guarantees.length).toBeGreaterThan(40 - (skipped.length > 0 ? 10 : 0));
  }, 120_000);
});
