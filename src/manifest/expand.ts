// Task declarations → task specs: matrix combinations × foreach rows × repeat copies, with templates
// rendered per task. The count is computed and checked against the limit before anything is expanded.

import { basename, extname, isAbsolute, join, resolve } from 'node:path';
import { parseReference, placeholdersOfAfter, SINGLE } from './after.js';
import type { Declaration, ExpandContext } from './declaration.js';
import { Expander } from './expander.js';
import { isGlob } from './files.js';
import { type RowsResult, readRows } from './foreach.js';
import { combos, countCombos, type MatrixPlan, matrixPlan, productSize } from './matrix.js';
import { BUILTIN_NAMES, lookupIn, type Scope } from './scope.js';
import { type CompiledValue, type CompileError, compileValue, renderValue } from './template.js';
import type { LocatedReference, ManifestProblem, SourcePos, TaskSpec } from './types.js';
import { describeValue, formatCount, isPlainObject, type PlainObject } from './values.js';

export type { ExpandContext, Unexpanded } from './declaration.js';

export async function expandTasks(
  rawTasks: unknown[],
  valid: (n: number) => boolean,
  ctx: ExpandContext,
): Promise<TaskSpec[]> {
  return [...expandDeclarations(await prepareDeclarations(rawTasks, valid, ctx), ctx)];
}

/**
 * Every task of the declarations, one at a time, in order; the expansion's problems (duplicate ids, a
 * template that fails for some row) go to `ctx.problems`, the duplicates once the last task is out.
 * Pure given the prepared declarations: a second expansion gives the same tasks.
 */
export function* expandDeclarations(
  declarations: readonly Declaration[],
  ctx: ExpandContext,
  proven = false,
): Generator<TaskSpec> {
  const expander = new Expander(ctx, proven);
  for (const declaration of declarations) yield* expander.expand(declaration);
  expander.finish();
}

/** The task declarations compiled, their data files read and the total count checked against the limit. */
export async function prepareDeclarations(
  rawTasks: unknown[],
  valid: (n: number) => boolean,
  ctx: ExpandContext,
): Promise<Declaration[]> {
  const declarations: Declaration[] = [];
  const rowCache = new Map<string, Promise<RowsResult>>();
  for (const [n, raw] of rawTasks.entries()) {
    if (!valid(n) || !isPlainObject(raw)) continue;
    const declaration = await prepare(n, raw, ctx, rowCache);
    if (declaration) declarations.push(declaration);
  }
  let total = 0;
  for (const declaration of declarations) {
    total += declaration.count;
    if (total <= ctx.maxTasks) continue;
    const made = `task "${declaration.idTemplate}" expands to ${formatCount(declaration.count)} tasks`;
    const factors = declaration.factors.length > 1 ? ` (${declaration.factors.join(' × ')})` : '';
    const brings = total === declaration.count ? '' : `, which brings the manifest to ${formatCount(total)}`;
    ctx.problems.add({
      pos: declaration.pos,
      path: declaration.base,
      message: `${made}${factors}${brings}, more than the limit of ${formatCount(ctx.maxTasks)} tasks per manifest; split it into several manifests`,
    });
    return [];
  }
  return declarations;
}

async function prepare(
  n: number,
  raw: PlainObject,
  ctx: ExpandContext,
  rowCache: Map<string, Promise<RowsResult>>,
): Promise<Declaration | undefined> {
  const base = `tasks.${n}`;
  const { index, problems } = ctx;
  const before = problems.size;
  const errors: CompileError[] = [];
  const compile = (key: string): CompiledValue | undefined =>
    raw[key] === undefined ? undefined : compileValue(raw[key], `${base}.${key}`, errors);
  const id = compile('id') ?? { kind: 'literal', value: '' };
  const model = compile('model') ?? { kind: 'literal', value: '' };
  const input = compile('input') ?? { kind: 'literal', value: {} };
  const mediaSeconds = compile('media_seconds');
  const fileName =
    raw.file_name !== undefined
      ? compile('file_name')
      : typeof ctx.fileName === 'string'
        ? compileValue(ctx.fileName, 'file_name', errors)
        : undefined;
  const foreach = compile('foreach');
  const after = prepareAfter(raw.after, base, input, ctx, errors);
  for (const error of errors) {
    problems.add({
      pos: index.inScalar(error.source, error.raw, error.occurrence),
      path: error.source,
      message: error.message,
    });
  }
  const plan = matrixPlan(isPlainObject(raw.matrix) ? raw.matrix : undefined);
  checkMatrixNames(plan, `${base}.matrix`, ctx);
  const size = productSize(plan);
  if (size > ctx.maxTasks) {
    problems.add({
      pos: index.at(`${base}.matrix`),
      path: `${base}.matrix`,
      message: `makes ${formatCount(size)} combinations before exclude, more than the limit of ${formatCount(ctx.maxTasks)} tasks per manifest; split the matrix across tasks or manifests`,
    });
  }
  if (problems.size > before) return undefined;

  const repeat = validRepeat(raw.repeat);
  const declaration: Declaration = {
    n,
    base,
    pos: index.at(base),
    idTemplate: typeof raw.id === 'string' ? raw.id : '',
    id,
    model,
    input,
    mediaSeconds,
    ...(fileName !== undefined && {
      fileName: { value: fileName, source: raw.file_name !== undefined ? `${base}.file_name` : 'file_name' },
    }),
    ...(typeof raw.retries === 'number' && { retries: raw.retries }),
    ...(typeof raw.review === 'boolean' && { review: raw.review }),
    ...(after !== undefined && { after }),
    plan,
    repeat,
    rows: () => undefined,
    comboList: undefined,
    count: 0,
    factors: [],
  };
  const comboCount = countCombos(plan);
  if (plan.keys.length > 0 || plan.include.length > 0) {
    declaration.factors.push(`${formatCount(comboCount)} matrix combinations`);
  }
  if (foreach === undefined) {
    declaration.count = comboCount * repeat;
  } else {
    const counted = await prepareRows(declaration, foreach, comboCount, ctx, rowCache);
    if (counted === undefined) return undefined;
    declaration.count = counted;
  }
  if (repeat > 1) declaration.factors.push(`repeat ${formatCount(repeat)}`);
  return declaration;
}

/** A repeat the schema refused (0, 2.5) is reported; the task is still expanded once to check the rest. */
function validRepeat(repeat: unknown): number {
  return typeof repeat === 'number' && Number.isSafeInteger(repeat) && repeat >= 1 ? repeat : 1;
}

/** `after` compiled (a task-id template, or a mapping of names to them) and the input's references to it. */
function prepareAfter(
  raw: unknown,
  base: string,
  input: CompiledValue,
  ctx: ExpandContext,
  errors: CompileError[],
): Declaration['after'] {
  if (typeof raw !== 'string' && !isPlainObject(raw)) return undefined;
  const values: NonNullable<Declaration['after']>['values'] = [];
  let names: string[] | undefined;
  if (typeof raw === 'string') {
    values.push({ name: SINGLE, value: compileValue(raw, `${base}.after`, errors), source: `${base}.after` });
  } else {
    names = Object.keys(raw);
    for (const name of names) {
      const source = `${base}.after.${name}`;
      values.push({ name, value: compileValue(raw[name], source, errors), source });
    }
  }
  const references: LocatedReference[] = [];
  for (const { source, placeholder } of placeholdersOfAfter(input)) {
    const parsed = parseReference(placeholder.path, names);
    // A reference that does not parse is reported, located, by the expander's lookup.
    if (parsed.ok) {
      references.push({
        reference: parsed.reference,
        pos: ctx.index.inScalar(source, placeholder.raw, placeholder.occurrence),
        path: source.slice(base.length + 1),
      });
    }
  }
  return { names, values, references };
}

/** Reads the rows of `foreach` (once per distinct file) and returns the task count, or reports why not. */
async function prepareRows(
  declaration: Declaration,
  foreach: CompiledValue,
  comboCount: number,
  ctx: ExpandContext,
  rowCache: Map<string, Promise<RowsResult>>,
): Promise<number | undefined> {
  const field = `${declaration.base}.foreach`;
  const pos = ctx.index.at(field);
  const perCombo = foreach.kind !== 'literal';
  const comboList = perCombo ? combos(declaration.plan) : [undefined];
  const lists: PlainObject[][] = [];
  let failed = false;
  for (const combo of comboList) {
    const scope: Scope = { vars: ctx.vars, builtins: { ...ctx.builtins }, combo };
    const path = renderValue(foreach, lookupIn(scope), (source, placeholder, message) => {
      failed = true;
      ctx.problems.addOnce(`${source}\0${placeholder.raw}`, {
        pos: ctx.index.inScalar(source, placeholder.raw, placeholder.occurrence),
        path: field,
        message,
      });
    });
    if (failed) return undefined;
    if (typeof path !== 'string' || path === '') {
      ctx.problems.add({ pos, path: field, message: `must be a file path, got ${describeValue(path)}` });
      return undefined;
    }
    const absolute = resolve(ctx.dir, path);
    let pending = rowCache.get(absolute);
    if (!pending) {
      const shown = isAbsolute(path) ? path : join(ctx.shownDir, path);
      pending = isGlob(path)
        ? globRows(path, shown, field, pos, ctx)
        : readRows({ path: absolute, shown, field, pos }, ctx.readFile);
      rowCache.set(absolute, pending);
    }
    const result = await pending;
    if (!result.ok) {
      for (const problem of result.problems)
        ctx.problems.addUnique(`${absolute}\0${formatProblemKey(problem)}`, problem);
      return undefined;
    }
    lists.push(result.rows);
  }
  if (perCombo) {
    declaration.comboList = comboList as PlainObject[];
    declaration.rows = (combo) => lists[combo];
    declaration.factors.push('the rows of each combination');
    return lists.reduce((sum, rows) => sum + rows.length * declaration.repeat, 0);
  }
  const rows = lists[0] ?? [];
  declaration.rows = () => rows;
  declaration.factors.push(`${formatCount(rows.length)} rows`);
  return comboCount * rows.length * declaration.repeat;
}

/** One row per file a glob matches: `{{row.path}}` (relative to the manifest), `{{row.name}}`, `{{row.stem}}`. */
async function globRows(
  pattern: string,
  shown: string,
  field: string,
  pos: SourcePos,
  ctx: ExpandContext,
): Promise<RowsResult> {
  const listed = await ctx.listFiles(pattern);
  if (!listed.ok) return { ok: false, problems: [{ pos, path: field, message: listed.message }] };
  if (listed.paths.length === 0) {
    return {
      ok: false,
      problems: [
        { pos, path: field, message: `${shown} matches no file; one task is made per matching file` },
      ],
    };
  }
  const rows = listed.paths.map((path) => {
    const name = basename(path);
    const ext = extname(name);
    return { path, name, stem: ext === '' ? name : name.slice(0, -ext.length) };
  });
  return { ok: true, rows };
}

function formatProblemKey(problem: ManifestProblem): string {
  return `${problem.pos.line}:${problem.pos.col}:${problem.message}`;
}

/** Matrix keys become template names, so they may not shadow built-ins; exclude may only name matrix keys. */
function checkMatrixNames(plan: MatrixPlan, base: string, ctx: ExpandContext): void {
  const builtins: readonly string[] = BUILTIN_NAMES;
  const reserved = (key: string, path: string) => {
    if (builtins.includes(key)) {
      ctx.problems.add({
        pos: ctx.index.keyAt(path),
        path,
        message: `"${key}" is a built-in template name (${BUILTIN_NAMES.join(', ')}); use another matrix key`,
      });
    }
  };
  for (const key of plan.keys) reserved(key, `${base}.${key}`);
  plan.include.forEach((entry, i) => {
    for (const key of Object.keys(entry)) reserved(key, `${base}.include.${i}.${key}`);
  });
  plan.exclude.forEach((entry, i) => {
    for (const key of Object.keys(entry)) {
      if (plan.keys.includes(key)) continue;
      const path = `${base}.exclude.${i}.${key}`;
      ctx.problems.add({
        pos: ctx.index.keyAt(path),
        path,
        message: `unknown matrix key "${key}"; matrix keys are: ${plan.keys.join(', ') || '(none)'}`,
      });
    }
  });
}

/** Template syntax mistakes in `defaults`, reported once rather than once per task. */
export function checkDefaults(ctx: Pick<ExpandContext, 'defaults' | 'index' | 'problems'>): void {
  for (const model of Object.keys(ctx.defaults)) {
    const errors: CompileError[] = [];
    compileValue(ctx.defaults[model], `defaults.${model}`, errors);
    for (const error of errors) {
      ctx.problems.add({
        pos: ctx.index.inScalar(error.source, error.raw, error.occurrence),
        path: error.source,
        message: error.message,
      });
    }
  }
}

/** Vars become template names, so they may not shadow built-ins. */
export function checkVars(ctx: Pick<ExpandContext, 'vars' | 'index' | 'problems'>): void {
  const builtins: readonly string[] = BUILTIN_NAMES;
  for (const key of Object.keys(ctx.vars)) {
    if (!builtins.includes(key)) continue;
    ctx.problems.add({
      pos: ctx.index.keyAt(`vars.${key}`),
      path: `vars.${key}`,
      message: `"${key}" is a built-in template name (${BUILTIN_NAMES.join(', ')}); rename this var`,
    });
  }
}
