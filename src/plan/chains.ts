// Chains in planning (issue 17): a task with `after` is checked with each `{{after…}}` standing for a
// valid value of its kind, its upstreams must exist and make what it asks for, no task may wait for
// itself through others, and a length the upstream's request decides prices the downstream exactly.
// Pure: the caller hands over every checked task, then asks.

import { checkRequest } from '../catalog/index.js';
import { outputProblem, outputSeconds } from '../catalog/outputs.js';
import type { CatalogEntry, MediaDurations, RequestBody } from '../catalog/types.js';
import {
  fillReferences,
  type Output,
  parseReference,
  referencesIn,
  referenceText,
  SINGLE,
} from '../manifest/after.js';
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
      return `https://after.invalid/${tag}.png`;
    case 'video':
      return `https://after.invalid/${tag}.mp4`;
    case 'audio':
      return `https://after.invalid/${tag}.mp3`;
    case 'file':
      return `https://after.invalid/${tag}.bin`;
    case 'song':
      return output.field === 'audio_duration' ? NUMBER_STAND_IN + i : tag;
    default:
      return tag;
  }
}

/**
 * The task's request checked against its model's rules with every reference standing for a valid value
 * of its kind; the body comes back with the references as written, to be filled in at submission.
 */
export function checkChained(
  spec: TaskSpec,
): { ok: true; body: RequestBody } | { ok: false; issues: Array<{ path: string; message: string }> } {
  const names = spec.after?.some((u) => u.name !== SINGLE) ? spec.after.map((u) => u.name) : undefined;
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
  const result = checkRequest(spec.model, input);
  if (!result.ok) return result;
  return { ok: true, body: swapBack(result.body, back) as RequestBody };
}

function swapBack(value: unknown, back: ReadonlyMap<string | number, string>): unknown {
  if (typeof value === 'number') return back.get(value) ?? value;
  if (typeof value === 'string') {
    const whole = back.get(value);
    if (whole !== undefined) return whole;
    if (!value.includes('mb-after-')) return value;
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

/** Every task of a chained manifest, to check the chains and to price what depends on an upstream. */
export class ChainPlan {
  readonly #known = new Map<string, Known>();
  /** Every task id, including tasks with problems of their own (no cascade of "no such task"). */
  readonly #ids = new Set<string>();
  readonly #chained: TaskSpec[] = [];
  #measured: ReadonlyMap<string, ProbeResult> | undefined;

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

  /** Missing upstreams, references to what an upstream does not make, and cycles; located. */
  problems(): ManifestProblem[] {
    const problems: ManifestProblem[] = [];
    const missing = new Map<string, { problem: ManifestProblem; more: number }>();
    for (const spec of this.#chained) {
      for (const up of spec.after ?? []) {
        const path = up.name === SINGLE ? 'after' : `after.${up.name}`;
        if (up.taskId === spec.id) {
          problems.push({
            pos: up.pos,
            taskId: spec.id,
            path,
            message: 'names the task itself; a task cannot wait for its own result',
          });
        } else if (!this.#ids.has(up.taskId)) {
          // One line per place in the manifest: a template wrong for 10,000 rows is one mistake.
          const site = `${up.pos.file}:${up.pos.line}:${up.pos.col}`;
          const seen = missing.get(site);
          if (seen) seen.more++;
          else {
            const problem: ManifestProblem = {
              pos: up.pos,
              taskId: spec.id,
              path,
              message: `names task ${JSON.stringify(up.taskId)}, which this manifest does not make (after expansion); check the id template`,
            };
            missing.set(site, { problem, more: 0 });
            problems.push(problem);
          }
        }
      }
      for (const { reference, pos, path } of spec.references ?? []) {
        const up = spec.after?.find((u) => u.name === reference.name);
        const known = up === undefined ? undefined : this.#known.get(up.taskId);
        if (up === undefined || known === undefined) continue;
        const why = outputProblem(known.entry, reference.output);
        if (why !== undefined) {
          problems.push({
            pos,
            taskId: spec.id,
            path,
            message: `{{${reference.path}}} cannot be filled in: ${up.taskId} is ${why}`,
          });
        }
      }
    }
    for (const { problem, more } of missing.values()) {
      if (more > 0) problem.message += ` (and ${more} more task${more === 1 ? '' : 's'})`;
    }
    problems.push(...this.#cycles());
    return problems;
  }

  #cycles(): ManifestProblem[] {
    const bySpec = new Map(this.#chained.map((spec) => [spec.id, spec]));
    const state = new Map<string, 'open' | 'closed'>();
    const problems: ManifestProblem[] = [];
    const visit = (id: string, trail: string[]): void => {
      const spec = bySpec.get(id);
      if (spec === undefined) return;
      state.set(id, 'open');
      for (const up of spec.after ?? []) {
        if (up.taskId === id) continue;
        const seen = state.get(up.taskId);
        if (seen === 'open') {
          const loop = [...trail.slice(trail.indexOf(up.taskId)), id, up.taskId];
          problems.push({
            pos: up.pos,
            taskId: id,
            path: up.name === SINGLE ? 'after' : `after.${up.name}`,
            message: `makes a cycle: ${loop.join(' → ')}; a task cannot wait for a task that waits for it`,
          });
        } else if (seen === undefined) {
          visit(up.taskId, [...trail, id]);
        }
      }
      state.set(id, 'closed');
    };
    for (const spec of this.#chained) if (!state.has(spec.id)) visit(spec.id, []);
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
