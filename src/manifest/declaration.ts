// A task declaration prepared for expansion: templates compiled once, matrix planned, rows read, count known.

import type { MatrixPlan } from './matrix.js';
import type { Problems } from './problems.js';
import type { SourceIndex } from './source-index.js';
import type { CompiledValue } from './template.js';
import type { LocatedReference, ManifestProblem, SourcePos, TaskSpec, Unexpanded } from './types.js';

export type { Unexpanded };

import type { PlainObject } from './values.js';

export interface ExpandContext {
  index: SourceIndex;
  problems: Problems;
  vars: PlainObject;
  /** Model id → request fields, as written under `defaults`. */
  defaults: PlainObject;
  builtins: { name: string; run: string; date: string; datetime: string };
  /** Folder of the manifest: absolute for reading, as given for messages. */
  dir: string;
  shownDir: string;
  maxTasks: number;
  readFile: (path: string) => Promise<Buffer>;
  /** The files a `foreach` glob matches, relative to the manifest's folder, sorted; or why none can be. */
  listFiles: (pattern: string) => Promise<{ ok: true; paths: string[] } | { ok: false; message: string }>;
  /** The manifest's `file_name`, for tasks without their own. */
  fileName?: unknown;
  /** Tasks that did not expand because of a problem of their own; see Unexpanded. */
  unexpanded?: Unexpanded;
  /** See LoadOptions.checkPartial. */
  checkPartial?: CheckPartial;
}

/**
 * The problems of a task whose template failed in some top-level `input` fields (`broken`, left
 * undefined in `spec.input`), found in every field that does not depend on them. The planning layer
 * gives it (it knows the models' rules); the manifest layer only expands.
 */
export type CheckPartial = (spec: TaskSpec, broken: ReadonlySet<string>) => ManifestProblem[];

export interface Declaration {
  n: number;
  base: string;
  pos: SourcePos;
  idTemplate: string;
  id: CompiledValue;
  model: CompiledValue;
  input: CompiledValue;
  mediaSeconds: CompiledValue | undefined;
  /** The task's own `retries` (a plain integer, checked by the schema). */
  retries?: number;
  /** The task's own `review` (a plain boolean, checked by the schema). */
  review?: boolean;
  /** The task's `file_name` template, or the manifest's; rendered with the task's names and `id`. */
  fileName?: { value: CompiledValue; source: string };
  /** `after`: task-id templates by name (SINGLE for the lone form), with their source paths. */
  after?: {
    /** The mapping's names, or undefined for the lone form. */
    names: string[] | undefined;
    values: Array<{ name: string; value: CompiledValue; source: string }>;
    references: LocatedReference[];
  };
  plan: MatrixPlan;
  repeat: number;
  /** Rows per combination (all combinations share one list when the path has no matrix name). */
  rows: (combo: number) => PlainObject[] | undefined;
  comboList: PlainObject[] | undefined;
  count: number;
  factors: string[];
}

export interface Origin {
  n: number;
  combo: PlainObject;
  row: number | undefined;
  copy: number | undefined;
}
