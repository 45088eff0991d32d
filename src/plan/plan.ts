// The pure core between a manifest and money: task specs -> checked request bodies -> prices.
// No I/O here; media lengths are measured by the caller and passed in.

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
import type { ManifestProblem, TaskSpec } from '../manifest/types.js';
import type { MediaKind, ProbeResult } from '../media/types.js';
import { roundTokens, tokensToUsd } from '../util/money.js';
import { collapseRepeats } from './repeats.js';

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

function problemFromIssue(spec: TaskSpec, path: string, message: string): ManifestProblem {
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
  const problems: ManifestProblem[] = [];
  for (const spec of tasks) {
    const result = checkRequest(spec.model, spec.input);
    if (!result.ok) {
      for (const issue of result.issues) problems.push(problemFromIssue(spec, issue.path, issue.message));
      continue;
    }
    // checkRequest only succeeds for a known model, so the entry exists.
    const entry = lookupEntry(spec.model);
    checked.push({ spec, entry, body: result.body });
  }
  return { tasks: checked, problems: collapseRepeats(problems) };
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
export function mediaNeeds(tasks: readonly CheckedTask[]): MediaNeed[] {
  const seen = new Map<string, MediaNeed>();
  for (const task of tasks) {
    for (const field of task.entry.mediaFields) {
      const value = task.body[field.field];
      if (measurable(field) && typeof value === 'string' && !seen.has(value)) {
        seen.set(value, { location: value, kind: field.kind });
      }
    }
  }
  return [...seen.values()];
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
): Generator<PricedTask> {
  for (const task of tasks) {
    const media: MediaDurations = {};
    const mediaNotes: string[] = [];
    const sizeIssues: RequestIssue[] = [];
    for (const field of task.entry.mediaFields) {
      const value = task.body[field.field];
      if (!measurable(field) || typeof value !== 'string') continue;
      const result = measured?.get(value);
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
    yield {
      ok: true,
      task: {
        spec: task.spec,
        entry: task.entry,
        body: task.body,
        wire: toWireBody(task.entry, task.body, callbackUrl),
        media,
        mediaNotes,
        estimate: task.entry.estimate(task.body, media, prices, task.spec.mediaSeconds),
      },
    };
  }
}

/** Every task priced, or every problem found (repeats collapsed). */
export function priceTasks(
  tasks: readonly CheckedTask[],
  measured: ReadonlyMap<string, ProbeResult> | undefined,
  prices: PriceTable,
  callbackUrl?: string,
): { tasks: PlannedTask[]; problems: ManifestProblem[] } {
  const planned: PlannedTask[] = [];
  const problems: ManifestProblem[] = [];
  for (const priced of pricedTasks(tasks, measured, prices, callbackUrl)) {
    if (priced.ok) planned.push(priced.task);
    else problems.push(...priced.problems);
  }
  return { tasks: planned, problems: collapseRepeats(problems) };
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
  const byModel: Record<string, ModelTotals> = {};
  let tokens = 0;
  let min = 0;
  let max = 0;
  let assumedPrice = false;
  let count = 0;
  for (const task of tasks) {
    count++;
    const e = task.estimate;
    const m = byModel[task.entry.model] ?? { tasks: 0, tokens: 0, min: 0, max: 0, usd: 0 };
    byModel[task.entry.model] = m;
    m.tasks += 1;
    m.tokens = roundTokens(m.tokens + e.tokens);
    m.min = roundTokens(m.min + e.min);
    m.max = roundTokens(m.max + e.max);
    m.usd = tokensToUsd(m.tokens);
    tokens = roundTokens(tokens + e.tokens);
    min = roundTokens(min + e.min);
    max = roundTokens(max + e.max);
    assumedPrice ||= e.assumedPrice;
  }
  return { tasks: count, tokens, min, max, usd: tokensToUsd(tokens), byModel, assumedPrice };
}
