// The small torture inside `npm test`: 60 tasks against a faulty sandbox, killed with SIGKILL at 5
// seeded moments and restarted until the run ends; every money guarantee checked from the sandbox's
// state and the database; the sentinel key nowhere. `npm run torture` is the same at 500 tasks. Its
// hostile inputs and its faults on the user's machine are files of their own (hostile.test.ts,
// scenarios.test.ts), so the two test workers can take them side by side.
import { describe, expect, it } from 'vitest';
import { crashTorture } from './crash-loop.js';
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
