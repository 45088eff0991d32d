// Each money module loads: a module-level table or formatter that throws stops every command at start.
// Imported inside the tests, not at the top, so that a module that throws fails a test here instead of
// leaving a file with no tests (which mutation testing would count as a surviving mutant).
import { describe, expect, it } from 'vitest';

describe('the money modules load', () => {
  it.each([
    ['../../src/api/outcome.js', 'classifySubmission'],
    ['../../src/catalog/prices.js', 'DEFAULT_PRICES'],
    ['../../src/catalog/pricing.js', 'usableHint'],
    ['../../src/util/money.js', 'usdText'],
    ['../../src/store/transitions.js', 'TASK_MOVES'],
    ['../../src/store/ledger.js', 'LedgerStore'],
    ['../../src/store/reservations.js', 'ReservationStore'],
    ['../../src/money/index.js', 'RunMoney'],
  ])('%s', async (path, name) => {
    const module = (await import(path)) as Record<string, unknown>;
    expect(module[name]).toBeDefined();
  });
});
