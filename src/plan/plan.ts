// The pure core between a manifest and money: task specs -> checked request bodies -> prices.
// No I/O here; media lengths are measured by the caller and passed in.

import { isLocalFile } from '../catalog/fields.js';
import { checkRequest, findEntry, toWireBody } from '../catalog/index.js';
import type {
  CatalogEntry,
  Estimate,
  MediaDurations,
  MediaField,
  PriceTable,
  RequestBody,
  RequestIssue,
} from '../catalog/types.js';
import { ProblemFold } from '../manifest/problems.js';
import type { ManifestProblem, TaskSpec } from '../manifest/types.js';
import type { MediaKind, ProbeResult } from '../media/types.js';
import { roundTokens, tokensToUsd } from '../util/money.js';
import { type ChainPlan, checkChained, combinations, holdsReference } from './chains.js';

export interface CheckedTask {
  spec: TaskSpec;
  entry: CatalogEntry;
  /** Canonical request body: aliases folded, no `model`, no callback. */
  body: RequestBody;
}

export interface PlannedTask extends CheckedTask {
  /** The exact JSON that is sent. */
  wire: Record<string, unknown>;
  media: MediaDurations;
  /** Why a length could not be measured, per field, in words. */
  mediaNotes: string[];
  estimate: Estimate;
}

export interface ModelTotals {
  tasks: number;
  tokens: number;
  min: number;
  max: number;
  usd: number;
}

export interface PlanTotals extends ModelTotals {
  byModel: Record<string, ModelTotals>;
  /** True when some estimate rests on a list price we assumed (face swap, oc-maker). */
  assumedPrice: boolean;
}

/** A catalog issue at `path` of a task's input, located in the manifest. */
export function problemFromIssue(spec: TaskSpec, path: string, message: string): ManifestProblem {
  if (path === 'model') return { pos: spec.pos, taskId: spec.id, path: 'model', message };
  return {
    pos: spec.locate(path),
    taskId: spec.id,
    path: path === '' ? 'input' : `input.${path}`,
    message,
  };
}

/** Checks every task's request against its model's rules; collects every problem, not only the first. */
export function checkTasks(tasks: readonly TaskSpec[]): {
  tasks: CheckedTask[];
  problems: ManifestProblem[];
} {
  const checked: CheckedTask[] = [];
  const problems = new ProblemFold();
  for (const spec of tasks) {
    const one = checkTask(spec);
    if (one.ok) checked.push(one.task);
    else for (const problem of one.problems) problems.add(problem);
  }
  return { tasks: checked, problems: problems.lines() };
}

/** One task's request against its model's rules. */
export function checkTask(
  spec: TaskSpec,
): { ok: true; task: CheckedTask } | { ok: false; problems: ManifestProblem[] } {
  // A chained task is checked with each reference standing for a valid value of its kind.
  const result = spec.after === undefined ? checkRequest(spec.model, spec.input) : checkChained(spec);
  if (!result.ok) {
    return { ok: false, problems: result.issues.map((i) => problemFromIssue(spec, i.path, i.message)) };
  }
  // checkRequest only succeeds for a known model, so the entry exists.
  return { ok: true, task: { spec, entry: lookupEntry(spec.model), body: result.body } };
}

/** Checks of one task with broken fields at most: each broken field standing for its valid values in turn. */
const MAX_PARTIAL_TRIES = 32;

/**
 * The problems of a task's request that do not depend on its `broken` fields (top-level input fields
 * whose template failed, left undefined): the request is checked with each broken field standing for
 * each of its model's sample values (left out when it has none), and only the problems that every try
 * finds, outside the broken fields, are its own. A try that passes means none, and gives the task
 * checked (without the broken fields), so that what else its request holds (a local `file:` input) can be
 * checked too.
 */
export function partialCheck(
  spec: TaskSpec,
  broken: ReadonlySet<string>,
): { problems: ManifestProblem[]; task?: CheckedTask } {
  const entry = findEntry(spec.model);
  const choices = [...broken].map((key) => {
    const samples = entry?.fieldSamples?.(key)?.samples ?? [];
    return samples.length === 0 ? [{ key }] : samples.map((value) => ({ key, value }));
  });
  let common: Map<string, ManifestProblem> | undefined;
  for (const combo of combinations(choices, MAX_PARTIAL_TRIES)) {
    const input: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(spec.input)) if (!broken.has(key)) input[key] = value;
    for (const choice of combo) if ('value' in choice) input[choice.key] = choice.value;
    const result = checkTask({ ...spec, input });
    if (result.ok) return { problems: [], task: withoutFields(result.task, broken) };
    const found = new Map(result.problems.map((p) => [`${p.path}\0${p.message}`, p]));
    if (common === undefined) common = found;
    else for (const key of common.keys()) if (!found.has(key)) common.delete(key);
  }
  const inBroken = (path: string) => broken.has(path.replace(/^input\./, '').split('.')[0] ?? '');
  return { problems: [...(common?.values() ?? [])].filter((p) => !inBroken(p.path)) };
}

/** A checked task without the fields a sample stood for (by the name written or the canonical one). */
function withoutFields(task: CheckedTask, fields: ReadonlySet<string>): CheckedTask {
  const gone = new Set(fields);
  for (const key of fields) {
    const canonical = task.entry.fieldSamples?.(key)?.field;
    if (canonical !== undefined) gone.add(canonical);
  }
  const body: RequestBody = {};
  for (const [key, value] of Object.entries(task.body)) if (!gone.has(key)) body[key] = value;
  return { ...task, body };
}

function lookupEntry(model: string): CatalogEntry {
  const entry = findEntry(model);
  if (!entry) throw new Error(`internal: model ${model} passed the check but has no catalog entry`);
  return entry;
}

/** A media input whose length the price or the rules depend on. */
export interface MediaNeed {
  location: string;
  kind: MediaKind;
}

/** A media field is measured when its length is billed or checked, or when the spec caps its size. */
function measurable(field: MediaField): boolean {
  return field.needsDuration || Number.isFinite(field.maxBytes);
}

/** The distinct media locations that must be measured to price these tasks. */
export function mediaNeeds(tasks: Iterable<CheckedTask>): MediaNeed[] {
  const seen = new Map<string, MediaNeed>();
  for (const task of tasks) addMediaNeeds(task, seen);
  return [...seen.values()];
}

/** Adds one task's media to measure to `seen` (keyed by location). */
export function addMediaNeeds(task: CheckedTask, seen: Map<string, MediaNeed>): void {
  for (const field of task.entry.mediaFields) {
    const value = task.body[field.field];
    if (measurable(field) && typeof value === 'string' && !holdsReference(value) && !seen.has(value)) {
      seen.set(value, { location: value, kind: field.kind });
    }
  }
}

/** One task priced, or the problems that stop it. */
export type PricedTask = { ok: true; task: PlannedTask } | { ok: false; problems: ManifestProblem[] };

/**
 * Prices tasks one at a time from their bodies and the measured lengths (absent map = nothing measured),
 * checking the rules that depend on measured lengths. Nothing is kept between tasks, so a caller can
 * stream 100,000 of them into the store without holding them all.
 */
export function* pricedTasks(
  tasks: Iterable<CheckedTask>,
  measured: ReadonlyMap<string, ProbeResult> | undefined,
  prices: PriceTable,
  callbackUrl?: string,
  chains?: ChainPlan,
): Generator<PricedTask> {
  for (const task of tasks) {
    const media: MediaDurations = {};
    const mediaNotes: string[] = [];
    const sizeIssues: RequestIssue[] = [];
    const upstreamNotes: string[] = [];
    for (const field of task.entry.mediaFields) {
      const value = task.body[field.field];
      if (!measurable(field) || typeof value !== 'string') continue;
      if (holdsReference(value)) {
        // An upstream's result: its length is what the upstream's request decides, or known when it is done.
        const upstream = field.needsDuration ? chains?.lengthOf(task.spec, value) : undefined;
        if (upstream?.seconds !== undefined) media[field.field] = upstream.seconds;
        if (upstream) upstreamNotes.push(upstream.note);
        continue;
      }
      const result = measured?.get(value);
      // A local file that is missing, outside the folder or of the wrong kind is the manifest's mistake.
      if (result && !result.ok && isLocalFile(value)) {
        sizeIssues.push({ path: field.field, message: result.reason });
        continue;
      }
      if (result?.ok && result.bytes !== undefined && result.bytes > field.maxBytes) {
        sizeIssues.push({
          path: field.field,
          message: `the file is ${size(result.bytes, field.maxBytes)}; the limit is ${megabytes(field.maxBytes)} MB`,
        });
      }
      if (!field.needsDuration) {
        // A field measured for its size only (an image): nothing to price from it.
        if (result && !result.ok) mediaNotes.push(`${field.field}: ${result.reason}`);
        continue;
      }
      if (result?.ok) media[field.field] = result.seconds;
      else if (result) mediaNotes.push(`${field.field}: ${result.reason}`);
      else mediaNotes.push(`${field.field}: not measured`);
    }
    const ruleIssues = task.entry.checkMedia(task.body, media);
    if (sizeIssues.length > 0 || ruleIssues.length > 0) {
      yield {
        ok: false,
        problems: [...sizeIssues, ...ruleIssues].map((issue) =>
          problemFromIssue(task.spec, issue.path, issue.message),
        ),
      };
      continue;
    }
    const priceOf = (body: RequestBody) => task.entry.estimate(body, media, prices, task.spec.mediaSeconds);
    // A priced field filled in from an upstream (a speech's text from a song's lyrics) is priced over
    // every value it may take, not from the placeholder's own characters.
    const estimate =
      (task.spec.after === undefined
        ? undefined
        : chains?.priceOverReferences(
            task,
            priceOf,
            JSON.stringify([task.entry.model, task.body, media, task.spec.mediaSeconds ?? null]),
          )) ?? priceOf(task.body);
    if (upstreamNotes.length > 0) estimate.basis = `${estimate.basis}; ${upstreamNotes.join('; ')}`;
    yield {
      ok: true,
      task: {
        spec: task.spec,
        entry: task.entry,
        body: task.body,
        wire: toWireBody(task.entry, task.body, callbackUrl),
        media,
        mediaNotes,
        estimate,
      },
    };
  }
}

/** Every task priced, or every problem found (the same one in many tasks folded). */
export function priceTasks(
  tasks: readonly CheckedTask[],
  measured: ReadonlyMap<string, ProbeResult> | undefined,
  prices: PriceTable,
  callbackUrl?: string,
  chains?: ChainPlan,
): { tasks: PlannedTask[]; problems: ManifestProblem[] } {
  const planned: PlannedTask[] = [];
  const problems = new ProblemFold();
  for (const priced of pricedTasks(tasks, measured, prices, callbackUrl, chains)) {
    if (priced.ok) planned.push(priced.task);
    else for (const problem of priced.problems) problems.add(problem);
  }
  return { tasks: planned, problems: problems.lines() };
}

// The spec's sizes are decimal megabytes (its own "wav over about 1 min 50 s" remark matches 10^6 bytes).
function megabytes(bytes: number): string {
  return String(Math.round((bytes / 1e6) * 10) / 10);
}

/** In MB, unless that rounds to the limit itself ("300 MB; the limit is 300 MB" would puzzle anyone). */
function size(bytes: number, limit: number): string {
  return megabytes(bytes) === megabytes(limit)
    ? `${bytes.toLocaleString('en-US')} bytes`
    : `${megabytes(bytes)} MB`;
}

// Kept importable from here for older callers; the rule lives in src/util/money.ts.
export { tokensToUsd } from '../util/money.js';

export function planTotals(tasks: Iterable<PlannedTask>): PlanTotals {
  const totals = new TotalsSum();
  for (const task of tasks) totals.add(task);
  return totals.result();
}

/** Plan totals summed one task at a time, for callers that hand tasks over as they come. */
export class TotalsSum {
  readonly #byModel: Record<string, ModelTotals> = {};
  #tokens = 0;
  #min = 0;
  #max = 0;
  #assumedPrice = false;
  #count = 0;

  add(task: Pick<PlannedTask, 'estimate' | 'entry'>): void {
    this.#count++;
    const e = task.estimate;
    const m = this.#byModel[task.entry.model] ?? { tasks: 0, tokens: 0, min: 0, max: 0, usd: 0 };
    this.#byModel[task.entry.model] = m;
    m.tasks += 1;
    m.tokens = roundTokens(m.tokens + e.tokens);
    m.min = roundTokens(m.min + e.min);
    m.max = roundTokens(m.max + e.max);
    m.usd = tokensToUsd(m.tokens);
    this.#tokens = roundTokens(this.#tokens + e.tokens);
    this.#min = roundTokens(this.#min + e.min);
    this.#max = roundTokens(this.#max + e.max);
    this.#assumedPrice ||= e.assumedPrice;
  }

  result(): PlanTotals {
    const byModel = this.#byModel;
    const tokens = this.#tokens;
    return {
      tasks: this.#count,
      tokens,
      min: this.#min,
      max: this.#max,
      usd: tokensToUsd(tokens),
      byModel,
      assumedPrice: this.#assumedPrice,
    };
  }
}
