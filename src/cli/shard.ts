// The shard flags of run, plan, validate, status and report, turned into a Shard, and the
// lines a shard's preflight adds. The rules (which tasks, the budget share) are in src/plan/shard.ts.

import type { PlanTotals } from '../plan/plan.js';
import {
  budgetShare,
  parseShard,
  parseShardRunId,
  type Shard,
  shardFromEnv,
  shardRunId,
} from '../plan/shard.js';
import { stateInLine } from '../results/invocation.js';
import { fmtTokensWithUnit } from '../util/numbers.js';
import { EXIT, ExitError } from './errors.js';
import { fmtTokens } from './format.js';

export interface ShardFlags {
  /** `i/n`, counted from 1. */
  shard?: string;
  /** The index from the engine's variable (JOB_COMPLETION_INDEX, …). */
  shardFromEnv?: boolean;
  /** The count for --shard-from-env when no variable gives it. */
  shardCount?: number;
}

/** The shard the flags name, or undefined; a bad value is one line, exit 1. */
export function shardOfFlags(flags: ShardFlags, env: NodeJS.ProcessEnv): Shard | undefined {
  if (flags.shard !== undefined && flags.shardFromEnv) {
    throw new ExitError(EXIT.invalid, '--shard and --shard-from-env: give one of them');
  }
  if (flags.shardCount !== undefined && !flags.shardFromEnv) {
    throw new ExitError(EXIT.invalid, '--shard-count goes with --shard-from-env (with --shard, write i/n)');
  }
  const parsed =
    flags.shard !== undefined
      ? parseShard(flags.shard)
      : flags.shardFromEnv
        ? shardFromEnv(env, flags.shardCount)
        : undefined;
  if (parsed === undefined) return undefined;
  if (!parsed.ok) throw new ExitError(EXIT.invalid, parsed.message);
  return parsed.shard;
}

export interface ShardBudget {
  /** The budget this shard works under; undefined when neither the manifest nor --budget sets one. */
  budget: number | undefined;
  /** The line the preflight shows. */
  line: string;
}

/** A shard's budget: --budget, or its share of the manifest's by worst case; and the line that says so. */
export function shardBudget(
  shard: Shard,
  plan: { totals: PlanTotals; wholeTotals?: PlanTotals; settings: { budget?: number | undefined } },
  budgetFlag: number | undefined,
): ShardBudget {
  const whole = plan.wholeTotals ?? plan.totals;
  const head = `Shard ${shard.index} of ${shard.count}: ${fmtTokens(plan.totals.tasks)} of the manifest's ${fmtTokens(whole.tasks)} tasks, at most ${fmtTokens(plan.totals.max)} of ${fmtTokensWithUnit(whole.max)}`;
  const others =
    shard.count > 1
      ? `; the other ${shard.count - 1} shard${shard.count === 2 ? '' : 's'} draw on the same balance`
      : '';
  if (budgetFlag !== undefined) {
    return {
      budget: budgetFlag,
      line: `${head}; budget ${fmtTokensWithUnit(budgetFlag)} (--budget)${others}.`,
    };
  }
  const manifestBudget = plan.settings.budget;
  if (manifestBudget === undefined) return { budget: undefined, line: `${head}; no budget${others}.` };
  const share = budgetShare(manifestBudget, plan.totals.max, whole.max, shard);
  return {
    budget: share,
    line: `${head}; budget share ${fmtTokens(share)} of ${fmtTokensWithUnit(manifestBudget)} (budget × this shard's worst case ÷ the whole run's)${others}.`,
  };
}

/**
 * The run a read-only command (status, report) shows with --shard: `<run>.shard-i-of-n` of the run
 * named, or the newest shard run of that index and count in the state file (a shard's machine holds one).
 */
export function shardRunOf(
  runId: string | undefined,
  shard: Shard,
  runs: () => readonly { id: string }[],
): string | undefined {
  if (runId !== undefined) return parseShardRunId(runId) ? runId : shardRunId(runId, shard);
  return runs().find((r) => {
    const s = parseShardRunId(r.id)?.shard;
    return s?.index === shard.index && s.count === shard.count;
  })?.id;
}

/**
 * The run `status` and `report` show: with --shard, the shard's run (one line, exit 1, when the state
 * file has none); without it, the run asked for (undefined: the command's own default).
 */
export function askedRun(
  asked: string | undefined,
  flags: ShardFlags,
  env: NodeJS.ProcessEnv,
  runs: () => readonly { id: string }[],
  statePath: string,
): string | undefined {
  const shard = shardOfFlags(flags, env);
  if (!shard) return asked;
  const id = shardRunOf(asked, shard, runs);
  if (id !== undefined) return id;
  throw new ExitError(
    EXIT.invalid,
    `no run of shard ${shard.index} of ${shard.count} in ${stateInLine(statePath)}: name the run (\`<run> --shard ${shard.index}/${shard.count}\`), or use the shard's own --state`,
  );
}
