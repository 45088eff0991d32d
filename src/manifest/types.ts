// What the manifest loader produces: located task specs, or every problem at once.

import type { Reference } from './after.js';

export interface SourcePos {
  file: string;
  /** 1-based. */
  line: number;
  /** 1-based. */
  col: number;
}

/** A problem in a manifest, located as precisely as we can. */
export interface ManifestProblem {
  pos: SourcePos;
  /** Task id after expansion when the problem belongs to one task. */
  taskId?: string;
  /** Field path, e.g. `tasks.0.matrix.product` for manifest fields or `input.duration` for request fields. */
  path: string;
  message: string;
  /**
   * The same problem at the same place in several tasks, folded into this one: how many tasks, and the
   * first of their ids (`taskId` and the message's value are the first task's).
   */
  tasks?: { count: number; first: readonly string[] };
}

export type TaskOrder = 'longest' | 'manifest';

export interface ManifestSettings {
  version: 1;
  name: string;
  /** Run-id template, rendered already into `runId`. */
  run?: string;
  runId: string;
  schedule?: string;
  timezone?: string;
  concurrency: number;
  /** Which pending task goes next: the longest expected job first (default), or the manifest's order. */
  order: TaskOrder;
  budget?: number;
  /** Automatic resubmissions of a failed (refunded) job, for tasks that do not set their own. */
  retries: number;
  /** Every task's result must be approved before its downstreams go on, for tasks that do not say. */
  review: boolean;
  /** Absolute path of the output folder (a relative `output` is resolved against the working folder, like the state file). */
  output: string;
  callbackUrl?: string;
  listen?: string;
  budgetPerPeriod?: number;
}

export interface TaskSpec {
  /** Unique after expansion. */
  id: string;
  model: string;
  /** The request fields after templates and `defaults`, before catalog normalisation. */
  input: Record<string, unknown>;
  mediaSeconds?: number;
  /** The task's own `retries`, when it sets one (the manifest's applies otherwise). */
  retries?: number;
  /** The task's own `review`, when it sets one (the manifest's applies otherwise). */
  review?: boolean;
  /** Result file name without extension (from `file_name`), checked to be one safe, unique file name. */
  fileName?: string;
  /** Where the task was declared (its list item in `tasks`). */
  pos: SourcePos;
  /** The tasks it waits for and takes results from (`after`), by name (SINGLE for a lone upstream). */
  after?: readonly Upstream[];
  /** Its `{{after…}}` placeholders, located (shared by every task of the declaration). */
  references?: readonly LocatedReference[];
  /** Where a field of `input` came from (the task's input, or `defaults`); falls back to `pos`. */
  locate(fieldPath: string): SourcePos;
}

/** One task a chained task waits for. */
export interface Upstream {
  /** '' for `after: "<id>"`, else the key of the `after` mapping. */
  name: string;
  taskId: string;
  /** Where the `after` value is written. */
  pos: SourcePos;
}

export interface LocatedReference {
  reference: Reference;
  pos: SourcePos;
  /** The request field it is written in, e.g. `input.image_url`. */
  path: string;
}

export interface LoadedManifest {
  file: string;
  settings: ManifestSettings;
  /** Every task; empty when the manifest was loaded for streaming (see `source`). */
  tasks: TaskSpec[];
  /** Loaded with `streaming`: the tasks are expanded on demand, one at a time, never all held. */
  source?: TaskSource;
  /** Some task has `after` (a chain): planning keeps what it needs of every task to check and price chains. */
  chained?: boolean;
}

/** The tasks of a manifest, expanded again at each call: the same tasks in the same order every time. */
export interface TaskSource {
  /**
   * One expansion. `problems()`, once every task has been taken, gives the expansion's own problems
   * (duplicate ids, a template that fails for some row): none when an earlier expansion found none.
   * `proven`: an earlier expansion found none, so ids and file names are not tracked for duplicates
   * again (a million of them are a map of their own).
   */
  expand(proven?: boolean): {
    tasks: Generator<TaskSpec>;
    problems(): ManifestProblem[];
    /** Once every task has been taken: those that did not expand (see Unexpanded). */
    unexpanded(): Unexpanded;
  };
}

export type ManifestResult =
  | { ok: true; manifest: LoadedManifest }
  | {
      ok: false;
      problems: ManifestProblem[];
      /** The tasks that expanded without a problem of their own, when expansion ran at all. */
      tasks?: TaskSpec[];
      /** The tasks that did not (see Unexpanded). */
      unexpanded?: Unexpanded;
    };

/**
 * Tasks a manifest declares that did not expand (a problem of their own): the ids that rendered, and
 * whether some task's id is not known at all (a declaration skipped, an id that did not render). A chain
 * that names one of them is not told its upstream is missing: it is there, with its own problem.
 */
export interface Unexpanded {
  ids: Set<string>;
  unknown: boolean;
}
