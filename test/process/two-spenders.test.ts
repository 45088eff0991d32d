// `run` and `review --reroll` in real processes against one sandbox and one state file, at random
// moments (test/torture/two-spenders.ts): a few rounds here, 50 in `npm run torture`. The seed of each
// round is printed.
import { describe, expect, it } from 'vitest';
import { twoSpendersRound } from '../torture/two-spenders.js';

describe('two processes spending from one budget', () => {
  it('never lets the sandbox charge past the budget nor charge a task more than it was asked', async () => {
    const base = Number(process.env['TWO_SPENDERS_SEED'] ?? Date.now() % 100_000);
    for (let i = 0; i < 2; i++) {
      const round = await twoSpendersRound(base + i);
      console.log(
        `two spenders: seed ${round.seed}, exits ${round.exitCodes.join(' ')}, ${round.charges} charges, ${round.rerollsRecorded} re-rolls recorded, ${round.spent} spent of 1.6`,
      );
      for (const line of round.lines) console.log(`  ${line}`);
      expect(round.problems).toEqual([]);
    }
  }, 180_000);
});
