// The model of the budget and the ledger (test/torture/money-model.ts) against the real store: a slice of
// random sequences here, thousands in `npm run torture`. The runs and the seed are printed; a failure
// prints the shrunk sequence of actions.
import { describe, expect, it } from 'vitest';
import { runMoneyModel } from '../torture/money-model.js';

describe('money in the store, against a model of budget and ledger', () => {
  it('keeps worst cases plus net spend under the budget, one charge per ask, figures equal to the model', () => {
    const seed = Number(process.env['MONEY_MODEL_SEED'] ?? Date.now() % 2_147_483_647);
    const result = runMoneyModel(25, seed);
    console.log(`money model: ${result.runs} runs, seed ${result.seed}`);
    expect(result.failure).toBeUndefined();
  }, 120_000);
});
