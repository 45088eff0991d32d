// The model of the budget and the ledger (test/torture/money-model.ts) against the real store: a slice of
// random sequences here, thousands in `npm run torture`. The runs and the seed are printed; a failure
// prints the shrunk sequence of actions. On PostgreSQL (postgres.test.ts) each run is a database of its
// own, and the kill's raw transaction begins without SQLite's IMMEDIATE.
import { describe, expect, it } from 'vitest';
import { runMoneyModel } from '../torture/money-model.js';
import { onPostgres, rawDatabase, stateFor } from './helpers.js';

describe('money in the store, against a model of budget and ledger', () => {
  it('keeps worst cases plus net spend under the budget, one charge per ask, figures equal to the model', () => {
    const seed = Number(process.env['MONEY_MODEL_SEED'] ?? Date.now() % 2_147_483_647);
    const pg = onPostgres();
    const result = runMoneyModel(25, seed, {
      state: stateFor,
      raw: (file) => rawDatabase(file),
      begin: pg ? 'BEGIN' : 'BEGIN IMMEDIATE',
    });
    console.log(`money model: ${result.runs} runs, seed ${result.seed}`);
    expect(result.failure).toBeUndefined();
  }, 600_000);
});
