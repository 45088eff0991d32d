// The vitest config of `npm run mutate`: the whole suite's settings, but only the test files of the module
// being mutated (stryker.config.mjs). Stryker's own `testFiles` option is not used: with it, a mutant of a
// module-level value is switched on after the module has loaded and survives whatever the tests assert
// (stryker-js issue 6144).
import { defineConfig } from 'vitest/config';
import { MODULES } from './stryker.config.mjs';
import base from './vitest.config.js';

const name = (process.env['MUTATE_MODULE'] ?? 'outcome') as keyof typeof MODULES;

// Replaced, not merged: vitest's mergeConfig would add the list to the suite's own `include`.
// Without the suite's CLI bundle: it would be built from Stryker's instrumented sources once, while the
// mutants are switched on and off in this process; child processes run the sources through tsx as before.
export default defineConfig({
  ...base,
  test: { ...base.test, include: [...MODULES[name].tests], globalSetup: [] },
});
