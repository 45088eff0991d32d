// Renders each prepared declaration into task specs, one per matrix combination × row × copy, and
// refuses duplicate ids naming both sources.

import { parseReference, referenceText } from './after.js';
import type { Declaration, ExpandContext, Origin } from './declaration.js';
import { combos, describeCombo } from './matrix.js';
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
import { describeValue, formatCount, isPlainObject, type PlainObject, setOwn } from './values.js';

const NO_ROWS: undefined[] = [undefined];

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
   * cost a map of small integers (issue 16); the Origin is worked out again from `#spans` for a duplicate.
   */
  #firsts = new Map<string, number>();
  /** Where each combination of each declaration starts in the expansion, in order. */
  #spans: Span[] = [];
  #seq = 0;
  #duplicates = new Map<string, { problem: ManifestProblem; more: number }>();
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

  // One task from one combination, row and copy: every field rendered in order, each problem located.
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

    const id = renderValue(declaration.id, lookup, onError);
    if (typeof id === 'number' || (typeof id === 'string' && id !== '')) taskId = String(id);
    else if (!report.failed) invalid('id', `must render to text, got ${describeValue(id)}`);

    const model = renderValue(declaration.model, lookup, onError);
    if (typeof model !== 'string' || model === '') {
      if (!report.failed) invalid('model', `must render to a model id, got ${describeValue(model)}`);
    }

    const inputLookup = withReferences(lookup, declaration.after?.names, declaration.after !== undefined);
    let input = renderValue(declaration.input, inputLookup, onError);
    if (input === null || input === undefined) input = {};
    if (!isPlainObject(input)) {
      invalid('input', `must render to a mapping of request fields, got ${describeValue(input)}`);
    }

    let mediaSeconds: unknown;
    if (declaration.mediaSeconds) {
      mediaSeconds = renderValue(declaration.mediaSeconds, lookup, onError);
      if (typeof mediaSeconds !== 'number' || !(mediaSeconds > 0) || !Number.isFinite(mediaSeconds)) {
        invalid('media_seconds', `must be a number > 0, got ${describeValue(mediaSeconds)}`);
      }
    }

    if (report.failed || taskId === undefined || typeof model !== 'string' || !isPlainObject(input)) {
      this.#unexpanded(taskId);
      return undefined;
    }
    const upstreams = this.#upstreams(declaration, lookup, onError, (field, message) => {
      if (!report.failed) invalid(field, message);
    });
    const merged = this.#withDefaults(model, input, inputLookup, onError);
    if (report.failed) {
      this.#unexpanded(taskId);
      return undefined;
    }

    const task: TaskSpec = {
      id: taskId,
      model,
      input: merged,
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
      const name = this.#fileName(declaration.fileName, taskId, lookup, onError, () => report.failed);
      if (name === undefined) {
        this.#unexpanded(taskId);
        return undefined;
      }
      task.fileName = name;
    }
    if (this.#isDuplicate(taskId, seq, declaration)) return undefined;
    return task;
  }

  /** Reports the problems of one task, located (by its id once known); `failed` says whether there was one. */
  #reporter(declaration: Declaration, taskIdNow: () => string | undefined) {
    const ctx = this.#ctx;
    const report = {
      failed: false,
      onError: (source: string, placeholder: Placeholder, message: string) => {
        report.failed = true;
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
        const taskId = taskIdNow();
        const source = `${declaration.base}.${field}`;
        const problem: ManifestProblem = {
          pos: ctx.index.at(source),
          path: taskId === undefined ? source : field,
          message,
        };
        if (taskId !== undefined) problem.taskId = taskId;
        ctx.problems.addOnce(`${source}\0${message.replace(/, got .*$/, '')}`, problem);
      },
    };
    return report;
  }

  /** `after`'s task ids rendered; one that does not render to an id is `invalid`. */
  #upstreams(
    declaration: Declaration,
    lookup: Lookup,
    onError: RenderError,
    invalid: (field: string, message: string) => void,
  ): Upstream[] {
    const upstreams: Upstream[] = [];
    for (const { name, value, source } of declaration.after?.values ?? []) {
      const rendered = renderValue(value, lookup, onError);
      if (typeof rendered === 'number' || (typeof rendered === 'string' && rendered !== '')) {
        upstreams.push({ name, taskId: String(rendered), pos: this.#ctx.index.at(source) });
      } else {
        invalid(
          source.slice(declaration.base.length + 1),
          `must render to a task id, got ${describeValue(rendered)}`,
        );
      }
    }
    return upstreams;
  }

  /**
   * The task's `file_name` rendered (with `{{id}}`) and checked: a valid name, different from every other
   * task's (letter case aside). Undefined when it has a problem, which is reported.
   */
  #fileName(
    fileName: NonNullable<Declaration['fileName']>,
    taskId: string,
    lookup: Lookup,
    onError: RenderError,
    failed: () => boolean,
  ): string | undefined {
    const withId: Lookup = (path) =>
      path.length === 1 && path[0] === 'id' ? { ok: true, value: taskId } : lookup(path);
    const name = renderValue(fileName.value, withId, onError);
    if (failed()) return undefined;
    const { source } = fileName;
    const problem =
      typeof name === 'string' || typeof name === 'number'
        ? fileNameProblem(String(name))
        : 'must render to text';
    if (problem) {
      this.#fileNameProblem(source, taskId, `${problem}, got ${describeValue(name)}`);
      return undefined;
    }
    const key = String(name).toLowerCase();
    const holder = this.#proven ? undefined : this.#fileNames.get(key);
    if (holder !== undefined && holder !== taskId) {
      this.#fileNameProblem(
        source,
        taskId,
        `renders to ${JSON.stringify(String(name))}, which task ${holder} has too: file names must differ (letter case aside)`,
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

  #fileNameProblem(source: string, taskId: string, message: string): void {
    this.#ctx.problems.addOnce(`${source}\0${message}`, {
      pos: this.#ctx.index.at(source),
      taskId,
      path: 'file_name',
      message,
    });
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
      seen.more++;
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
      more: 0,
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
    for (const { problem, more } of this.#duplicates.values()) {
      if (more > 0) problem.message += ` (and ${formatCount(more)} more duplicate ids between these tasks)`;
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
