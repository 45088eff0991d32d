// Types of stryker.config.mjs for the TypeScript that reads it (scripts/mutate.ts, vitest.mutate.config.ts).
import type { PartialStrykerOptions } from '@stryker-mutator/api/core';

export declare const MODULES: Record<
  'outcome' | 'prices' | 'pricing' | 'money' | 'transitions' | 'ledger' | 'reservations' | 'runmoney',
  { file: string; tests: readonly string[] }
>;
declare const config: PartialStrykerOptions;
export default config;
