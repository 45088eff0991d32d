// The slice of the fleet's chaos inside `npm test` (`npm run torture` runs 300 tasks, 10 kills, the
// database stopped 10 s): three worker processes on one PostgreSQL state, reviewed stills with a clip
// after each and plain images, two workers killed with SIGKILL and started again, the server stopped
// for 3 s (the full run also drops one worker's packets, then cuts its connection). Every guarantee is
// read from the sandbox's books, the bucket and the database (test/torture/fleet-chaos.ts).
import { describe, expect, it } from 'vitest';
import { fleetChaos } from '../torture/fleet-chaos.js';
import { SMALL } from '../torture/sizes.js';

describe('a fleet of three workers on PostgreSQL under chaos (small)', () => {
  it('sends each task once, loses nothing paid, keeps the budget, one result per task, and finishes', async () => {
    const { figures, guarantees } = await fleetChaos(SMALL.fleet);
    expect(guarantees.filter((g) => !g.ok)).toEqual([]);
    // The chaos did happen, or the guarantees were not put to the test.
    expect(figures.kills).toBe(SMALL.fleet.kills);
    expect(figures.pgPausedMs).toBeGreaterThanOrEqual(SMALL.fleet.pgPauseMs);
    expect(figures.approved + figures.rejected).toBeGreaterThan(0);
    expect(figures.results).toBeGreaterThan(0);
  }, 240_000);
});
