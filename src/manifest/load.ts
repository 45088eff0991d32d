// Reads a manifest file into settings and task specs, or into every problem found, each located.

import { dirname, resolve } from 'node:path';
import type { CheckPartial } from './declaration.js';
import {
  checkDefaults,
  checkVars,
  type ExpandContext,
  expandDeclarations,
  prepareDeclarations,
  type Unexpanded,
} from './expand.js';
import { dataFileLister, dataFileReader, excerpt, FileRefused, readRegularFile } from './files.js';
import { DEFAULT_MAX_TASKS, MAX_DATA_BYTES, MAX_MANIFEST_BYTES } from './limits.js';
import { Problems } from './problems.js';
import { manifestSchema } from './schema.js';
import { schemaProblems } from './schema-problems.js';
import { readSettings } from './settings.js';
import type { SourceIndex } from './source-index.js';
import type { ManifestResult, TaskSource } from './types.js';
import { describeValue, formatCount, isPlainObject, type PlainObject } from './values.js';
import { parseYaml } from './yaml-tree.js';

export interface LoadOptions {
  /** The clock for `{{date}}` and `{{datetime}}`. */
  now: Date;
  /** Where relative manifest and `output` paths start. */
  cwd: string;
  /**
   * Reads the manifest and its data files in place of the file system (tests, in-memory use). Without it
   * only regular files are read, within the size limits.
   */
  readFile?: (path: string) => Promise<Buffer>;
  /** Lists the files of a `foreach` glob (tests give an in-memory folder); the manifest's folder by default. */
  listFiles?: ExpandContext['listFiles'];
  /** Let `foreach` read data files outside the manifest's folder (CLI: --allow-outside-data). */
  allowOutside?: boolean;
  /** Refuse manifests that expand to more tasks (default 1,000,000). */
  maxTasks?: number;
  /**
   * Values that replace the manifest's own vars of the same names (`run --sandbox` sets `sandbox`). A name
   * the manifest does not declare is ignored, so that no manifest gains a name it did not ask for.
   */
  overrideVars?: Readonly<Record<string, unknown>>;
  /**
   * Expand the tasks on demand (`manifest.source`) rather than into `manifest.tasks`, so that a million
   * of them are never held at once. A manifest with problems before expansion is expanded as usual.
   */
  streaming?: boolean;
  /**
   * Checks the request of a task that did not expand (a template failed in some of its fields, its file
   * name or id is taken) in every field that does not depend on the failure, so that one pass reports
   * every problem. Planning gives the models' rules; without it such a task's request is not checked.
   */
  checkPartial?: CheckPartial;
}

/** Fields whose problems make expanding the tasks pointless (every task would repeat them). */
const BLOCKING = new Set(['vars', 'defaults', 'tasks']);

/**
 * A task's fields that nothing of its expansion or request depends on: a problem in one of them leaves
 * the task expandable, so that its other problems are found in the same pass (a bad `repeat` counts as 1).
 */
const SIDE_FIELDS = new Set<PropertyKey>(['retries', 'review', 'repeat']);

/** The manifest read and parsed to a mapping, or the result that refuses it (one located problem each). */
async function readDocument(
  file: string,
  absolute: string,
  opts: LoadOptions,
): Promise<{ refused: ManifestResult } | { doc: PlainObject; index: SourceIndex; problems: Problems }> {
  const atStart = { file, line: 1, col: 1 };
  const refuse = (message: string) => ({
    refused: { ok: false as const, problems: [{ pos: atStart, path: '', message }] },
  });
  const tooBig = (size: number | undefined) =>
    refuse(
      `the manifest is ${size === undefined ? '' : `${formatCount(size)} bytes, `}more than the ${MAX_MANIFEST_BYTES / 1024 / 1024} MB limit; move rows into a foreach data file or split the manifest`,
    );
  let buffer: Buffer;
  try {
    buffer = await (opts.readFile ?? ((path) => readRegularFile(path, MAX_MANIFEST_BYTES)))(absolute);
  } catch (error) {
    if (error instanceof FileRefused) {
      const { reason } = error;
      if (reason.kind === 'too-big') return tooBig(reason.size);
      if (reason.kind === 'not-regular') {
        return refuse(`the manifest is ${reason.what}, not a regular file; give the path of a .yaml file`);
      }
    }
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'no such file' : (code ?? 'unreadable');
    return refuse(`cannot read the manifest: ${reason}`);
  }
  if (buffer.length > MAX_MANIFEST_BYTES) return tooBig(buffer.length);

  const parsed = parseYaml(buffer.toString('utf8'), file);
  const problems = new Problems();
  problems.addAll(parsed.problems);
  const doc = parsed.value;
  if (!('value' in parsed)) return { refused: { ok: false, problems: problems.list() } };
  if (!isPlainObject(doc)) {
    const message =
      doc === null || doc === undefined
        ? 'the manifest is empty; start with "version: 1", a name and a list of tasks'
        : `the manifest must be a mapping (version: 1, name: ..., tasks: ...), got ${excerpt(describeValue(doc))}`;
    problems.add({ pos: atStart, path: '', message });
    return { refused: { ok: false, problems: problems.list() } };
  }
  return { doc, index: parsed.index, problems };
}

/**
 * The schema's problems, added; which tasks it found invalid, and whether a problem of `vars`, `defaults`
 * or `tasks` itself blocks expanding any task.
 */
function checkSchema(
  doc: PlainObject,
  index: SourceIndex,
  problems: Problems,
): { invalidTasks: Set<number>; blocked: boolean } {
  const checked = manifestSchema.safeParse(doc, { reportInput: true });
  const issues = checked.success ? [] : checked.error.issues;
  problems.addAll(schemaProblems(issues, index));
  const invalidTasks = new Set<number>();
  let blocked = false;
  for (const issue of issues) {
    const [first, second] = issue.path;
    // An unknown key (a typo) leaves the rest of the task usable: expand it to find its other problems.
    const typo = issue.code === 'unrecognized_keys' && issue.path.length === 2;
    const side = issue.path.length === 3 && SIDE_FIELDS.has(issue.path[2] as PropertyKey);
    if (first === 'tasks' && typeof second === 'number') {
      if (!typo && !side) invalidTasks.add(second);
    } else if (first === 'defaults' && (issue.path.length > 1 || issue.code === 'unrecognized_keys')) {
      // An entry of defaults (a key that is no model, a value that is no mapping): no task reads it.
    } else if (typeof first === 'string' && BLOCKING.has(first)) blocked = true;
  }
  return { invalidTasks, blocked };
}

/** Every problem of the manifest is collected in order, then reported at once; the tasks expanded meanwhile. */
export async function loadManifest(file: string, opts: LoadOptions): Promise<ManifestResult> {
  const absolute = resolve(opts.cwd, file);
  const document = await readDocument(file, absolute, opts);
  if ('refused' in document) return document.refused;
  const { doc, index, problems } = document;
  const { invalidTasks, blocked } = checkSchema(doc, index, problems);

  const read = readSettings(doc, { cwd: opts.cwd, now: opts.now, index, problems });
  const { settings, stamp } = read;
  const vars = { ...read.vars };
  for (const [name, value] of Object.entries(opts.overrideVars ?? {})) {
    if (Object.hasOwn(vars, name)) vars[name] = value;
  }
  const defaults = isPlainObject(doc.defaults) ? doc.defaults : {};
  checkVars({ vars, index, problems });
  checkDefaults({ defaults, index, problems });
  const rawTasks = Array.isArray(doc.tasks) ? doc.tasks : [];
  const ctx: ExpandContext = {
    index,
    problems,
    vars,
    defaults,
    builtins: { name: settings.name, run: settings.runId, date: stamp.date, datetime: stamp.datetime },
    dir: dirname(absolute),
    shownDir: dirname(file),
    maxTasks: opts.maxTasks ?? DEFAULT_MAX_TASKS,
    ...(typeof doc.file_name === 'string' ? { fileName: doc.file_name } : {}),
    listFiles:
      opts.listFiles ?? dataFileLister({ dir: dirname(absolute), allowOutside: opts.allowOutside ?? false }),
    ...(opts.checkPartial ? { checkPartial: opts.checkPartial } : {}),
    readFile: dataFileReader({
      dir: dirname(absolute),
      allowOutside: opts.allowOutside ?? false,
      cap: MAX_DATA_BYTES,
      readFile: opts.readFile,
    }),
  };
  const declarations = blocked ? [] : await prepareDeclarations(rawTasks, (n) => !invalidTasks.has(n), ctx);
  const chained = declarations.some((declaration) => declaration.after !== undefined);
  if (opts.streaming && problems.size === 0) {
    const source: TaskSource = {
      expand(proven = false) {
        const found = new Problems();
        const unexpanded: Unexpanded = { ids: new Set(), unknown: false };
        return {
          tasks: expandDeclarations(declarations, { ...ctx, problems: found, unexpanded }, proven),
          problems: () => found.list(),
          unexpanded: () => unexpanded,
        };
      },
    };
    return { ok: true, manifest: { file, settings, tasks: [], source, ...(chained && { chained }) } };
  }
  // A declaration left out (its own schema problem, a data file that cannot be read) has tasks whose ids
  // are not known.
  const unexpanded: Unexpanded = {
    ids: new Set(),
    unknown: blocked || declarations.length < rawTasks.length,
  };
  const tasks = [...expandDeclarations(declarations, { ...ctx, unexpanded })];
  // The tasks that did expand go back with the problems, so that a caller can check them too and report
  // every problem at once rather than the manifest's first, then the catalog's.
  if (problems.size > 0) return { ok: false, problems: problems.list(), tasks, unexpanded };
  return { ok: true, manifest: { file, settings, tasks, ...(chained && { chained }) } };
}
