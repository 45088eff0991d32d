// `mediabatch plan <manifest>`: the dry run. The plan is the library's; what is left of the run against
// the limits is src/run/left-to-pay.ts; the lines are ../plan-lines.ts.

import { resolve } from 'node:path';
import type { Config } from '../../config.js';
import { MediabatchError } from '../../errors.js';
import type { ProbeResult } from '../../media/types.js';
import { type PlanResult, planManifest, planStreamed, type RunPlan } from '../../plan/build.js';
import { planOptionsOf } from '../../plan/for-run.js';
import type { MediaNeed } from '../../plan/plan.js';
import type { Shard } from '../../plan/shard.js';
import { judgePlan, type Verdict } from '../../run/left-to-pay.js';
import { openStore } from '../../store/index.js';
import { stateExists, stateLocation } from '../../store/location.js';
import { EXIT, ExitError } from '../errors.js';
import { displayPath } from '../format.js';
import type { CliIO } from '../io.js';
import { type BalanceCheck, type PlanLike, planJson, planText, writeLines } from '../plan-lines.js';
import { shardBudget } from '../shard.js';

export interface PlanDeps {
  io: CliIO;
  config: Config;
  /** Absent with --no-probe: lengths then come from media_seconds or become ranges. */
  measure?: (needs: MediaNeed[]) => Promise<Map<string, ProbeResult>>;
  /** Absent when no credentials are set. */
  balance?: () => Promise<number>;
  /** --allow-outside-data: `foreach` may read files outside the manifest's folder. */
  allowOutside?: boolean;
  /** The state file (`--state`): when it holds a run of this manifest, only what is left of it is priced against the limits. */
  statePath?: string;
  /** Only this shard's tasks (`--shard i/n`), against its share of the budget. */
  shard?: Shard;
}

export type { PlanResult, RunPlan };

/** The same options as a run's plan, with the measure the CLI gives (none with --no-probe). */
function planOptions(deps: PlanDeps) {
  return {
    ...planOptionsOf({
      cwd: deps.io.cwd,
      now: deps.io.now(),
      prices: deps.config.prices,
      probe: false,
      allowOutside: deps.allowOutside ?? false,
      ...(deps.shard ? { shard: deps.shard } : {}),
    }),
    ...(deps.measure ? { measure: deps.measure } : {}),
  };
}

/** Expand, check, measure and price a manifest (the library's planManifest, with the CLI's errors). */
async function buildPlan(file: string, deps: PlanDeps): Promise<PlanResult> {
  return planManifest(file, planOptions(deps));
}

/** The library's planStreamed, with the CLI's errors: `plan` of a million tasks never holds them all. */
async function buildStreamedPlan(file: string, deps: PlanDeps): Promise<PlanLike> {
  const plan = await planStreamed(file, planOptions(deps));
  return {
    manifest: { settings: plan.settings },
    totals: plan.totals,
    ...(plan.wholeTotals ? { wholeTotals: plan.wholeTotals } : {}),
    tasks: plan.tasks,
  };
}

async function checkBalance(deps: PlanDeps): Promise<BalanceCheck> {
  if (!deps.balance) return deps.config.apiKey ? { state: 'no-base-url' } : { state: 'no-key' };
  try {
    return { state: 'ok', balance: await deps.balance() };
  } catch (error) {
    // A refused key is the one failure that must stop: every later `run` would be refused too.
    if (error instanceof MediabatchError && error.exitCode === EXIT.unauthorized) throw error;
    return { state: 'failed', reason: error instanceof Error ? error.message : String(error) };
  }
}

export async function planCommand(
  file: string,
  opts: { json?: boolean; probe?: boolean },
  deps: PlanDeps,
): Promise<number> {
  const plan: PlanLike = opts.json ? await buildPlan(file, deps) : await buildStreamedPlan(file, deps);
  // A shard is weighed against its share of the budget, as `run --shard` is; the line says so.
  if (deps.shard) {
    const share = shardBudget(deps.shard, { ...plan, settings: plan.manifest.settings }, undefined);
    if (share.budget === undefined) delete plan.manifest.settings.budget;
    else plan.manifest.settings.budget = share.budget;
    if (!opts.json) deps.io.stdout.write(`${share.line}\n`);
  }
  const balance = await checkBalance(deps);
  const verdict = judge(file, plan, balance, deps);
  if (opts.json) deps.io.stdout.write(`${planJson(plan as PlanResult, balance, verdict)}\n`);
  else writeLines(deps.io, planText(file, plan, balance, verdict, deps));
  if (verdict.refusals.length > 0) {
    throw new ExitError(
      EXIT.refused,
      `${verdict.existing ? 'what is left of the run' : 'the plan'} does not fit: ${verdict.refusals.join('; ')}`,
    );
  }
  return EXIT.ok;
}

/** Reads the state file (never creating one) for the run `run` would drive, and compares the rest with every limit. */
function judge(file: string, plan: PlanLike, balance: BalanceCheck, deps: PlanDeps): Verdict {
  const { io, config } = deps;
  const path = deps.statePath === undefined ? undefined : stateLocation(io.cwd, deps.statePath);
  const store = path !== undefined && stateExists(path) ? openStore(path, { now: io.now }) : undefined;
  try {
    return judgePlan(
      { settings: plan.manifest.settings, tasks: plan.tasks },
      {
        store,
        manifestPath: resolve(io.cwd, file),
        shown: (p) => displayPath(io.cwd, p),
        balance: balance.state === 'ok' ? balance.balance : undefined,
        config,
        now: io.now(),
        ...(deps.shard ? { shard: deps.shard } : {}),
      },
    );
  } finally {
    store?.close();
  }
}
