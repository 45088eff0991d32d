// What is left of a manifest's run to pay, against the balance, the quota and the budget: `plan` reads
// the state file (never creating one) for the run `run` would drive, so only the rest is priced.

import type { ManifestSettings } from '../manifest/types.js';
import { owedSoFar } from '../money/index.js';
import type { PlannedTask } from '../plan/plan.js';
import type { Shard } from '../plan/shard.js';
import {
  keyFingerprint,
  type RunRecord,
  type RunState,
  type Store,
  TASK_STATES,
  type TaskState,
} from '../store/index.js';
import { learnedDay, quotaStanding } from '../store/quota.js';
import { fromMicro, roundTokens } from '../util/money.js';
import { decidePreflight } from './preflight.js';
import { chooseRun, chooseShardRun } from './resume.js';

/** What the state file knows of this manifest's run: the plan then prices only what is left to pay. */
export interface ExistingRun {
  id: string;
  state: RunState;
  counts: Record<TaskState, number>;
  /** Net tokens the ledger holds for the run (charged minus refunded). */
  charged: number;
  /** Worst cases the run holds for tasks not pending (in doubt, in flight): they may still be charged. */
  reserved: number;
  /** Task ids already sent, finished or given up on: `run` submits none of them again. */
  handled: ReadonlySet<string>;
}

export interface Remaining {
  tasks: number;
  tokens: number;
  min: number;
  max: number;
}

export interface QuotaFigures {
  limit: number;
  used: number;
  source: string;
}

/** Whether what is left to pay fits each limit; null where the limit is unknown. */
export interface PlanFits {
  balance: boolean | null;
  quota: boolean | null;
  budget: boolean | null;
}

export interface Verdict {
  existing?: ExistingRun;
  /**
   * The run `run` would drive was started from another manifest (the same `name:`): `run` refuses this
   * one under that id (unless it is that manifest moved), and the plan is weighed as a new run.
   */
  takenBy?: { runId: string; manifest: string };
  remaining: Remaining;
  quota?: QuotaFigures;
  fits: PlanFits;
  /** One sentence per limit the rest would exceed. */
  refusals: string[];
  leftAfter: { balance?: number; quota?: number; budget?: number };
}

/** What the verdict reads of a plan; its tasks may be an array or produced again at each pass. */
export interface PlanToJudge {
  settings: ManifestSettings;
  tasks: Iterable<PlannedTask>;
}

export interface JudgeInputs {
  /** The state file, when there is one: a run of this manifest in it is paid for in part already. */
  store: Store | undefined;
  /** The manifest's absolute path. */
  manifestPath: string;
  /** The balance, when it could be fetched. */
  balance: number | undefined;
  config: { quota?: number | undefined; apiKey?: string | undefined };
  now: Date;
  /** `plan --shard`: the shard's run is the one to weigh (ShardRunError when it cannot be driven). */
  shard?: Shard;
  /** A manifest's path as the person reaches it. */
  shown?: (path: string) => string;
}

/** Compares what is left of the run `run` would drive (all of it for a new run) with every limit. */
export function judgePlan(plan: PlanToJudge, o: JudgeInputs): Verdict {
  const { store, config } = o;
  const chosen = store ? chosenRun(store, o.manifestPath, plan.settings, o.shard) : undefined;
  const mine = chosen?.manifestPath === o.manifestPath;
  const existing = store && chosen && mine ? existingRun(store, chosen) : undefined;
  const takenBy =
    chosen && !mine ? { runId: chosen.id, manifest: (o.shown ?? String)(chosen.manifestPath) } : undefined;
  const sums = { tasks: 0, tokens: 0, min: 0, max: 0 };
  for (const t of plan.tasks) {
    if (existing?.handled.has(t.spec.id)) continue;
    sums.tasks++;
    sums.tokens += t.estimate.tokens;
    sums.min += t.estimate.min;
    sums.max += t.estimate.max;
  }
  const remaining: Remaining = {
    tasks: sums.tasks,
    tokens: roundTokens(sums.tokens),
    min: roundTokens(sums.min),
    max: roundTokens(sums.max),
  };
  const quota = quotaFigures(store, config, o.now);
  const budget = plan.settings.budget;
  const decision = decidePreflight({
    remainingMax: remaining.max,
    remainingTokens: remaining.tokens,
    chargedSoFar: existing?.charged ?? 0,
    reservedSoFar: existing?.reserved ?? 0,
    ...(o.balance !== undefined ? { balance: o.balance } : {}),
    ...(quota ? { quota } : {}),
    ...(budget !== undefined ? { budget } : {}),
    allowPartial: false,
  });
  const fitsOf = (left: number | undefined): boolean | null => (left === undefined ? null : left >= 0);
  return {
    ...(existing ? { existing } : {}),
    ...(takenBy ? { takenBy } : {}),
    remaining,
    ...(quota ? { quota } : {}),
    fits: {
      balance: fitsOf(decision.leftAfter.balance),
      quota: fitsOf(decision.leftAfter.quota),
      budget: fitsOf(decision.leftAfter.budget),
    },
    refusals: decision.refusals,
    leftAfter: decision.leftAfter,
  };
}

/** The run `run` would resume or continue (the same choice as `run`), if the state file has it. */
function chosenRun(
  store: Store,
  manifestPath: string,
  settings: ManifestSettings,
  shard: Shard | undefined,
): RunRecord | undefined {
  const input = { manifestPath, manifestName: settings.name, templateRunId: settings.runId };
  const { runId } = shard ? chooseShardRun(store, input, shard) : chooseRun(store, input);
  return store.runs.getRun(runId);
}

/** What of this manifest's run is paid or sent already. */
function existingRun(store: Store, run: RunRecord): ExistingRun {
  const handledStates = TASK_STATES.filter((s) => s !== 'pending');
  return {
    id: run.id,
    state: run.state,
    counts: store.tasks.countTasksByState(run.id),
    charged: store.ledger.runSpent(run.id).net,
    reserved: fromMicro(owedSoFar(store, run.id).reserved),
    handled: new Set(store.tasks.tasksByState(run.id, handledStates).map((t) => t.taskId)),
  };
}

/** The quota `run` would check (src/store/quota.ts), labelled for the plan. */
function quotaFigures(
  store: Store | undefined,
  config: JudgeInputs['config'],
  now: Date,
): QuotaFigures | undefined {
  const fingerprint = config.apiKey ? keyFingerprint(config.apiKey) : undefined;
  const q = quotaStanding(store, config.quota, fingerprint, now);
  if (q.limit === null || q.used === null) return undefined;
  const source = q.learnedAt === null ? 'configured' : `learned from the API on ${learnedDay(q.learnedAt)}`;
  return { limit: q.limit, used: q.used, source };
}
