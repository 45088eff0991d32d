// Planning as one pipeline: load → check → probe → price. Used by validate, plan, run and schedule alike,
// and by scripts that import mediabatch. No printing and no exit codes: problems come back as one error
// that carries every problem, located.

import { stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { expectedJobMs } from '../catalog/durations.js';
import { DEFAULT_PRICES } from '../catalog/prices.js';
import type { PriceTable } from '../catalog/types.js';
import { MediabatchError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import type { CheckPartial } from '../manifest/declaration.js';
import { loadManifest } from '../manifest/index.js';
import { foldProblems, formatProblem, ProblemFold, sortProblems } from '../manifest/problems.js';
import type {
  LoadedManifest,
  ManifestProblem,
  ManifestSettings,
  TaskSource,
  TaskSpec,
} from '../manifest/types.js';
import { formatCount } from '../manifest/values.js';
import { localRef } from '../media/local-input.js';
import type { ProbeResult, Prober } from '../media/types.js';
import type { NewTask } from '../store/index.js';
import { ChainPlan } from './chains.js';
import { LocalInputChecks, measuringLocalFiles } from './local-inputs.js';
import {
  addMediaNeeds,
  type CheckedTask,
  checkTask,
  checkTasks,
  type MediaNeed,
  mediaNeeds,
  type PlannedTask,
  type PlanTotals,
  partialCheck,
  planTotals,
  pricedTasks,
  priceTasks,
  TotalsSum,
} from './plan.js';
import { type Shard, shardFilterOf } from './shard.js';

const PROBE_CONCURRENCY = 8;

/** Measures input media over HTTP (Range requests), a few at a time: what `plan` and `run` use. */
export function mediaMeasure(): (needs: MediaNeed[]) => Promise<Map<string, ProbeResult>> {
  // Loaded on the first measurement: music-metadata and the HTTP client are not needed to read a manifest.
  let prober: Prober | undefined;
  return async (needs) => {
    const { createProber, probeMany } = await import('../media/probe.js');
    prober ??= createProber();
    return probeMany(prober, needs, PROBE_CONCURRENCY);
  };
}

/**
 * Every problem of a manifest (its own, its data files', the catalog's), located; the same problem at the
 * same place in many tasks is one, with their count and first ids, whichever check found it.
 */
export class ManifestProblemsError extends MediabatchError {
  override name = 'ManifestProblemsError';
  override readonly exitCode = EXIT.invalid;
  /** Sorted by file (the manifest first), line and column. */
  readonly problems: readonly ManifestProblem[];
  /** Each problem as its line, `file:line:col  task <id>  <field.path>: <rule>`. */
  override readonly details: readonly string[];
  constructor(
    readonly file: string,
    problems: readonly ManifestProblem[],
  ) {
    const folded = sortProblems(foldProblems(problems), file);
    const n = folded.length;
    super(
      `${formatCount(n)} problem${n === 1 ? '' : 's'} in ${file}; fix ${n === 1 ? 'it' : 'them'} and run again`,
    );
    this.problems = folded;
    this.details = folded.map(formatProblem);
  }
}

/** The manifest file itself cannot be read as one (missing, a folder). */
export class ManifestFileError extends MediabatchError {
  override name = 'ManifestFileError';
  override readonly exitCode = EXIT.invalid;
}

export interface PlanOptions {
  /** Relative paths (the manifest, `output`) resolve against this folder. */
  cwd: string;
  /** The time templates such as `{{date}}` render at. */
  now: Date;
  /** Price overrides (the account's configuration); the spec's list prices otherwise. */
  prices?: PriceTable;
  /** Measures input media; without it, lengths come from `media_seconds` or become ranges. */
  measure?: (needs: MediaNeed[]) => Promise<Map<string, ProbeResult>>;
  /** `foreach` may read data files outside the manifest's folder. */
  allowOutside?: boolean;
  /** Replace the manifest's vars of these names (`run --sandbox` gives the sandbox's address). */
  vars?: Readonly<Record<string, unknown>>;
  /** Only this shard's tasks (src/plan/shard.ts); every task is still checked and priced for the whole. */
  shard?: Shard;
}

export interface PlanResult {
  manifest: LoadedManifest;
  tasks: PlannedTask[];
  totals: PlanTotals;
  /** With a shard: the whole manifest's totals (its budget share is taken from the worst cases). */
  wholeTotals?: PlanTotals;
}

/** What a run needs of a plan: settings, totals, and the store rows, produced one at a time. */
export interface RunPlan {
  file: string;
  settings: ManifestSettings;
  totals: PlanTotals;
  /** With a shard: the whole manifest's totals. */
  wholeTotals?: PlanTotals;
  shard?: Shard;
  taskIds: string[];
  /**
   * The tasks as store rows, priced again one by one (pure, cheap), so they are never all in memory.
   * With a callback receiver the callback URL is per task and added when sending, so it is left out.
   */
  rows(opts?: { withoutCallback?: boolean }): Generator<NewTask>;
  /** Lets the manifest's tasks go once they are in the store. */
  release(): void;
  /**
   * The longest expected job (ms) among the rows from this position on (0 past the end): a run that
   * starts while its later rows are still being stored submits a stored task only when none longer is
   * still to come, so the order stays longest first.
   */
  longestFrom(position: number): number;
  /** Some task takes a result of another (`after`). */
  chained: boolean;
  /** Some request names a local file (`file:`): uploads need every task's request before the first POST. */
  localInputs: boolean;
}

/** A missing manifest is a usage mistake, not a problem inside a manifest: say so plainly. */
async function requireFile(file: string, cwd: string): Promise<void> {
  let info: Awaited<ReturnType<typeof stat>>;
  try {
    info = await stat(resolve(cwd, file));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : `cannot read it (${code ?? String(error)})`;
    throw new ManifestFileError(`${file}: ${why}; check the path of the manifest`);
  }
  if (info.isDirectory()) {
    throw new ManifestFileError(`${file} is a folder; give the path of a manifest file (.yaml)`);
  }
}

/**
 * Loads, expands and checks a manifest against every static rule; throws ManifestProblemsError listing
 * every problem: the manifest's own and the catalog's for every task that expanded, all in one go.
 */
export async function loadChecked(
  file: string,
  o: Pick<PlanOptions, 'cwd' | 'now' | 'allowOutside' | 'vars'>,
): Promise<{ manifest: LoadedManifest; tasks: CheckedTask[] }> {
  await requireFile(file, o.cwd);
  const partial = localChecks(file, o);
  const result = await loadManifest(file, {
    now: o.now,
    cwd: o.cwd,
    allowOutside: o.allowOutside ?? false,
    checkPartial: partialChecker(partial),
    ...(o.vars ? { overrideVars: o.vars } : {}),
  });
  if (!result.ok) {
    const tasks = result.tasks ?? [];
    const checked = checkTasks(tasks);
    for (const task of checked.tasks) partial.add(task);
    const chains = tasks.some((t) => t.after !== undefined) ? chainPlanOf(checked.tasks, tasks) : undefined;
    throw new ManifestProblemsError(file, [
      ...result.problems,
      ...checked.problems,
      ...(chains?.problems(result.unexpanded) ?? []),
      ...(await partial.problems()),
    ]);
  }
  const checked = checkTasks(result.manifest.tasks);
  // Chains are checked too when some task has problems of its own: every problem at once.
  const chains = chainsOf(result.manifest, checked.tasks, result.manifest.tasks);
  const problems = [
    ...checked.problems,
    ...(chains?.problems() ?? []),
    ...(await localProblems(file, o, checked.tasks)),
  ];
  if (problems.length > 0) throw new ManifestProblemsError(file, problems);
  return { manifest: result.manifest, tasks: checked.tasks };
}

/**
 * The request of a task that did not expand, checked in the fields its failure leaves alone; its local
 * `file:` inputs among them are noted in `local`, to be checked on the disk with the others.
 */
function partialChecker(local: LocalInputChecks): CheckPartial {
  return (spec, broken) => {
    const { problems, task } = partialCheck(spec, broken);
    if (task) local.add(task);
    return problems;
  };
}

/** The local `file:` inputs of these tasks checked on the disk (no network), as located problems. */
function localProblems(
  file: string,
  o: Pick<PlanOptions, 'cwd' | 'allowOutside'>,
  tasks: Iterable<CheckedTask>,
): Promise<ManifestProblem[]> {
  const checks = localChecks(file, o);
  for (const task of tasks) checks.add(task);
  return checks.problems();
}

function localChecks(file: string, o: Pick<PlanOptions, 'cwd' | 'allowOutside'>): LocalInputChecks {
  return new LocalInputChecks(dirname(resolve(o.cwd, file)), o.allowOutside ?? false);
}

/** The measure, with `file:` inputs checked and measured locally even when nothing remote is measured. */
function localAware(file: string, o: PlanOptions): PlanOptions['measure'] {
  return measuringLocalFiles(o.measure, dirname(resolve(o.cwd, file)), o.allowOutside ?? false);
}

/** The chains of a manifest that has any, from its checked tasks (and the ids of those that failed). */
function chainsOf(
  manifest: LoadedManifest,
  tasks: readonly CheckedTask[],
  specs: readonly TaskSpec[] = [],
): ChainPlan | undefined {
  return manifest.chained ? chainPlanOf(tasks, specs) : undefined;
}

function chainPlanOf(tasks: readonly CheckedTask[], specs: readonly TaskSpec[]): ChainPlan {
  const chains = new ChainPlan();
  for (const spec of specs) chains.note(spec);
  for (const task of tasks) chains.add(task);
  return chains;
}

/** Expand, check, measure and price a manifest: every task with its price, and the totals. */
export async function planManifest(file: string, o: PlanOptions): Promise<PlanResult> {
  const { manifest, tasks } = await loadChecked(file, o);
  const needs = mediaNeeds(tasks);
  const measure = localAware(file, o);
  const measured = measure && needs.length > 0 ? await measure(needs) : undefined;
  const chains = chainsOf(manifest, tasks);
  chains?.measured(measured);
  const priced = priceTasks(
    tasks,
    measured,
    o.prices ?? DEFAULT_PRICES,
    manifest.settings.callbackUrl,
    chains,
  );
  if (priced.problems.length > 0) throw new ManifestProblemsError(file, priced.problems);
  if (!o.shard) return { manifest, tasks: priced.tasks, totals: planTotals(priced.tasks) };
  const inShard = shardFilterOf(o.shard, manifest.chained === true, () => manifest.tasks);
  const mine = priced.tasks.filter((t) => inShard(t.spec.id));
  return { manifest, tasks: mine, totals: planTotals(mine), wholeTotals: planTotals(priced.tasks) };
}

/**
 * Like planManifest, for a run, streaming: the tasks are expanded, checked and priced one at a time, once
 * to find every problem and the totals, and again when the store takes the rows; nothing per task is
 * kept but its id, so a run of 1,000,000 tasks never holds them all.
 */
export async function planRun(file: string, o: PlanOptions): Promise<RunPlan> {
  const plan = await planStreamed(file, o);
  const { settings } = plan;
  return {
    file,
    settings,
    totals: plan.totals,
    ...(plan.wholeTotals ? { wholeTotals: plan.wholeTotals } : {}),
    ...(o.shard ? { shard: o.shard } : {}),
    taskIds: plan.taskIds,
    *rows(opts = {}) {
      for (const task of plan.tasks) {
        const { custom_callback_url: _callback, ...rest } = task.wire;
        yield {
          taskId: task.spec.id,
          model: task.entry.model,
          endpoint: task.entry.endpoint,
          wireBody: JSON.stringify(opts.withoutCallback ? rest : task.wire),
          estimate: task.estimate,
          expectedMs: expectedJobMs(task.entry, task.body),
          retries: task.spec.retries ?? settings.retries,
          review: task.spec.review ?? settings.review,
          ...(task.spec.after !== undefined && {
            upstreams: task.spec.after.map(({ name, taskId }) => ({ name, taskId })),
          }),
          ...(task.spec.fileName !== undefined ? { fileName: task.spec.fileName } : {}),
        };
      }
    },
    release: () => plan.release(),
    longestFrom: plan.longestFrom,
    chained: plan.chained,
    localInputs: plan.localInputs,
  };
}

/** A plan whose priced tasks are produced again each time `tasks` is iterated, never all held. */
export interface StreamedPlan {
  file: string;
  settings: ManifestSettings;
  totals: PlanTotals;
  /** With a shard: the whole manifest's totals (`totals` and `tasks` are the shard's). */
  wholeTotals?: PlanTotals;
  taskIds: string[];
  /** Every task priced, in manifest order; each iteration expands the manifest again. */
  tasks: Iterable<PlannedTask>;
  /** Lets the manifest go; `tasks` cannot be iterated after. */
  release(): void;
  /** See RunPlan.longestFrom. */
  longestFrom(position: number): number;
  chained: boolean;
  localInputs: boolean;
}

/** The manifest loaded for a streamed plan; its problems, with the catalog's for the tasks that expanded, thrown. */
async function loadStreaming(file: string, o: PlanOptions, local: LocalInputChecks) {
  await requireFile(file, o.cwd);
  const result = await loadManifest(file, {
    now: o.now,
    cwd: o.cwd,
    allowOutside: o.allowOutside ?? false,
    streaming: true,
    checkPartial: partialChecker(local),
    ...(o.vars ? { overrideVars: o.vars } : {}),
  });
  if (!result.ok) {
    const checked = checkTasks(result.tasks ?? []);
    for (const task of checked.tasks) local.add(task);
    throw new ManifestProblemsError(file, [
      ...result.problems,
      ...checked.problems,
      ...(await local.problems()),
    ]);
  }
  return result.manifest;
}

/** Every problem at once, in order: expansion, the catalog's, chains', local files'. */
function throwIfProblems(file: string, problems: ManifestProblem[]): void {
  if (problems.length > 0) throw new ManifestProblemsError(file, problems);
}

/**
 * The totals of tasks priced with the lengths measured (none yet: as written), and their problems. With a
 * shard (`inShard`), `totals` are the shard's and `whole` every task's (its budget share needs both).
 */
function pricing(
  lengths: ReadonlyMap<string, ProbeResult> | undefined,
  prices: PriceTable,
  callbackUrl: string | undefined,
  chains: ChainPlan | undefined,
  inShard?: (id: string) => boolean,
) {
  const sum = new TotalsSum();
  const whole = inShard ? new TotalsSum() : sum;
  const problems = new ProblemFold();
  return {
    totals: sum,
    whole,
    problems,
    add(task: CheckedTask) {
      for (const one of pricedTasks([task], lengths, prices, callbackUrl, chains)) {
        if (!one.ok) {
          for (const problem of one.problems) problems.add(problem);
          continue;
        }
        if (whole !== sum) whole.add(one.task);
        if (!inShard || inShard(one.task.spec.id)) sum.add(one.task);
      }
    },
  };
}

/** planManifest's result, streamed (see StreamedPlan): every problem is found before this returns. */
export async function planStreamed(file: string, o: PlanOptions): Promise<StreamedPlan> {
  const local = localChecks(file, o);
  const manifest = await loadStreaming(file, o, local);
  const { settings } = manifest;
  let source: TaskSource | undefined = manifest.source ?? listedSource(manifest.tasks);
  const prices = o.prices ?? DEFAULT_PRICES;
  const inShard = shardOnly(o.shard, manifest.chained === true, source);

  // First pass: every problem, the ids, the media to measure, and the totals as if nothing needed measuring.
  const taskIds: string[] = [];
  const needs = new Map<string, MediaNeed>();
  const catalogProblems = new ProblemFold();
  // A chain's downstream may come before its upstream: chained tasks are priced once every task is known.
  const chains = manifest.chained ? new ChainPlan() : undefined;
  const priceAll = (lengths: ReadonlyMap<string, ProbeResult> | undefined) =>
    pricing(lengths, prices, settings.callbackUrl, chains, inShard);
  let priced = priceAll(undefined);
  // Each expected duration and the last position holding it: a handful of entries, however many tasks.
  const lastAt = new Map<number, number>();
  let localInputs = false;
  const first = source.expand();
  for (const spec of first.tasks) {
    const one = checkTask(spec);
    if (!one.ok) {
      for (const problem of one.problems) catalogProblems.add(problem);
      chains?.note(spec);
      continue;
    }
    local.add(one.task);
    if (!inShard || inShard(spec.id)) {
      lastAt.set(expectedJobMs(one.task.entry, one.task.body), taskIds.length);
      localInputs ||= namesLocalFile(one.task.body);
      taskIds.push(spec.id);
    }
    addMediaNeeds(one.task, needs);
    if (chains) chains.add(one.task);
    else priced.add(one.task);
  }
  throwIfProblems(file, [
    ...first.problems(),
    ...catalogProblems.lines(),
    ...(chains?.problems(first.unexpanded()) ?? []),
    ...(await local.problems()),
  ]);
  const measure = localAware(file, o);
  const measured = measure && needs.size > 0 ? await measure([...needs.values()]) : undefined;
  chains?.measured(measured);
  if (measured || chains) {
    // Lengths change prices and may break rules: a second pass with what was measured.
    priced = priceAll(measured);
    for (const task of checkedTasks(source)) priced.add(task);
  }
  if (priced.problems.size > 0) throw new ManifestProblemsError(file, priced.problems.lines());
  const totals = priced.totals.result();

  return {
    file,
    settings,
    totals,
    ...(inShard ? { wholeTotals: priced.whole.result() } : {}),
    taskIds,
    tasks: {
      *[Symbol.iterator]() {
        if (!source) throw new Error('internal: the plan was released before its tasks were read');
        const mine = checkedTasks(source, inShard);
        for (const one of pricedTasks(mine, measured, prices, settings.callbackUrl, chains)) {
          if (one.ok) yield one.task;
        }
      },
    },
    release() {
      source = undefined;
    },
    longestFrom: (position) => longestFrom(lastAt, position),
    chained: chains !== undefined,
    localInputs,
  };
}

/** The longest expected job among the tasks from a position on (each duration with its last position). */
function longestFrom(lastAt: ReadonlyMap<number, number>, position: number): number {
  let longest = 0;
  for (const [ms, last] of lastAt) if (last >= position && ms > longest) longest = ms;
  return longest;
}

/** A shard's filter; a chained manifest's groups are read in a pass of their own (a downstream may come first). */
function shardOnly(
  shard: Shard | undefined,
  chained: boolean,
  source: TaskSource,
): ((id: string) => boolean) | undefined {
  return shard ? shardFilterOf(shard, chained, () => source.expand().tasks) : undefined;
}

/** Whether a request names a local file, in a field or in a list (frame links). */
function namesLocalFile(body: Readonly<Record<string, unknown>>): boolean {
  for (const value of Object.values(body)) {
    if (localRef(value) !== undefined) return true;
    if (Array.isArray(value) && value.some((v) => localRef(v) !== undefined)) return true;
  }
  return false;
}

/** The tasks of a source that pass their model's rules (the first pass proved they all do). */
function* checkedTasks(source: TaskSource, only?: (id: string) => boolean): Generator<CheckedTask> {
  for (const spec of source.expand(true).tasks) {
    if (only && !only(spec.id)) continue;
    const one = checkTask(spec);
    if (one.ok) yield one.task;
  }
}

/** A source over tasks already expanded (a manifest loaded without streaming). */
function listedSource(tasks: readonly TaskSpec[]): TaskSource {
  return {
    expand: () => ({
      tasks: (function* () {
        yield* tasks;
      })(),
      problems: () => [],
      unexpanded: () => ({ ids: new Set(), unknown: false }),
    }),
  };
}
