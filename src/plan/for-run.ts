// Planning for a run: the options `mediabatch run`, `mediabatch schedule`, `plan` and the library's
// plan() and run() all build the same way, so that a run prices and stores what `plan` showed.

import type { PriceTable } from '../catalog/types.js';
import { mediaMeasure, type PlanOptions, planRun, type RunPlan } from './build.js';
import type { Shard } from './shard.js';

export interface PlanInputs {
  /** Relative paths (the manifest, `output`) resolve against this folder. */
  cwd: string;
  /** The time templates such as `{{date}}` render at. */
  now: Date;
  /** The account's price overrides. */
  prices?: PriceTable;
  /** Measure input media over HTTP (true by default); otherwise `media_seconds` or ranges. */
  probe?: boolean;
  /** `foreach` may read data files outside the manifest's folder. */
  allowOutside?: boolean;
  /** Replace the manifest's vars of these names (a sandbox run gives the sandbox's address). */
  vars?: Readonly<Record<string, unknown>>;
  /** Only this shard's tasks (`--shard i/n`); the whole manifest is still checked and priced. */
  shard?: Shard;
}

/** The planner's options from what a command or a library caller says. */
export function planOptionsOf(o: PlanInputs): PlanOptions {
  return {
    cwd: o.cwd,
    now: o.now,
    ...(o.prices ? { prices: o.prices } : {}),
    ...(o.probe === false ? {} : { measure: mediaMeasure() }),
    allowOutside: o.allowOutside ?? false,
    ...(o.vars ? { vars: o.vars } : {}),
    ...(o.shard ? { shard: o.shard } : {}),
  };
}

/** The plan a run stores and executes: streamed, a task at a time. */
export function planForRun(file: string, o: PlanInputs): Promise<RunPlan> {
  return planRun(file, planOptionsOf(o));
}
