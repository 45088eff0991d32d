// Mutation testing of the money logic: `npm run mutate` (scripts/mutate.ts) runs StrykerJS once per module
// below, each against the test files that exercise it, so that one run costs minutes, not the whole
// suite per mutant on a shared machine. A module's score is therefore a floor: tests outside its list
// might kill more. Not part of `npm test`; the figures are in docs/benchmarks.md ("Mutation scores").
//
// One module: MUTATE_MODULE=outcome npx stryker run (or `npm run mutate -- outcome`).

// A mutant that makes its module throw on import leaves the test files that import it with no tests, which
// Stryker counts as a survivor: this file imports each module inside a test, so such a mutant fails one.
const LOADS = 'test/code/money-modules-load.test.ts';

/**
 * Each money module with the tests that must kill its mutants, and the survivors that no test can kill
 * because the mutant behaves exactly as the code does (equivalent mutants), each with why.
 */
export const MODULES = {
  outcome: {
    file: 'src/api/outcome.ts',
    // Equivalent: L142 the '' of `text` without a code — never read, the function returns before. L154
    // `join('.')` → `join('')` — every schema read here fails on a top-level field only (nested fields are
    // tolerant), so no issue path has two parts. L164 `s ?? ''` and L169 `m[3]?.trim` — the quota regex's
    // groups always take part in a match. L265 `?? ''` → another string — neither is a code of
    // CONNECT_PHASE or RESPONSE_PHASE. L355 `envelope?.data` → `envelope.data` — code 0 implies an envelope.
    tests: [LOADS, 'test/api/outcome.test.ts', 'test/api/outcome-money.test.ts'],
  },
  prices: {
    file: 'src/catalog/prices.ts',
    // Equivalent: L65 `typeof value !== 'number'` turned false — Number.isFinite is false for every
    // non-number (it does not coerce), so the next test refuses the same values; the typeof is there for
    // TypeScript's narrowing.
    tests: [LOADS, 'test/catalog/prices.test.ts', 'test/catalog/price-overrides.test.ts'],
  },
  pricing: {
    file: 'src/catalog/pricing.ts',
    // Equivalent: L25 `roundTokens(min) === roundTokens(max)` turned false — the general range is then
    // built from the same rounded figures, {max, max, max}, exactly what exact(max) returns. L49
    // `hint !== undefined` turned true — Number.isFinite(undefined) is false, so undefined stays unused.
    tests: [LOADS, 'test/catalog/prices.test.ts', 'test/catalog/pricing.test.ts'],
  },
  money: {
    file: 'src/util/money.ts',
    // Equivalent: L48 and L63, the "under a dollar" test of usdText and usdPlainText: `usd !== 0` turned
    // true (0 reads $0.00 in both forms) and `< 1` turned `<= 1` (1 reads $1.00 in both forms).
    tests: [LOADS, 'test/util/money.test.ts'],
  },
  transitions: {
    file: 'src/store/transitions.ts',
    // Equivalent: L14 `awaiting_review: []` and L33 `lost: []` given an element — a string that is no
    // state, which no move ever asks about. L105 `target === undefined` turned false — includes(undefined)
    // is false, so the task stays where it is all the same.
    tests: [LOADS, 'test/store/transitions.test.ts', 'test/store/moves.test.ts'],
  },
  ledger: {
    file: 'src/store/ledger.ts',
    // Equivalent: L18 and L19 `row?.charged`, `row?.refunded` without the `?.` — every statement read into
    // them is an aggregate without GROUP BY, which always returns one row.
    tests: [LOADS, 'test/store/ledger.test.ts', 'test/store/spend.test.ts'],
  },
  reservations: {
    file: 'src/store/reservations.ts',
    // Equivalent: L177 `row?.period_budget == null` turned false — setPeriodBudget writes the period and its
    // budget in one UPDATE, so one is null exactly when the other is. L197 and L241 `row?.`, `seen?.` without
    // the `?.` — each is an aggregate without GROUP BY (or a SELECT without FROM), which always returns one
    // row. L239 `open !== undefined` turned true — releasing a task that holds nothing updates no row. L288
    // `taskIds[0] ?? ''` given another string — with one task, taskIds[0] is that task. L289 `f.budget !==
    // undefined` turned true — a comparison with undefined is false, so nothing is refused without a budget.
    //
    // The model-based test (test/store/money-model.test.ts) is left out: it covers every mutant and takes
    // seconds a run, so each mutant would cost minutes; the tests below check each figure directly.
    tests: [
      LOADS,
      'test/store/reservations.test.ts',
      'test/store/period-budget.test.ts',
      'test/store/money-schema.test.ts',
      'test/store/submissions.test.ts',
      'test/store/reviews.test.ts',
      'test/money/run-money.test.ts',
    ],
  },
  runmoney: {
    file: 'src/money/index.ts',
    tests: [LOADS, 'test/money/run-money.test.ts', 'test/store/period-budget.test.ts'],
  },
};

const name = process.env.MUTATE_MODULE ?? 'outcome';
const chosen = MODULES[name];
if (chosen === undefined) {
  throw new Error(`MUTATE_MODULE: unknown module ${name}; known modules: ${Object.keys(MODULES).join(', ')}`);
}

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  // `related` would follow the import graph from the mutated file to nearly every test of the suite.
  // vitest.mutate.config.ts runs only the module's tests (MODULES above) and says why Stryker's `testFiles` is not used.
  vitest: { configFile: 'vitest.mutate.config.ts', related: false },
  mutate: [chosen.file],
  coverageAnalysis: 'perTest',
  // Nine sessions share two cores: one test runner at a time.
  concurrency: 1,
  // A busy machine makes a slow test look like an endless loop: wait longer before calling a timeout.
  timeoutMS: 20_000,
  dryRunTimeoutMinutes: 15,
  reporters: ['clear-text', 'progress', 'json', 'html'],
  jsonReporter: { fileName: `reports/mutation/${name}.json` },
  htmlReporter: { fileName: `reports/mutation/${name}.html` },
  tempDirName: '.stryker-tmp',
  ignorePatterns: ['dist', 'out', 'state', 'test-artifacts', 'reports', 'bench/results.json'],
  thresholds: { high: 95, low: 90, break: 90 },
};
