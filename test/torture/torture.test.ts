// The small torture inside `npm test`: 60 tasks against a faulty sandbox, killed with SIGKILL at 5
// seeded moments and restarted until the run ends; every money guarantee checked from the sandbox's
// state and the database; the sentinel key nowhere. `npm run torture` is the same at 500 tasks.
import { describe, expect, it } from 'vitest';
import { crashTorture } from './crash-loop.js';
import { hostileTorture } from './hostile.js';
import { scenarioTorture } from './scenarios.js';
import { SMALL } from './sizes.js';

describe('torture (small): kill -9 at random moments against a faulty sandbox', () => {
  it('keeps every money guarantee: one charge per task at most, ledger = balance change, files whole, key hidden', async () => {
    const { figures, guarantees } = await crashTorture(SMALL.crash);
    expect(guarantees.filter((g) => !g.ok)).toEqual([]);
    // The faults did happen, or the guarantees were not put to the test.
    expect(figures.kills).toBe(SMALL.crash.kills);
    expect(figures.chargeThenErrorFaults).toBeGreaterThan(0);
    expect(figures.states['failed'] ?? 0).toBeGreaterThan(0);
    expect(figures.tasksInDoubt).toBe(figures.chargeThenErrorFaults + figures.inDoubtFromKills);
    expect(figures.filesChecked).toBeGreaterThan(0);
  }, 120_000);
});

describe('torture: hostile inputs', () => {
  it('refuses each quickly with a clear message or keeps it literal, writing nothing outside the output folder', async () => {
    const { cases, guarantees } = await hostileTorture();
    expect(guarantees.filter((g) => !g.ok)).toEqual([]);
    expect(cases.map((c) => c.name)).toContain('10,000-deep nesting');
  }, 90_000);
});

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
