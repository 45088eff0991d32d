// Chains in planning: a task with `after` is checked with each `{{after…}}` standing for a
// valid value of its kind, its upstreams must exist and make what it asks for, no task may wait for
// itself through others, and a length the upstream's request decides prices the downstream exactly.
// Pure: the caller hands over every checked task, then asks.

import { checkRequest, findEntry } from '../catalog/index.js';
import { outputProblem, outputSeconds } from '../catalog/outputs.js';
import type { CatalogEntry, Estimate, MediaDurations, RequestBody } from '../catalog/types.js';
import {
  fillReferences,
  type Output,
  parseReference,
  type Reference,
  referencesIn,
  referenceText,
  SINGLE,
} from '../manifest/after.js';
import type { Unexpanded } from '../manifest/declaration.js';
import { ProblemFold } from '../manifest/problems.js';
import type { ManifestProblem, TaskSpec } from '../manifest/types.js';
import type { ProbeResult } from '../media/types.js';

/** A value that is (or holds) a `{{after…}}` reference: filled in at submission, never measured now. */
export function holdsReference(value: unknown): boolean {
  return typeof value === 'string' && value.includes('{{after');
}

const NUMBER_STAND_IN = 987_654.25;

/** A valid value of the reference's kind, unlike anything a user writes, so it can be swapped back. */
function standIn(output: Output, i: number): string | number {
  const tag = `mb-after-${i}-ref`;
  switch (output.kind) {
    case 'image':
      return `https://after.invalid/${i}.png`;
    case 'video':
      return `https://after.invalid/${i}.mp4`;
    case 'audio':
      return `https://after.invalid/${i}.mp3`;
    case 'file':
      return `https://after.invalid/${i}.bin`;
    case 'song':
      return output.field === 'audio_duration' ? NUMBER_STAND_IN + i : tag;
    default:
      return tag;
  }
}

/** References whose value is a link: the field must take a link, whatever else it takes. */
const LINK_KINDS: ReadonlySet<Output['kind']> = new Set(['image', 'video', 'audio', 'file']);

/**
 * Which of a field's sample values a lone reference of this kind may stand for: any value for a sheet
 * field (the sheet holds whatever the text model wrote), a number for a song's length, a string for ids
 * and song texts; none for a link (a link is a link).
 */
function fitsKind(output: Output, sample: unknown): boolean {
  switch (output.kind) {
    case 'sheet':
      return true;
    case 'song':
      return output.field === 'audio_duration' ? typeof sample === 'number' : typeof sample === 'string';
    case 'img_uuid':
      return typeof sample === 'string';
    default:
      return false;
  }
}

const WHOLE = /^\{\{\s*(after(?:\.[A-Za-z0-9_-]+)+)\s*\}\}$/;

/** The names of a mapping `after`, or undefined for a single upstream. */
function namesOf(spec: TaskSpec): string[] | undefined {
  return spec.after?.some((u) => u.name !== SINGLE) ? spec.after.map((u) => u.name) : undefined;
}

/** The reference a string is exactly (a lone placeholder), parsed; undefined otherwise. */
function loneReference(spec: TaskSpec, value: unknown): Reference | undefined {
  if (typeof value !== 'string') return undefined;
  const path = WHOLE.exec(value)?.[1];
  if (path === undefined) return undefined;
  const parsed = parseReference(path.split('.'), namesOf(spec));
  return parsed.ok ? parsed.reference : undefined;
}

/** Every combination of one value per field, at most `cap` of them (the first ones). */
export function combinations<T>(choices: ReadonlyArray<readonly T[]>, cap: number): T[][] {
  let combos: T[][] = [[]];
  for (const options of choices) {
    const next: T[][] = [];
    for (const combo of combos) {
      for (const option of options) {
        if (next.length >= cap) break;
        next.push([...combo, option]);
      }
    }
    combos = next;
  }
  return combos;
}

/** Checks tried per chained task at most: a few lone references with a handful of values each. */
const MAX_TRIES = 64;

/**
 * The task's request checked against its model's rules with every reference standing for a valid value
 * of its kind; the body comes back with the references as written, to be filled in at submission. A
 * field that is exactly one reference to a sheet field, a song's length or an id takes the field's own
 * valid values in turn (a sheet's `oc_ratio` for `ratio` is one of the ratios), until one passes.
 */
export function checkChained(
  spec: TaskSpec,
): { ok: true; body: RequestBody } | { ok: false; issues: Array<{ path: string; message: string }> } {
  const names = namesOf(spec);
  const back = new Map<string | number, string>();
  let i = 0;
  const byPath = new Map<string, string | number>();
  for (const path of referencesIn(spec.input)) {
    const parsed = parseReference(path.split('.'), names);
    if (!parsed.ok) continue;
    const value = standIn(parsed.reference.output, i++);
    byPath.set(path, value);
    back.set(value, referenceText(path));
  }
  const input = fillReferences(spec.input, (path) => byPath.get(path)) as RequestBody;

  // Fields that are one lone reference of a kind with no telling value: each tried with its samples.
  const entry = findEntry(spec.model);
  const tried: Array<{ key: string; field: string; text: string; options: unknown[] }> = [];
  if (entry?.fieldSamples !== undefined && isRecord(spec.input)) {
    for (const [key, value] of Object.entries(spec.input)) {
      const reference = loneReference(spec, value);
      if (reference === undefined || LINK_KINDS.has(reference.output.kind)) continue;
      const samples = entry.fieldSamples(key);
      const fitting = samples?.samples.filter((sample) => fitsKind(reference.output, sample)) ?? [];
      if (samples === undefined || fitting.length === 0) continue;
      tried.push({ key, field: samples.field, text: referenceText(reference.path), options: fitting });
    }
  }
  // The stand-in first (no sample: the field keeps it), then the samples.
  const choices = tried.map((t) => [undefined, ...t.options]);
  let first: Array<{ path: string; message: string }> | undefined;
  for (const combo of combinations(choices, MAX_TRIES)) {
    const attempt = { ...input };
    combo.forEach((sample, n) => {
      const t = tried[n];
      if (t !== undefined && sample !== undefined) attempt[t.key] = sample;
    });
    const result = checkRequest(spec.model, attempt);
    if (result.ok) {
      const body = swapBack(result.body, back) as RequestBody;
      combo.forEach((sample, n) => {
        const t = tried[n];
        if (t !== undefined && sample !== undefined) body[t.field] = t.text;
      });
      return { ok: true, body };
    }
    first ??= result.issues;
  }
  // The stand-ins are ours: a message names the reference the user wrote.
  const issues = (first ?? []).map((issue) => ({ ...issue, message: unStandIn(issue.message, back) }));
  return { ok: false, issues };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function unStandIn(message: string, back: ReadonlyMap<string | number, string>): string {
  let text = message;
  for (const [standin, reference] of back) {
    const shown = typeof standin === 'string' ? JSON.stringify(standin) : String(standin);
    text = text.split(shown).join(reference).split(String(standin)).join(reference);
  }
  return text;
}

function swapBack(value: unknown, back: ReadonlyMap<string | number, string>): unknown {
  if (typeof value === 'number') return back.get(value) ?? value;
  if (typeof value === 'string') {
    const whole = back.get(value);
    if (whole !== undefined) return whole;
    if (!value.includes('after.invalid/') && !value.includes('mb-after-')) return value;
    let text = value;
    for (const [standin, reference] of back)
      if (typeof standin === 'string') text = text.split(standin).join(reference);
    return text;
  }
  if (Array.isArray(value)) return value.map((item) => swapBack(item, back));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) out[key] = swapBack(item, back);
    return out;
  }
  return value;
}

interface Known {
  entry: CatalogEntry;
  body: RequestBody;
}

/** What a chained task's price and rules know of one media field that takes an upstream's result. */
export interface UpstreamLength {
  /** The length the upstream's request decides; undefined when only its result will tell. */
  seconds: number | undefined;
  /** For the estimate's basis: where the length comes from. */
  note: string;
}

interface PriceRange {
  low: Estimate;
  high: Estimate;
  /** The fields whose value changes the price. */
  priced: string[];
}

/** Every task of a chained manifest, to check the chains and to price what depends on an upstream. */
export class ChainPlan {
  readonly #known = new Map<string, Known>();
  /** Every task id, including tasks with problems of their own (no cascade of "no such task"). */
  readonly #ids = new Set<string>();
  readonly #chained: TaskSpec[] = [];
  #measured: ReadonlyMap<string, ProbeResult> | undefined;
  /** Price ranges over references already worked out, by the task's shape (see #rangeOver). */
  readonly #ranges = new Map<string, PriceRange | null>();

  /** A task that exists but did not pass its own checks. */
  note(spec: TaskSpec): void {
    this.#ids.add(spec.id);
  }

  add(task: { spec: TaskSpec; entry: CatalogEntry; body: RequestBody }): void {
    this.#ids.add(task.spec.id);
    this.#known.set(task.spec.id, { entry: task.entry, body: task.body });
    if (task.spec.after !== undefined) this.#chained.push(task.spec);
  }

  /** The lengths measured for the plan: an upstream's output may follow from its own inputs. */
  measured(measured: ReadonlyMap<string, ProbeResult> | undefined): void {
    this.#measured = measured;
  }

  /**
   * Missing upstreams, references to what an upstream does not make, and cycles; located. `unexpanded`:
   * tasks that did not expand (a problem of their own, already said): an upstream among them, or any
   * when some ids are not known, is not called missing (it is there; it is said if still missing once
   * they expand).
   */
  problems(unexpanded?: Unexpanded): ManifestProblem[] {
    const problems = new ProblemFold();
    for (const spec of this.#chained) {
      for (const up of spec.after ?? []) {
        const path = up.name === SINGLE ? 'after' : `after.${up.name}`;
        if (up.taskId === spec.id) {
          problems.add({
            pos: up.pos,
            taskId: spec.id,
            path,
            message: 'names the task itself; a task cannot wait for its own result',
          });
        } else if (
          !this.#ids.has(up.taskId) &&
          !unexpanded?.ids.has(up.taskId) &&
          unexpanded?.unknown !== true
        ) {
          // One line per place in the manifest, whichever id each task names: a template wrong for
          // 10,000 rows is one mistake (the line names the first task's).
          const message = `names task ${JSON.stringify(up.taskId)}, which this manifest does not make (after expansion); check the id template`;
          problems.add({ pos: up.pos, taskId: spec.id, path, message }, 'missing upstream');
        }
      }
      for (const { reference, pos, path } of spec.references ?? []) {
        const up = spec.after?.find((u) => u.name === reference.name);
        const known = up === undefined ? undefined : this.#known.get(up.taskId);
        if (up === undefined || known === undefined) continue;
        const why = outputProblem(known.entry, reference.output);
        if (why !== undefined) {
          problems.add({
            pos,
            taskId: spec.id,
            path,
            message: `{{${reference.path}}} cannot be filled in: ${up.taskId} is ${why}`,
          });
        }
      }
    }
    for (const problem of this.#cycles()) problems.add(problem);
    return problems.lines();
  }

  #cycles(): ManifestProblem[] {
    const bySpec = new Map(this.#chained.map((spec) => [spec.id, spec]));
    const state = new Map<string, 'open' | 'closed'>();
    const problems: ManifestProblem[] = [];
    // Depth first with a stack of our own: a chain of 100,000 tasks written downstream first would
    // overflow the call stack. `path` holds the open tasks, in order, for naming a cycle.
    for (const root of this.#chained) {
      if (state.has(root.id)) continue;
      const path: string[] = [];
      const stack: Array<{ spec: TaskSpec; next: number }> = [{ spec: root, next: 0 }];
      state.set(root.id, 'open');
      path.push(root.id);
      while (stack.length > 0) {
        const top = stack[stack.length - 1] as { spec: TaskSpec; next: number };
        const ups = top.spec.after ?? [];
        const up = ups[top.next++];
        if (up === undefined) {
          state.set(top.spec.id, 'closed');
          stack.pop();
          path.pop();
          continue;
        }
        const id = top.spec.id;
        if (up.taskId === id) continue;
        const seen = state.get(up.taskId);
        if (seen === 'open') {
          const loop = [...path.slice(path.indexOf(up.taskId)), up.taskId];
          problems.push({
            pos: up.pos,
            taskId: id,
            path: up.name === SINGLE ? 'after' : `after.${up.name}`,
            message: `makes a cycle: ${loop.join(' → ')}; a task cannot wait for a task that waits for it`,
          });
        } else if (seen === undefined) {
          const spec = bySpec.get(up.taskId);
          if (spec === undefined) continue;
          state.set(spec.id, 'open');
          path.push(spec.id);
          stack.push({ spec, next: 0 });
        }
      }
    }
    return problems;
  }

  /** For a media field of `spec` whose value is `{{after…}}`: the length its upstream's request decides. */
  lengthOf(spec: TaskSpec, value: string): UpstreamLength | undefined {
    const path = [...referencesIn(value)][0];
    if (path === undefined) return undefined;
    const names = spec.after?.some((u) => u.name !== SINGLE) ? spec.after.map((u) => u.name) : undefined;
    const parsed = parseReference(path.split('.'), names);
    if (!parsed.ok) return undefined;
    const up = spec.after?.find((u) => u.name === parsed.reference.name);
    const known = up === undefined ? undefined : this.#known.get(up.taskId);
    if (up === undefined || known === undefined) return undefined;
    const seconds = outputSeconds(known.entry, known.body, this.#mediaOf(known));
    const what = `${up.taskId} (${known.entry.model})`;
    return seconds === undefined
      ? { seconds, note: `length of {{${path}}} known once ${what} is done, priced exactly then` }
      : { seconds, note: `{{${path}}}: ${round(seconds)} s, as ${what} is asked to make` };
  }

  /**
   * The price of a chained task whose priced fields take an upstream's result (a speech's text from a
   * song's lyrics, a clip's duration from a character sheet): the lowest and highest price over the
   * values those fields may take, naming the upstream; undefined when no such field changes the price.
   * Links are not among them: their lengths are lengthOf's.
   */
  priceOverReferences(
    task: { spec: TaskSpec; entry: CatalogEntry; body: RequestBody },
    estimate: (body: RequestBody) => Estimate,
    cacheKey?: string,
  ): Estimate | undefined {
    const { spec, entry, body } = task;
    if (entry.fieldSamples === undefined) return undefined;
    const fields: Array<{ field: string; options: readonly unknown[]; text: string }> = [];
    for (const [field, value] of Object.entries(body)) {
      if (!holdsReference(value)) continue;
      const lone = loneReference(spec, value);
      if (lone !== undefined && LINK_KINDS.has(lone.output.kind)) continue;
      const samples = entry.fieldSamples(field)?.samples ?? [];
      // Within longer text the value is text; alone it is a value of its own kind.
      const options =
        lone === undefined
          ? samples.filter((sample) => typeof sample === 'string')
          : samples.filter((sample) => fitsKind(lone.output, sample));
      if (options.length > 0) fields.push({ field, options, text: String(value) });
    }
    if (fields.length === 0) return undefined;
    const found = this.#rangeOver(body, fields, estimate, cacheKey);
    if (found === undefined) return undefined;
    const { low, high } = found;
    const priced = fields.filter((f) => found.priced.includes(f.field));
    const upstreams = [...new Set(priced.flatMap((f) => [...referencesIn(f.text)]))]
      .map((path) => this.#upstreamOf(spec, path))
      .filter((what): what is string => what !== undefined);
    const which = priced
      .map((f) => `${f.field} takes ${[...referencesIn(f.text)].map(referenceText).join(', ')}`)
      .join('; ');
    const from = [...new Set(upstreams)].join(' and ');
    return {
      tokens: high.max,
      min: low.min,
      max: high.max,
      basis: `up to ${high.basis}; ${which}: known once ${from || 'its upstream'} is done, priced exactly then`,
      assumedPrice: low.assumedPrice || high.assumedPrice,
    };
  }

  /**
   * The cheapest and dearest prices over every combination of the fields' values, and the fields that
   * change it (two combinations that differ in that field alone differ in price); undefined when none
   * does. Tasks of one declaration share their shape: remembered by `cacheKey` (model, body, lengths),
   * so a million of them are priced over their values once.
   */
  #rangeOver(
    body: RequestBody,
    fields: ReadonlyArray<{ field: string; options: readonly unknown[] }>,
    estimate: (body: RequestBody) => Estimate,
    cacheKey: string | undefined,
  ): PriceRange | undefined {
    const cached = cacheKey === undefined ? undefined : this.#ranges.get(cacheKey);
    if (cached !== undefined) return cached ?? undefined;
    const cap = 256;
    const count = fields.reduce((n, f) => n * f.options.length, 1);
    // Too many combinations: the edges of each field still bound the price (prices grow with a length).
    const choices = fields.map((f) =>
      count <= cap ? f.options : [...new Set([f.options[0], f.options[f.options.length - 1]])],
    );
    let low: Estimate | undefined;
    let high: Estimate | undefined;
    // For each field: the other fields' values → the prices seen with them.
    const bySiblings = fields.map(() => new Map<string, Set<string>>());
    for (const combo of combinations(choices, cap)) {
      const variant = { ...body };
      combo.forEach((value, n) => {
        const f = fields[n];
        if (f !== undefined) variant[f.field] = value;
      });
      const priced = estimate(variant);
      if (low === undefined || priced.min < low.min) low = priced;
      if (high === undefined || priced.max > high.max) high = priced;
      const price = `${priced.min}/${priced.max}`;
      bySiblings.forEach((siblings, n) => {
        const key = JSON.stringify(combo.filter((_, i) => i !== n));
        const seen = siblings.get(key) ?? new Set<string>();
        seen.add(price);
        siblings.set(key, seen);
      });
    }
    const priced = fields
      .filter((_, n) => [...(bySiblings[n]?.values() ?? [])].some((prices) => prices.size > 1))
      .map((f) => f.field);
    const range =
      low === undefined || high === undefined || low.min === high.max || priced.length === 0
        ? undefined
        : { low, high, priced };
    if (cacheKey !== undefined) {
      if (this.#ranges.size >= 10_000) this.#ranges.clear();
      this.#ranges.set(cacheKey, range ?? null);
    }
    return range;
  }

  /** "song (song-replace-section)": the upstream a reference path takes its value from. */
  #upstreamOf(spec: TaskSpec, path: string): string | undefined {
    const parsed = parseReference(path.split('.'), namesOf(spec));
    if (!parsed.ok) return undefined;
    const up = spec.after?.find((u) => u.name === parsed.reference.name);
    if (up === undefined) return undefined;
    const known = this.#known.get(up.taskId);
    return known === undefined ? up.taskId : `${up.taskId} (${known.entry.model})`;
  }

  #mediaOf(known: Known): MediaDurations {
    const media: MediaDurations = {};
    for (const field of known.entry.mediaFields) {
      const value = known.body[field.field];
      const result = typeof value === 'string' ? this.#measured?.get(value) : undefined;
      if (result?.ok) media[field.field] = result.seconds;
    }
    return media;
  }
}

function round(seconds: number): number {
  return Math.round(seconds * 100) / 100;
}
