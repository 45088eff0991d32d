// Renders each prepared declaration into task specs, one per matrix combination × row × copy, and
// refuses duplicate ids naming both sources.

import { parseReference, referenceText } from './after.js';
import type { Declaration, ExpandContext, Origin } from './declaration.js';
import { combos, describeCombo } from './matrix.js';
import { FIRST_IDS } from './problems.js';
import { lookupIn, type Scope } from './scope.js';
import {
  type CompiledValue,
  compileValue,
  type Lookup,
  type Placeholder,
  type RenderError,
  renderValue,
} from './template.js';
import type { ManifestProblem, SourcePos, TaskSpec, Upstream } from './types.js';
import { describeValue, isPlainObject, type PlainObject, setOwn } from './values.js';

const NO_ROWS: undefined[] = [undefined];

/** In `Report.broken`: the input as a whole failed to render, so no field of it can be checked. */
const WHOLE = '';

/** What one task's rendering reported (see Expander's #reporter). */
interface Report {
  errors: number;
  failed: boolean;
  broken: Set<string>;
  onError: RenderError;
  invalid: (field: string, message: string) => void;
}

/**
 * The top-level request field a failed template's source is in (`tasks.0.input.prompt.1` → `prompt`,
 * `defaults.<model>.prompt` → `prompt`), WHOLE for the input itself, or undefined outside the request.
 */
function inputField(base: string, source: string): string | undefined {
  if (source === `${base}.input`) return WHOLE;
  const rest = source.startsWith(`${base}.input.`)
    ? source.slice(base.length + 7)
    : source.startsWith('defaults.')
      ? source.split('.').slice(2).join('.')
      : undefined;
  if (rest === undefined) return undefined;
  return rest.split('.')[0] || WHOLE;
}

/** One combination of one declaration: its tasks follow one another from `start`, rows × copies. */
interface Span {
  start: number;
  n: number;
  combo: PlainObject;
  rows: boolean;
  repeat: number;
}

/** Expands prepared declarations; holds what must be shared between tasks (locators, compiled defaults). */
export class Expander {
  #ctx: ExpandContext;
  /**
   * Each id's first task, as its place in the expansion: a number, not an Origin, so that a million ids
   * cost a map of small integers; the Origin is worked out again from `#spans` for a duplicate.
   */
  #firsts = new Map<string, number>();
  /** Where each combination of each declaration starts in the expansion, in order. */
  #spans: Span[] = [];
  #seq = 0;
  /** Duplicate ids by the pair of declarations that make them: one line each, counting its ids. */
  #duplicates = new Map<string, { problem: ManifestProblem; ids: { count: number; first: string[] } }>();
  #defaults = new Map<string, CompiledValue | undefined>();
  #locators = new Map<string, (fieldPath: string) => SourcePos>();
  /** Rendered file names (lower case: file systems that ignore case would merge them) → task id. */
  #fileNames = new Map<string, string>();

  /** An expansion already known to be free of duplicate ids and file names: they are not tracked again. */
  readonly #proven: boolean;

  constructor(ctx: ExpandContext, proven = false) {
    this.#ctx = ctx;
    this.#proven = proven;
  }

  /** The declaration's tasks one at a time, so that a caller need not hold a million of them. */
  *expand(declaration: Declaration): Generator<TaskSpec> {
    const comboList = declaration.comboList ?? combos(declaration.plan);
    for (const [c, combo] of comboList.entries()) {
      const listed = declaration.rows(c);
      const rows = listed ?? NO_ROWS;
      if (!this.#proven) {
        this.#spans.push({
          start: this.#seq,
          n: declaration.n,
          combo,
          rows: listed !== undefined,
          repeat: declaration.repeat,
        });
      }
      for (const [r, row] of rows.entries()) {
        for (let copy = 1; copy <= declaration.repeat; copy++) {
          const index = declaration.repeat > 1 ? copy : row ? r + 1 : 1;
          const task = this.#one(declaration, combo, row, index, this.#seq++);
          if (task) yield task;
        }
      }
    }
  }

  // One task from one combination, row and copy: every field rendered in order, each problem located. A
  // field that fails (a template naming nothing) does not hide the others: they are rendered and checked
  // too, and the task's request is checked (ctx.checkPartial) in every field the failure leaves alone.
  #one(
    declaration: Declaration,
    combo: PlainObject,
    row: PlainObject | undefined,
    index: number,
    seq: number,
  ): TaskSpec | undefined {
    const ctx = this.#ctx;
    const builtins: Scope['builtins'] = { ...ctx.builtins, index };
    if (row) builtins.row = row;
    const lookup = lookupIn({ vars: ctx.vars, builtins, combo });
    let taskId: string | undefined;
    const report = this.#reporter(declaration, () => taskId);
    const { onError, invalid } = report;

    let mark = report.errors;
    const id = renderValue(declaration.id, lookup, onError);
    if (typeof id === 'number' || (typeof id === 'string' && id !== '')) taskId = String(id);
    else if (report.errors === mark) invalid('id', `must render to text, got ${describeValue(id)}`);

    mark = report.errors;
    const model = renderValue(declaration.model, lookup, onError);
    const modelOk = typeof model === 'string' && model !== '';
    if (!modelOk && report.errors === mark) {
      invalid('model', `must render to a model id, got ${describeValue(model)}`);
    }

    const inputLookup = withReferences(lookup, declaration.after?.names, declaration.after !== undefined);
    mark = report.errors;
    let input = renderValue(declaration.input, inputLookup, onError);
    if (input === null || input === undefined) input = report.errors === mark ? {} : input;
    if (!isPlainObject(input) && report.errors === mark) {
      invalid('input', `must render to a mapping of request fields, got ${describeValue(input)}`);
    }

    let mediaSeconds: unknown;
    if (declaration.mediaSeconds) {
      mark = report.errors;
      mediaSeconds = renderValue(declaration.mediaSeconds, lookup, onError);
      const ok = typeof mediaSeconds === 'number' && mediaSeconds > 0 && Number.isFinite(mediaSeconds);
      if (!ok && report.errors === mark) {
        invalid('media_seconds', `must be a number > 0, got ${describeValue(mediaSeconds)}`);
      }
    }

    if (taskId === undefined || !modelOk || !isPlainObject(input)) {
      this.#unexpanded(taskId);
      return undefined;
    }
    const upstreams = this.#upstreams(declaration, lookup, report);
    const task: TaskSpec = {
      id: taskId,
      model,
      input: this.#withDefaults(model, input, inputLookup, onError),
      pos: declaration.pos,
      locate: this.#locator(declaration, model),
    };
    if (typeof mediaSeconds === 'number') task.mediaSeconds = mediaSeconds;
    if (declaration.after) {
      task.after = upstreams;
      task.references = declaration.after.references;
    }
    if (declaration.retries !== undefined) task.retries = declaration.retries;
    if (declaration.review !== undefined) task.review = declaration.review;
    if (declaration.fileName !== undefined) {
      const name = this.#fileName(declaration.fileName, taskId, lookup, report);
      if (name !== undefined) task.fileName = name;
    }
    const duplicate = this.#isDuplicate(taskId, seq, declaration);
    if (!report.failed && !duplicate) return task;
    // Not a task of the run, but its request is still checked; a duplicate's id is known, its upstreams
    // see the first task of that id.
    if (report.failed) this.#unexpanded(taskId);
    if (!report.broken.has(WHOLE)) {
      for (const problem of ctx.checkPartial?.(task, report.broken) ?? []) ctx.problems.add(problem);
    }
    return undefined;
  }

  /**
   * Reports the problems of one task, located (by its id once known): `errors` counts them, `broken` holds
   * the top-level input fields whose template failed (WHOLE for the input itself).
   */
  #reporter(declaration: Declaration, taskIdNow: () => string | undefined): Report {
    const ctx = this.#ctx;
    const report: Report = {
      errors: 0,
      failed: false,
      broken: new Set<string>(),
      onError: (source: string, placeholder: Placeholder, message: string) => {
        report.failed = true;
        report.errors++;
        const field = inputField(declaration.base, source);
        if (field !== undefined) report.broken.add(field);
        const taskId = taskIdNow();
        const site = `${source}\0${placeholder.raw}\0${placeholder.occurrence}`;
        const problem: ManifestProblem = {
          pos: ctx.index.inScalar(source, placeholder.raw, placeholder.occurrence),
          path: this.#fieldPath(declaration, source, taskId),
          message,
        };
        if (taskId !== undefined) problem.taskId = taskId;
        ctx.problems.addOnce(site, problem);
      },
      invalid: (field: string, message: string) => {
        report.failed = true;
        report.errors++;
        const taskId = taskIdNow();
        const source = `${declaration.base}.${field}`;
        this.#problem(source, taskId === undefined ? source : field, taskId, message);
      },
    };
    return report;
  }

  /** A problem of a task's own field (not a template's), folded with the same one in other tasks. */
  #problem(source: string, path: string, taskId: string | undefined, message: string): void {
    const problem: ManifestProblem = { pos: this.#ctx.index.at(source), path, message };
    if (taskId !== undefined) problem.taskId = taskId;
    this.#ctx.problems.add(problem);
  }

  /** `after`'s task ids rendered; one that does not render to an id is reported. */
  #upstreams(declaration: Declaration, lookup: Lookup, report: Report): Upstream[] {
    const upstreams: Upstream[] = [];
    for (const { name, value, source } of declaration.after?.values ?? []) {
      const mark = report.errors;
      const rendered = renderValue(value, lookup, report.onError);
      if (typeof rendered === 'number' || (typeof rendered === 'string' && rendered !== '')) {
        upstreams.push({ name, taskId: String(rendered), pos: this.#ctx.index.at(source) });
      } else if (report.errors === mark) {
        report.invalid(
          source.slice(declaration.base.length + 1),
          `must render to a task id, got ${describeValue(rendered)}`,
        );
      }
    }
    return upstreams;
  }

  /**
   * The task's `file_name` rendered (with `{{id}}`) and checked: a valid name, different from every other
   * task's (letter case aside). Undefined when it has a problem, which is reported (and fails the task).
   */
  #fileName(
    fileName: NonNullable<Declaration['fileName']>,
    taskId: string,
    lookup: Lookup,
    report: Report,
  ): string | undefined {
    const withId: Lookup = (path) =>
      path.length === 1 && path[0] === 'id' ? { ok: true, value: taskId } : lookup(path);
    const mark = report.errors;
    const name = renderValue(fileName.value, withId, report.onError);
    if (report.errors > mark) return undefined;
    const { source } = fileName;
    const problem =
      typeof name === 'string' || typeof name === 'number'
        ? fileNameProblem(String(name))
        : 'must render to text';
    if (problem) {
      this.#fileNameProblem(source, taskId, `${problem}, got ${describeValue(name)}`, report);
      return undefined;
    }
    const key = String(name).toLowerCase();
    const holder = this.#proven ? undefined : this.#fileNames.get(key);
    if (holder !== undefined && holder !== taskId) {
      this.#fileNameProblem(
        source,
        taskId,
        `renders to ${JSON.stringify(String(name))}, which task ${holder} has too: file names must differ (letter case aside)`,
        report,
      );
      return undefined;
    }
    if (!this.#proven) this.#fileNames.set(key, taskId);
    return String(name);
  }

  #unexpanded(taskId: string | undefined): void {
    const unexpanded = this.#ctx.unexpanded;
    if (unexpanded === undefined) return;
    if (taskId === undefined) unexpanded.unknown = true;
    else unexpanded.ids.add(taskId);
  }

  #fileNameProblem(source: string, taskId: string, message: string, report: Report): void {
    report.failed = true;
    report.errors++;
    this.#problem(source, 'file_name', taskId, message);
  }

  /** `defaults` of the model under the task's input: the task's own fields win, field by field. */
  #withDefaults(
    model: string,
    input: PlainObject,
    lookup: ReturnType<typeof lookupIn>,
    onError: (source: string, placeholder: Placeholder, message: string) => void,
  ): PlainObject {
    const compiled = this.#compiledDefaults(model);
    // Always a fresh top-level object: tasks share nested literal values, never their input itself.
    const merged: PlainObject = {};
    if (!compiled) {
      for (const key of Object.keys(input)) setOwn(merged, key, input[key]);
      return merged;
    }
    const entries: Array<[string, CompiledValue]> =
      compiled.kind === 'object'
        ? compiled.entries
        : compiled.kind === 'literal' && isPlainObject(compiled.value)
          ? Object.keys(compiled.value).map((key) => [
              key,
              { kind: 'literal', value: (compiled.value as PlainObject)[key] },
            ])
          : [];
    for (const [key, value] of entries) {
      if (!Object.hasOwn(input, key)) setOwn(merged, key, renderValue(value, lookup, onError));
    }
    for (const key of Object.keys(input)) setOwn(merged, key, input[key]);
    return merged;
  }

  #compiledDefaults(model: string): CompiledValue | undefined {
    if (this.#defaults.has(model)) return this.#defaults.get(model);
    const raw = Object.hasOwn(this.#ctx.defaults, model) ? this.#ctx.defaults[model] : undefined;
    // Compile errors in defaults were reported once by checkDefaults(); here they only stay literal.
    const compiled = isPlainObject(raw) ? compileValue(raw, `defaults.${model}`, []) : undefined;
    this.#defaults.set(model, compiled);
    return compiled;
  }

  #fieldPath(declaration: Declaration, source: string, taskId: string | undefined): string {
    if (source.startsWith('defaults.')) {
      const rest = source.split('.').slice(2).join('.');
      return rest === '' ? 'input' : `input.${rest}`;
    }
    return taskId === undefined ? source : source.slice(declaration.base.length + 1);
  }

  #locator(declaration: Declaration, model: string): (fieldPath: string) => SourcePos {
    const key = `${declaration.n}\0${model}`;
    const known = this.#locators.get(key);
    if (known) return known;
    const { index } = this.#ctx;
    const inputPath = `${declaration.base}.input`;
    const defaultsPath = `defaults.${model}`;
    const locate = (fieldPath: string): SourcePos => {
      const top = fieldPath.split('.')[0] ?? '';
      if (top !== '' && index.has(`${inputPath}.${top}`)) return index.at(`${inputPath}.${fieldPath}`);
      if (top !== '' && Object.hasOwn(this.#ctx.defaults, model) && index.has(`${defaultsPath}.${top}`)) {
        return index.at(`${defaultsPath}.${fieldPath}`);
      }
      return index.has(inputPath) ? index.at(inputPath) : declaration.pos;
    };
    this.#locators.set(key, locate);
    return locate;
  }

  #isDuplicate(id: string, seq: number, declaration: Declaration): boolean {
    if (this.#proven) return false;
    const firstSeq = this.#firsts.get(id);
    if (firstSeq === undefined) {
      this.#firsts.set(id, seq);
      return false;
    }
    const first = this.#originAt(firstSeq);
    const origin = this.#originAt(seq);
    const pair = `${first.n}\0${origin.n}`;
    const seen = this.#duplicates.get(pair);
    if (seen) {
      seen.ids.count++;
      if (seen.ids.first.length < FIRST_IDS && !seen.ids.first.includes(id)) seen.ids.first.push(id);
      return true;
    }
    const firstPos = this.#ctx.index.at(`tasks.${first.n}`);
    const where = (o: Origin, pos: SourcePos) => {
      const details = describeOrigin(o);
      return `tasks.${o.n} at ${pos.file}:${pos.line}:${pos.col}${details ? ` (${details})` : ''}`;
    };
    this.#duplicates.set(pair, {
      problem: {
        pos: declaration.pos,
        taskId: id,
        path: 'id',
        message: `duplicate task id, made by ${where(first, firstPos)} and by ${where(origin, declaration.pos)}; make ids unique, e.g. with a matrix name, {{row.<field>}} or {{index}}`,
      },
      ids: { count: 1, first: [id] },
    });
    return true;
  }

  /** The combination, row and copy of the task at `seq` in the expansion. */
  #originAt(seq: number): Origin {
    let lo = 0;
    let hi = this.#spans.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((this.#spans[mid] as Span).start <= seq) lo = mid;
      else hi = mid - 1;
    }
    const span = this.#spans[lo] as Span;
    const offset = seq - span.start;
    return {
      n: span.n,
      combo: span.combo,
      row: span.rows ? Math.floor(offset / span.repeat) + 1 : undefined,
      copy: span.repeat > 1 ? (offset % span.repeat) + 1 : undefined,
    };
  }

  finish(): void {
    for (const { problem, ids } of this.#duplicates.values()) {
      if (ids.count > 1) problem.tasks = { count: ids.count, first: ids.first };
      this.#ctx.problems.add(problem);
    }
  }
}

/**
 * The lookup of a task's input: `{{after…}}` stays as written, to be filled in when the task is submitted
 * (the result does not exist yet); in a task without `after` it is a mistake.
 */
function withReferences(lookup: Lookup, names: readonly string[] | undefined, chained: boolean): Lookup {
  return (path) => {
    if (path[0] !== 'after') return lookup(path);
    if (!chained) {
      return {
        ok: false,
        message: `"${path.join('.')}" takes the result of an earlier task, which this task does not name: add after: "<task id>" to it`,
      };
    }
    const parsed = parseReference(path, names);
    return parsed.ok ? { ok: true, value: referenceText(parsed.reference.path) } : parsed;
  };
}

function describeOrigin(origin: Origin): string {
  const parts: string[] = [];
  const combo = describeCombo(origin.combo);
  if (combo) parts.push(combo);
  if (origin.row !== undefined) parts.push(`row ${origin.row}`);
  if (origin.copy !== undefined) parts.push(`copy ${origin.copy}`);
  return parts.join(', ');
}

const RESERVED = /^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])$/i;

/**
 * Why `name` cannot be a result file's name in the run's folder, or undefined when it can: one plain
 * segment (no folders, no `..`), no control characters, not hidden, not a Windows device name, short.
 */
export function fileNameProblem(name: string): string | undefined {
  if (name.trim() === '') return 'must not be empty';
  if (/[/\\]/.test(name)) return 'must be one file name, without / or \\';
  if ([...name].some((c) => c.charCodeAt(0) < 0x20 || c === '\u007f') || /[<>:"|?*]/.test(name))
    return 'must not hold control characters or any of < > : " | ? *';
  if (name.startsWith('.') || name.startsWith('-')) return 'must not start with . or -';
  if (name.endsWith('.') || name.endsWith(' ')) return 'must not end with a dot or a space';
  if (RESERVED.test(name.split('.')[0] ?? '')) return 'must not be a Windows device name (CON, NUL, COM1, …)';
  if ([...name].length > 120) return 'must be at most 120 characters';
  if (/^(report|index|job|sheet)$/i.test(name))
    return 'must not be the name of a file mediabatch writes (report, index)';
  return undefined;
}
