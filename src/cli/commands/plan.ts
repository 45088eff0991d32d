import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Config } from '../../config.js';
import type { ManifestSettings } from '../../manifest/types.js';
import { localRefsIn } from '../../media/local-input.js';
import type { ProbeResult } from '../../media/types.js';
import {
  type PlanOptions,
  type PlanResult,
  planManifest,
  planRun,
  planStreamed,
  type RunPlan,
} from '../../plan/build.js';
import type { MediaNeed, PlannedTask, PlanTotals } from '../../plan/plan.js';
import type { Shard } from '../../plan/shard.js';
import { decidePreflight } from '../../run/preflight.js';
import { learnedDay, quotaStanding } from '../../run/quota.js';
import { chooseRun, chooseShardRun, ShardRunError } from '../../run/resume.js';
import {
  keyFingerprint,
  openStore,
  type RunState,
  type Store,
  TASK_STATES,
  type TaskState,
} from '../../store/index.js';
import { roundTokens } from '../../util/money.js';
import { EXIT, ExitError } from '../errors.js';
import { fmtRange, fmtTokens, fmtUsdRange, table, tableLines } from '../format.js';
import type { CliIO } from '../io.js';
import { planning, plural } from '../load.js';
import { shardBudget } from '../shard.js';
import { LOCAL_FILES_NOTE } from './validate.js';

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
  /** Replace the manifest's vars of these names (`run --sandbox` gives `sandboxVars(baseUrl)`). */
  vars?: Readonly<Record<string, unknown>>;
  /** Only this shard's tasks (`--shard i/n`). */
  shard?: Shard;
}

export type { PlanResult, RunPlan };

function planOptions(deps: PlanDeps): PlanOptions {
  return {
    cwd: deps.io.cwd,
    now: deps.io.now(),
    prices: deps.config.prices,
    ...(deps.measure ? { measure: deps.measure } : {}),
    allowOutside: deps.allowOutside ?? false,
    ...(deps.vars ? { vars: deps.vars } : {}),
    ...(deps.shard ? { shard: deps.shard } : {}),
  };
}

/** Expand, check, measure and price a manifest (the library's planManifest, with the CLI's errors). */
export async function buildPlan(file: string, deps: PlanDeps): Promise<PlanResult> {
  return planning(planManifest(file, planOptions(deps)));
}

/** The library's planStreamed, with the CLI's errors: `plan` of a million tasks never holds them all. */
async function buildStreamedPlan(file: string, deps: PlanDeps): Promise<PlanLike> {
  const plan = await planning(planStreamed(file, planOptions(deps)));
  return {
    manifest: { settings: plan.settings },
    totals: plan.totals,
    ...(plan.wholeTotals ? { wholeTotals: plan.wholeTotals } : {}),
    tasks: plan.tasks,
  };
}

/** What the plan command reads of a plan; its tasks may be an array or produced again at each pass. */
interface PlanLike {
  manifest: { settings: ManifestSettings };
  totals: PlanTotals;
  /** With --shard: the whole manifest's. */
  wholeTotals?: PlanTotals;
  tasks: Iterable<PlannedTask>;
}

/** Lines written a thousand at a time: a plan of a million tasks is never one string. */
function writeLines(io: CliIO, lines: Iterable<string>): void {
  let chunk: string[] = [];
  for (const line of lines) {
    chunk.push(line);
    if (chunk.length === 1000) {
      io.stdout.write(`${chunk.join('\n')}\n`);
      chunk = [];
    }
  }
  if (chunk.length > 0) io.stdout.write(`${chunk.join('\n')}\n`);
}

/** The library's planRun, with the CLI's errors. */
export async function buildRunPlan(file: string, deps: PlanDeps): Promise<RunPlan> {
  return planning(planRun(file, planOptions(deps)));
}

type BalanceCheck =
  | { state: 'ok'; balance: number }
  | { state: 'failed'; reason: string }
  | { state: 'no-key' }
  | { state: 'no-base-url' };

async function checkBalance(deps: PlanDeps): Promise<BalanceCheck> {
  if (!deps.balance) return deps.config.apiKey ? { state: 'no-base-url' } : { state: 'no-key' };
  try {
    return { state: 'ok', balance: await deps.balance() };
  } catch (error) {
    // A refused key is the one failure that must stop: every later `run` would be refused too.
    if (error instanceof ExitError && error.exitCode === EXIT.unauthorized) throw error;
    return { state: 'failed', reason: error instanceof Error ? error.message : String(error) };
  }
}

/** What the state file knows of this manifest's run: the plan then prices only what is left to pay. */
interface ExistingRun {
  id: string;
  state: RunState;
  counts: Record<TaskState, number>;
  /** Net tokens the ledger holds for the run (charged minus refunded). */
  charged: number;
  /** Task ids already sent, finished or given up on: `run` submits none of them again. */
  handled: ReadonlySet<string>;
}

interface Remaining {
  tasks: number;
  tokens: number;
  min: number;
  max: number;
}

interface QuotaFigures {
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

interface Verdict {
  existing?: ExistingRun;
  remaining: Remaining;
  quota?: QuotaFigures;
  fits: PlanFits;
  /** One sentence per limit the rest would exceed. */
  refusals: string[];
  leftAfter: { balance?: number; quota?: number; budget?: number };
}

export async function planCommand(
  file: string,
  opts: { json?: boolean; probe?: boolean },
  deps: PlanDeps,
): Promise<number> {
  const plan: PlanLike = opts.json ? await buildPlan(file, deps) : await buildStreamedPlan(file, deps);
  // A shard is weighed against its share of the budget, as `run --shard` is.
  const share = deps.shard
    ? shardBudget(deps.shard, { ...plan, settings: plan.manifest.settings }, undefined)
    : undefined;
  if (share) {
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
  const path = deps.statePath === undefined ? undefined : resolve(io.cwd, deps.statePath);
  const store = path !== undefined && existsSync(path) ? openStore(path, { now: io.now }) : undefined;
  try {
    const existing = store ? existingRun(store, file, plan, deps) : undefined;
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
    const quota = quotaFigures(store, config, io.now());
    const budget = plan.manifest.settings.budget;
    const decision = decidePreflight({
      remainingMax: remaining.max,
      remainingTokens: remaining.tokens,
      chargedSoFar: existing?.charged ?? 0,
      ...(balance.state === 'ok' ? { balance: balance.balance } : {}),
      ...(quota ? { quota } : {}),
      ...(budget !== undefined ? { budget } : {}),
      allowPartial: false,
    });
    const fitsOf = (left: number | undefined): boolean | null => (left === undefined ? null : left >= 0);
    return {
      ...(existing ? { existing } : {}),
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
  } finally {
    store?.close();
  }
}

/** The run `run` would resume or continue (the same choice as `run`), if the state file has it. */
function existingRun(store: Store, file: string, plan: PlanLike, deps: PlanDeps): ExistingRun | undefined {
  const settings = plan.manifest.settings;
  const input = {
    manifestPath: resolve(deps.io.cwd, file),
    manifestName: settings.name,
    templateRunId: settings.runId,
  };
  let runId: string;
  try {
    runId = deps.shard ? chooseShardRun(store, input, deps.shard).runId : chooseRun(store, input).runId;
  } catch (error) {
    if (error instanceof ShardRunError) throw new ExitError(EXIT.invalid, error.message);
    throw error;
  }
  const run = store.getRun(runId);
  if (!run) return undefined;
  const handledStates = TASK_STATES.filter((s) => s !== 'pending');
  return {
    id: run.id,
    state: run.state,
    counts: store.countTasksByState(run.id),
    charged: store.runSpent(run.id).net,
    handled: new Set(store.tasksByState(run.id, handledStates).map((t) => t.taskId)),
  };
}

/** The quota `run` would check (src/run/quota.ts), labelled for the plan. */
function quotaFigures(store: Store | undefined, config: Config, now: Date): QuotaFigures | undefined {
  const fingerprint = config.apiKey ? keyFingerprint(config.apiKey) : undefined;
  const q = quotaStanding(store, config.quota, fingerprint, now);
  if (q.limit === null || q.used === null) return undefined;
  const source = q.learnedAt === null ? 'configured' : `learned from the API on ${learnedDay(q.learnedAt)}`;
  return { limit: q.limit, used: q.used, source };
}

function describeCounts(counts: Record<TaskState, number>): string {
  const parts = TASK_STATES.filter((s) => counts[s] > 0).map((s) => `${counts[s]} ${s.replace('_', ' ')}`);
  return parts.length > 0 ? parts.join(', ') : 'no tasks yet';
}

function planJson({ manifest, tasks, totals }: PlanResult, balance: BalanceCheck, verdict: Verdict): string {
  const { existing, remaining } = verdict;
  const out = {
    run: manifest.settings.runId,
    ...(existing
      ? {
          existingRun: {
            id: existing.id,
            state: existing.state,
            counts: Object.fromEntries(
              TASK_STATES.filter((s) => existing.counts[s] > 0).map((s) => [s, existing.counts[s]]),
            ),
            charged: existing.charged,
          },
        }
      : {}),
    tasks: tasks.map((t) => ({
      id: t.spec.id,
      model: t.entry.model,
      endpoint: t.entry.endpoint,
      body: t.wire,
      ...(t.spec.after !== undefined
        ? { after: t.spec.after.map((u) => ({ name: u.name, task: u.taskId })) }
        : {}),
      ...(existing ? { toPay: !existing.handled.has(t.spec.id) } : {}),
      estimate: {
        tokens: t.estimate.tokens,
        min: t.estimate.min,
        max: t.estimate.max,
        basis: t.estimate.basis,
        assumedPrice: t.estimate.assumedPrice,
      },
      ...(Object.keys(t.media).length > 0 ? { measured: t.media } : {}),
      ...(t.mediaNotes.length > 0 ? { notes: t.mediaNotes } : {}),
    })),
    totals,
    remaining,
    ...(manifest.settings.budget === undefined ? {} : { budget: manifest.settings.budget }),
    ...(balance.state === 'ok'
      ? { balance: balance.balance, leftAfterRun: leftAfter(balance.balance, remaining.max) }
      : {}),
    ...(balance.state === 'failed' ? { balanceError: balance.reason } : {}),
    ...(verdict.quota ? { quota: verdict.quota } : {}),
    fits: verdict.fits,
  };
  return JSON.stringify(out, null, 2);
}

function leftAfter(balance: number, max: number): number {
  return Number((balance - max).toFixed(4));
}

function* planText(
  file: string,
  plan: PlanLike,
  balance: BalanceCheck,
  verdict: Verdict,
  deps: PlanDeps,
): Generator<string> {
  const { manifest, tasks, totals } = plan;
  yield `Plan for run ${manifest.settings.runId} (${file}): ${plural(totals.tasks, 'task')}`;
  yield '';
  // Two passes over the tasks (widths, then lines), each expanding a streamed plan again.
  yield* tableLines(
    function* () {
      yield ['TASK', 'MODEL', 'TOKENS', 'USD', 'BASIS'];
      for (const t of tasks) {
        yield [
          t.spec.id,
          t.entry.model,
          fmtRange(t.estimate.tokens, t.estimate.min, t.estimate.max),
          fmtUsdRange(t.estimate.min, t.estimate.max),
          t.estimate.basis,
        ];
      }
    },
    ['left', 'left', 'right', 'right', 'left'],
  );

  const noted: { id: string; notes: string[] }[] = [];
  const local = new Set<string>();
  for (const t of tasks) {
    if (t.mediaNotes.length > 0) noted.push({ id: t.spec.id, notes: t.mediaNotes });
    for (const { path } of localRefsIn(t.body)) local.add(path);
  }
  const lines: string[] = [];
  // Only worth listing when measuring was attempted: with --no-probe nothing is measured on purpose.
  if (deps.measure && noted.length > 0) {
    lines.push('');
    lines.push('Lengths that could not be measured (priced from media_seconds, or up to the maximum):');
    lines.push(table(noted.flatMap((t) => t.notes.map((note) => ['', t.id, note]))));
  } else if (!deps.measure && noted.length > 0) {
    lines.push('');
    lines.push(
      'Media not measured (--no-probe): lengths come from media_seconds or are priced up to the maximum.',
    );
  }

  lines.push('');
  lines.push(
    table(
      [
        ['MODEL', 'TASKS', 'TOKENS', 'USD'],
        ...Object.entries(totals.byModel).map(([model, m]) => [
          model,
          fmtTokens(m.tasks),
          fmtRange(m.tokens, m.min, m.max),
          fmtUsdRange(m.min, m.max),
        ]),
        [
          'Total',
          fmtTokens(totals.tasks),
          fmtRange(totals.tokens, totals.min, totals.max),
          fmtUsdRange(totals.min, totals.max),
        ],
      ],
      ['left', 'right', 'right', 'right'],
    ),
  );
  lines.push('');
  lines.push(...moneyLines(plan, balance, verdict));
  if (local.size > 0) lines.push(`${LOCAL_FILES_NOTE(local.size)}.`);
  lines.push('Nothing was submitted.');
  yield* lines;
}

function moneyLines({ manifest, totals }: PlanLike, balance: BalanceCheck, verdict: Verdict): string[] {
  const lines: string[] = [];
  const { existing, remaining, leftAfter } = verdict;
  const unit = totals.min === totals.max && totals.max === 1 ? 'token' : 'tokens';
  const cost = `${fmtRange(totals.tokens, totals.min, totals.max)} ${unit} (${fmtUsdRange(totals.min, totals.max)}) at $0.02 per token`;
  lines.push(
    totals.min === totals.max
      ? `Cost: ${cost}.`
      : `Cost: ${cost}; budget and balance are compared with the most, ${fmtTokens(totals.max)}.`,
  );
  if (totals.assumedPrice) {
    lines.push(
      'Some prices are our assumption, not the spec’s (face swap, oc-maker): override them under `prices:` in mediabatch.config.yaml.',
    );
  }
  // With a run in the state file, only what `run` would still submit is compared with the limits.
  const what = existing ? 'the rest' : 'the plan';
  if (existing) {
    lines.push(
      `Run ${existing.id} exists (${existing.state}): ${describeCounts(existing.counts)}; ${fmtTokens(existing.charged)} tokens charged so far.`,
    );
    lines.push(
      `Left to pay: ${plural(remaining.tasks, 'task')}, ${fmtRange(remaining.tokens, remaining.min, remaining.max)} tokens (${fmtUsdRange(remaining.min, remaining.max)}).`,
    );
  }
  const budget = manifest.settings.budget;
  if (budget !== undefined && leftAfter.budget !== undefined) {
    const charged = existing ? `, ${fmtTokens(existing.charged)} charged so far` : '';
    lines.push(
      leftAfter.budget >= 0
        ? `Budget: ${fmtTokens(budget)} tokens${charged}; ${what} fits, leaving ${fmtTokens(leftAfter.budget)}.`
        : `Budget: ${fmtTokens(budget)} tokens${charged}; ${what} can cost ${fmtTokens(-leftAfter.budget)} more: \`run\` would refuse it. Raise budget or trim the tasks.`,
    );
  }
  switch (balance.state) {
    case 'ok': {
      const left = leftAfter.balance ?? balance.balance - remaining.max;
      lines.push(
        left >= 0
          ? `Balance: ${fmtTokens(balance.balance)} tokens; ${fmtTokens(left)} left after the run at most.`
          : `Balance: ${fmtTokens(balance.balance)} tokens; NOT ENOUGH: ${what} can cost ${fmtTokens(-left)} more. Top up, or trim the tasks.`,
      );
      break;
    }
    case 'failed':
      lines.push(`Balance: could not be fetched (${balance.reason}).`);
      break;
    case 'no-base-url':
      lines.push(
        'Balance: not checked; MEDIABATCH_API_KEY is set but no base URL is: set MEDIABATCH_BASE_URL, --base-url, or base_url in mediabatch.config.yaml.',
      );
      break;
    case 'no-key':
      lines.push(
        'Balance: not checked; to compare the plan with your balance, set MEDIABATCH_API_KEY (and MEDIABATCH_BASE_URL) in the environment.',
      );
      break;
  }
  const quota = verdict.quota;
  if (quota && leftAfter.quota !== undefined) {
    const head = `Quota: ${fmtTokens(quota.used)} of ${fmtTokens(quota.limit)} tokens used this period (${quota.source})`;
    lines.push(
      leftAfter.quota >= 0
        ? `${head}; ${fmtTokens(leftAfter.quota)} left after the run at most.`
        : `${head}; NOT ENOUGH: ${what} can cost ${fmtTokens(-leftAfter.quota)} more.`,
    );
  }
  return lines;
}
