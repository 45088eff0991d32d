// Reads for `mediabatch view`: a page of tasks by keyset (never OFFSET), one task in full, the series of
// a run's spend and finished tasks, failures grouped by reason, and the cheap signals that say the
// database changed. Every statement is a read: the view opens the file read-only (openReadOnlyStore).

import { scrub } from '../util/secrets.js';
import type { Db } from './db.js';
import { type FileRow, toFile } from './files.js';
import { tokensTotal } from './micro.js';
import { REQUEST_TEXT_FIELDS } from './report-reads.js';
import { shownStateSql, storedStatesFor } from './shown-state.js';
import type { FileRecord, TaskState } from './types.js';

/** The orders of the task list: results newest first, or by task id. */
export type ViewOrder = 'newest' | 'id';

/**
 * Where a page ends, for the next one. `newest` lists finished tasks (finished_at descending), then the
 * unfinished ones by task id; `id` lists every task by task id.
 */
export type ViewCursor =
  | { phase: 'finished'; finishedAt: string; taskId: string }
  | { phase: 'unfinished'; taskId: string }
  | { phase: 'id'; taskId: string };

export interface ViewTaskQuery {
  runId: string;
  order: ViewOrder;
  /** Only tasks in these states (none: all). */
  states?: readonly TaskState[];
  model?: string;
  /** Only reviewed results nobody decided on yet (the filter "awaiting review"). */
  awaiting?: boolean;
  /** Text in the task id, the request or the error (case-insensitive). */
  q?: string;
  after?: ViewCursor;
  limit: number;
}

/** One task as a result card shows it. */
export interface ViewTaskRow {
  taskId: string;
  imgUuid: string | null;
  seq: number;
  model: string;
  state: TaskState;
  error: string | null;
  submittedAt: string | null;
  finishedAt: string | null;
  updatedAt: string;
  /** The request's text fields (prompt, text, lyrics, description, title) when they are strings. */
  text: Record<string, string>;
  estimate: number;
  estimateMax: number;
  charged: number;
  refunded: number;
  files: FileRecord[];
  /** Its result must be chosen (`review: true`); verdict, attempt and version as decisions need them. */
  review: boolean;
  verdict: 'approved' | 'rejected' | null;
  attempt: number;
  version: number;
}

export interface ViewTaskPage {
  tasks: ViewTaskRow[];
  next: ViewCursor | null;
}

export interface LedgerLine {
  id: number;
  kind: 'charge' | 'refund';
  tokens: number;
  at: string;
  imgUuid: string;
  assumed: boolean;
}

/** A run's ledger after an id, summed per second, model and kind (the spend series, read incrementally). */
export interface SpendBucket {
  /** ISO time to the second, without the zone: `2026-01-05T09:00:00`. */
  second: string;
  model: string;
  kind: 'charge' | 'refund';
  tokens: number;
  rows: number;
  lastId: number;
}

/** A run's tasks per model and state, with their estimates (one pass over the run's rows). */
export interface ModelStateRow {
  model: string;
  state: TaskState;
  tasks: number;
  estimated: number;
  estimatedMax: number;
}

export interface FailureGroup {
  reason: string;
  states: TaskState[];
  count: number;
  /** The first task ids (at most FAILURE_IDS). */
  tasks: string[];
}

export interface BlockedChain {
  task: string;
  state: TaskState;
  after: Array<{ name: string; task: string; state: TaskState | null }>;
}

export interface ChangeSignals {
  /** PRAGMA data_version: moves whenever another connection commits. */
  dataVersion: number;
  ledger: number;
  files: number;
  attempts: number;
  jobEvents: number;
}

/** States whose tasks carry a failure reason worth grouping. */
export const FAILURE_STATES: readonly TaskState[] = [
  'failed',
  'rejected',
  'lost',
  'unfetched',
  'stalled',
  'blocked',
  'in_doubt',
];
const FAILURE_IDS = 20;
/** Failures are grouped over at most this many tasks (the counts by state stay exact). */
const FAILURE_SCAN = 200_000;
/** Below this many tasks in the filtered states, their index is read and sorted; above, the order's index. */
const SMALL_SET = 20_000;

interface TaskListRow {
  task_id: string;
  img_uuid: string | null;
  seq: number;
  model: string;
  state: TaskState;
  error: string | null;
  submitted_at: string | null;
  finished_at: string | null;
  updated_at: string;
  body: string;
  est_tokens: number;
  est_max: number;
  review: number;
  verdict: 'approved' | 'rejected' | null;
  attempt: number;
  version: number;
}

// The state as shown (awaiting_review for a pending task waiting for a person: src/store/shown-state.ts).
const LIST_COLUMNS = `task_id, img_uuid, seq, model, ${shownStateSql('tasks')} AS state, error, submitted_at, finished_at, updated_at, body, est_tokens, est_max, review, verdict, attempt, version`;
/**
 * The text as the view shows it, secrets taken out (src/util/secrets.ts): `q` finds only what an answer
 * would show, so a key in the state file cannot be guessed a letter at a time. SQLite's AND stops at a
 * row the plain text already rules out, so scrubbing costs only the rows that match it.
 */
const SCRUBBED = 'mediabatch_scrubbed';

/**
 * Filters shared by every list statement; null parameters switch a filter off. `:stored` are the stored
 * states behind the shown ones of `:states` (awaiting_review is stored as pending). `inSql`: the text is
 * scrubbed by a function of the connection (SQLite); else the statement matches the plain text and the
 * rows are scrubbed and matched again as they are read (PostgreSQL cannot call into this process). The
 * casts let PostgreSQL type a parameter that is first met in `IS NULL` (else it is typed by its value).
 */
function filters(inSql: boolean): string {
  const scrubbed = (text: string) => (inSql ? `${SCRUBBED}(${text})` : text);
  return `(CAST(:states AS TEXT) IS NULL OR (state IN (SELECT value FROM json_each(:stored))
    AND ${shownStateSql('tasks')} IN (SELECT value FROM json_each(:states))))
  AND (CAST(:model AS TEXT) IS NULL OR model = :model)
  AND (:awaiting = 0 OR (review = 1 AND verdict IS NULL AND state = 'done'))
  AND (CAST(:q AS TEXT) IS NULL OR instr(lower(task_id), :q) > 0
       OR (instr(lower(body), :q) > 0 AND instr(lower(${scrubbed('body')}), :q) > 0)
       OR (instr(lower(coalesce(error, '')), :q) > 0 AND instr(lower(${scrubbed("coalesce(error, '')")}), :q) > 0))`;
}

/** The text filter as the answers show the row (scrubbed), for rows a statement matched on plain text. */
function shows(row: TaskListRow, q: string): boolean {
  return (
    row.task_id.toLowerCase().includes(q) ||
    scrub(row.body).toLowerCase().includes(q) ||
    scrub(row.error ?? '')
      .toLowerCase()
      .includes(q)
  );
}

type ListStatement = { all(params: ListParams): TaskListRow[] };

/**
 * The keyset bounds are always given (a NULL-or-bound test would stop SQLite from seeking the index):
 * the first page starts after task id '' and before finish time END_OF_TIME.
 */
interface ListParams {
  runId: string;
  awaiting: 0 | 1;
  states: string | null;
  stored: string | null;
  model: string | null;
  q: string | null;
  finishedAt: string;
  taskId: string;
  limit: number;
}

const END_OF_TIME = '9999';
/** Rows read at a time when the text filter is matched again on the rows (PostgreSQL). */
const READ_PAST_ROWS = 200;

/** The keyset bound after a row: of the lists by task id, and of the list by finish time. */
const byTaskId = (row: TaskListRow): Partial<ListParams> => ({ taskId: row.task_id });
const byFinish = (row: TaskListRow): Partial<ListParams> => ({
  finishedAt: row.finished_at ?? END_OF_TIME,
  taskId: row.task_id,
});

export class ViewReadStore {
  readonly #db: Db;
  readonly #finished;
  readonly #finishedSmall;
  readonly #unfinished;
  readonly #byId;
  readonly #byIdSmall;
  readonly #countsOf;
  readonly #filesOf;
  readonly #spendOf;
  readonly #ledgerOfTask;
  readonly #spendAfter;
  readonly #spendBetween;
  readonly #modelStates;
  readonly #modelStatesIn;
  readonly #rowidBounds;
  readonly #finishedChunk;
  readonly #maxLedgerId;
  readonly #finishedBuckets;
  readonly #failures;
  readonly #blocked;
  readonly #upstreamsOf;
  readonly #downstreamsOf;
  readonly #stateOf;
  readonly #signals;
  readonly #inDoubt;
  readonly #finishedSince;
  readonly #latestFinish;

  /** The text filter's scrubbing is done on the rows read, not in the statement (PostgreSQL). */
  readonly #scrubAfter: boolean;

  // Long on purpose: every statement is prepared once, here, and named for what it does.
  constructor(db: Db) {
    this.#db = db;
    // better-sqlite3 runs a function of this process inside a statement; PostgreSQL's client cannot.
    this.#scrubAfter = typeof (db as { function?: unknown }).function !== 'function';
    if (!this.#scrubAfter) {
      db.function(SCRUBBED, (text: unknown) => (typeof text === 'string' ? scrub(text) : text));
    }
    const FILTERS = filters(!this.#scrubAfter);
    // Newest first: the partial index (run_id, finished_at, task_id) read backwards from the cursor.
    this.#finished = db.prepare<ListParams, TaskListRow>(
      `SELECT ${LIST_COLUMNS} FROM tasks INDEXED BY tasks_by_finished
       WHERE run_id = :runId AND finished_at IS NOT NULL
         AND (finished_at, task_id) < (:finishedAt, :taskId)
         AND ${FILTERS}
       ORDER BY finished_at DESC, task_id DESC LIMIT :limit`,
    );
    // Few tasks in the wanted states: read them through (run_id, state, …) and sort them.
    this.#finishedSmall = db.prepare<ListParams, TaskListRow>(
      `SELECT ${LIST_COLUMNS} FROM tasks INDEXED BY tasks_by_state
       WHERE run_id = :runId AND state IN (SELECT value FROM json_each(:stored)) AND finished_at IS NOT NULL
         AND (finished_at, task_id) < (:finishedAt, :taskId)
         AND ${FILTERS}
       ORDER BY finished_at DESC, task_id DESC LIMIT :limit`,
    );
    this.#unfinished = db.prepare<ListParams, TaskListRow>(
      `SELECT ${LIST_COLUMNS} FROM tasks
       WHERE run_id = :runId AND finished_at IS NULL AND task_id > :taskId
         AND ${FILTERS}
       ORDER BY task_id LIMIT :limit`,
    );
    this.#byId = db.prepare<ListParams, TaskListRow>(
      `SELECT ${LIST_COLUMNS} FROM tasks
       WHERE run_id = :runId AND task_id > :taskId AND ${FILTERS}
       ORDER BY task_id LIMIT :limit`,
    );
    this.#byIdSmall = db.prepare<ListParams, TaskListRow>(
      `SELECT ${LIST_COLUMNS} FROM tasks INDEXED BY tasks_by_state
       WHERE run_id = :runId AND state IN (SELECT value FROM json_each(:stored))
         AND task_id > :taskId AND ${FILTERS}
       ORDER BY task_id LIMIT :limit`,
    );
    this.#countsOf = db.prepare<{ runId: string; states: string }, number>(
      `SELECT coalesce(sum(n), 0) FROM task_counts WHERE run_id = :runId
         AND state IN (SELECT value FROM json_each(:states))`,
    );
    this.#countsOf.pluck();
    this.#filesOf = db.prepare<{ runId: string; ids: string }, FileRow>(
      `SELECT * FROM files WHERE run_id = :runId AND task_id IN (SELECT value FROM json_each(:ids))
       ORDER BY task_id, idx`,
    );
    this.#spendOf = db.prepare<
      { runId: string; ids: string },
      { task_id: string; charged: number; refunded: number }
    >(
      `SELECT task_id, ${tokensTotal('tokens', "kind = 'charge'")} AS charged,
         ${tokensTotal('tokens', "kind = 'refund'")} AS refunded
       FROM ledger WHERE run_id = :runId AND task_id IN (SELECT value FROM json_each(:ids)) GROUP BY task_id`,
    );
    this.#ledgerOfTask = db.prepare<
      [string, string],
      { id: number; kind: 'charge' | 'refund'; tokens: number; at: string; img_uuid: string; assumed: number }
    >(
      'SELECT id, kind, tokens, at, img_uuid, assumed FROM ledger WHERE run_id = ? AND task_id = ? ORDER BY id',
    );
    // By row id from `afterId` (the ledger only grows), the run's rows filtered by +run_id: one range
    // read, then each row's model from the task's primary key.
    this.#spendAfter = db.prepare<[number, string], SpendBucket>(
      `SELECT substr(l.at, 1, 19) AS second, t.model, l.kind, ${tokensTotal('l.tokens')} AS tokens, count(*) AS rows,
         max(l.id) AS lastId
       FROM ledger AS l JOIN tasks AS t ON t.run_id = l.run_id AND t.task_id = l.task_id
       WHERE l.id > ? AND +l.run_id = ? GROUP BY second, t.model, l.kind ORDER BY second`,
    );
    // The same over a bounded id range: a large ledger read in short statements (no long snapshot).
    this.#spendBetween = db.prepare<[number, number, string], SpendBucket>(
      `SELECT substr(l.at, 1, 19) AS second, t.model, l.kind, ${tokensTotal('l.tokens')} AS tokens, count(*) AS rows,
         max(l.id) AS lastId
       FROM ledger AS l JOIN tasks AS t ON t.run_id = l.run_id AND t.task_id = l.task_id
       WHERE l.id > ? AND l.id <= ? AND +l.run_id = ? GROUP BY second, t.model, l.kind ORDER BY second`,
    );
    this.#maxLedgerId = db.prepare<[], number | null>('SELECT max(id) FROM ledger').pluck();
    this.#rowidBounds = db.prepare<[string, string], { lo: number | null; hi: number | null }>(
      `SELECT (SELECT min(rowid) FROM tasks WHERE run_id = ?) AS lo,
         (SELECT max(rowid) FROM tasks WHERE run_id = ?) AS hi`,
    );
    this.#modelStatesIn = db.prepare<{ runId: string; lo: number; hi: number }, ModelStateRow>(
      `SELECT model, state, count(*) AS tasks, ${tokensTotal('est_tokens')} AS estimated,
         ${tokensTotal('est_max')} AS estimatedMax
       FROM tasks WHERE rowid BETWEEN :lo AND :hi AND +run_id = :runId GROUP BY model, state`,
    );
    this.#finishedChunk = db
      .prepare<[string, string, string, number], [string, string]>(
        `SELECT finished_at, task_id FROM tasks INDEXED BY tasks_by_finished
         WHERE run_id = ? AND finished_at IS NOT NULL AND (finished_at, task_id) > (?, ?)
         ORDER BY finished_at, task_id LIMIT ?`,
      )
      .raw();
    // The run's rows as one range of the table (see runTotals in report-reads.ts): a million in ~1 s.
    this.#modelStates = db.prepare<{ runId: string }, ModelStateRow>(
      `SELECT model, state, count(*) AS tasks, ${tokensTotal('est_tokens')} AS estimated,
         ${tokensTotal('est_max')} AS estimatedMax
       FROM tasks
       WHERE rowid BETWEEN (SELECT min(rowid) FROM tasks WHERE run_id = :runId)
         AND (SELECT max(rowid) FROM tasks WHERE run_id = :runId) AND +run_id = :runId
       GROUP BY model, state`,
    );
    this.#finishedBuckets = db.prepare<[string], { second: string; n: number }>(
      `SELECT substr(finished_at, 1, 19) AS second, count(*) AS n FROM tasks INDEXED BY tasks_by_finished
       WHERE run_id = ? AND finished_at IS NOT NULL GROUP BY second ORDER BY second`,
    );
    this.#finishedSince = db.prepare<
      [string, string, number],
      { task_id: string; finished_at: string; state: TaskState }
    >(
      `SELECT task_id, finished_at, state FROM tasks INDEXED BY tasks_by_finished
       WHERE run_id = ? AND finished_at IS NOT NULL AND finished_at > ? ORDER BY finished_at LIMIT ?`,
    );
    this.#latestFinish = db
      .prepare<[string], string | null>(
        `SELECT max(finished_at) FROM tasks INDEXED BY tasks_by_finished
         WHERE run_id = ? AND finished_at IS NOT NULL`,
      )
      .pluck();
    this.#failures = db.prepare<
      { runId: string; state: string; limit: number },
      { task_id: string; error: string | null; state: TaskState }
    >(
      `SELECT task_id, error, state FROM tasks INDEXED BY tasks_by_state
       WHERE run_id = :runId AND state = :state ORDER BY seq LIMIT :limit`,
    );
    this.#blocked = db.prepare<{ runId: string; limit: number }, { task_id: string; state: TaskState }>(
      `SELECT task_id, state FROM tasks WHERE run_id = :runId AND state = 'blocked'
       UNION ALL
       SELECT task_id, state FROM tasks WHERE run_id = :runId AND state = 'pending' AND waits > 0
       LIMIT :limit`,
    );
    this.#upstreamsOf = db.prepare<
      [string, string],
      { name: string; upstream_id: string; state: TaskState | null }
    >(
      `SELECT u.name, u.upstream_id, t.state FROM task_upstreams AS u
       LEFT JOIN tasks AS t ON t.run_id = u.run_id AND t.task_id = u.upstream_id
       WHERE u.run_id = ? AND u.task_id = ? ORDER BY u.name`,
    );
    this.#downstreamsOf = db.prepare<
      [string, string],
      { name: string; task_id: string; state: TaskState | null }
    >(
      `SELECT u.name, u.task_id, t.state FROM task_upstreams AS u
       LEFT JOIN tasks AS t ON t.run_id = u.run_id AND t.task_id = u.task_id
       WHERE u.run_id = ? AND u.upstream_id = ? ORDER BY u.task_id LIMIT 200`,
    );
    this.#stateOf = db
      .prepare<[string, string], TaskState>('SELECT state FROM tasks WHERE run_id = ? AND task_id = ?')
      .pluck();
    this.#signals = db.prepare<
      [],
      { ledger: number | null; files: number | null; attempts: number | null; job_events: number | null }
    >(
      `SELECT (SELECT max(id) FROM ledger) AS ledger, (SELECT max(rowid) FROM files) AS files,
         (SELECT max(rowid) FROM attempts) AS attempts, (SELECT max(rowid) FROM job_events) AS job_events`,
    );
    this.#inDoubt = db.prepare<[string], { tasks: number; tokens: number; max: number }>(
      `SELECT count(*) AS tasks, ${tokensTotal('est_tokens')} AS tokens, ${tokensTotal('est_max')} AS max
       FROM tasks WHERE run_id = ? AND state = 'in_doubt'`,
    );
  }

  /** One page of a run's tasks, each with its files and spend; `next` is null on the last page. */
  taskPage(query: ViewTaskQuery): ViewTaskPage {
    const limit = Math.max(1, Math.min(500, query.limit));
    const base = {
      runId: query.runId,
      states: query.states && query.states.length > 0 ? JSON.stringify(query.states) : null,
      stored: query.states && query.states.length > 0 ? JSON.stringify(storedStatesFor(query.states)) : null,
      model: query.model ?? null,
      awaiting: query.awaiting ? (1 as const) : (0 as const),
      q: query.q ? query.q.toLowerCase() : null,
    };
    const small =
      base.states !== null &&
      base.stored !== null &&
      (this.#countsOf.get({ runId: query.runId, states: base.stored }) ?? 0) <= SMALL_SET;
    let rows: TaskListRow[];
    let next: ViewCursor | null = null;
    const after = query.after;
    if (query.order === 'id') {
      const taskId = after?.phase === 'id' ? after.taskId : '';
      const stmt = small ? this.#byIdSmall : this.#byId;
      rows = this.#read(stmt, { ...base, finishedAt: END_OF_TIME, taskId, limit: limit + 1 }, byTaskId);
      if (rows.length > limit) {
        rows = rows.slice(0, limit);
        next = { phase: 'id', taskId: rows[rows.length - 1]?.task_id ?? '' };
      }
    } else {
      rows = [];
      if (after === undefined || after.phase === 'finished') {
        const stmt = small ? this.#finishedSmall : this.#finished;
        const from = {
          finishedAt: after?.phase === 'finished' ? after.finishedAt : END_OF_TIME,
          taskId: after?.phase === 'finished' ? after.taskId : '',
        };
        rows = this.#read(stmt, { ...base, ...from, limit: limit + 1 }, byFinish);
        if (rows.length > limit) {
          rows = rows.slice(0, limit);
          const last = rows[rows.length - 1];
          next = { phase: 'finished', finishedAt: last?.finished_at ?? '', taskId: last?.task_id ?? '' };
        }
      }
      if (next === null && rows.length < limit + 1) {
        const taskId = after?.phase === 'unfinished' ? after.taskId : '';
        const more = this.#read(
          this.#unfinished,
          { ...base, finishedAt: END_OF_TIME, taskId, limit: limit - rows.length + 1 },
          byTaskId,
        );
        const room = limit - rows.length;
        if (more.length > room) next = { phase: 'unfinished', taskId: more[room - 1]?.task_id ?? '' };
        rows = rows.concat(more.slice(0, room));
        if (room === 0 && more.length > 0) next = { phase: 'unfinished', taskId: '' };
      }
    }
    return { tasks: this.#withFilesAndSpend(query.runId, rows), next };
  }

  /**
   * Up to `params.limit` rows of a list statement. When the text filter is matched again on the rows
   * (scrubAfter), rows it drops are read past, from the last row read (`next` gives its keyset bound),
   * until the page is full or the rows run out.
   */
  #read(
    stmt: ListStatement,
    params: ListParams,
    next: (row: TaskListRow) => Partial<ListParams>,
  ): TaskListRow[] {
    const q = params.q;
    if (!this.#scrubAfter || q === null) return stmt.all(params);
    const out: TaskListRow[] = [];
    // Read in larger steps than a page: where a secret is in many rows, fewer round trips read past them.
    const step = Math.max(params.limit, READ_PAST_ROWS);
    let from = { ...params, limit: step };
    for (;;) {
      const rows = stmt.all(from);
      for (const row of rows) {
        if (!shows(row, q)) continue;
        out.push(row);
        if (out.length === params.limit) return out;
      }
      const last = rows.at(-1);
      if (last === undefined || rows.length < step) return out;
      from = { ...from, ...next(last) };
    }
  }

  #withFilesAndSpend(runId: string, rows: readonly TaskListRow[]): ViewTaskRow[] {
    const ids = JSON.stringify(rows.map((r) => r.task_id));
    const files = new Map<string, FileRecord[]>();
    for (const row of this.#filesOf.iterate({ runId, ids })) {
      const list = files.get(row.task_id) ?? [];
      list.push(toFile(row));
      files.set(row.task_id, list);
    }
    const spend = new Map<string, { charged: number; refunded: number }>();
    for (const row of this.#spendOf.iterate({ runId, ids })) spend.set(row.task_id, row);
    return rows.map((row) => ({
      taskId: row.task_id,
      imgUuid: row.img_uuid,
      seq: row.seq,
      model: row.model,
      state: row.state,
      error: row.error,
      submittedAt: row.submitted_at,
      finishedAt: row.finished_at,
      updatedAt: row.updated_at,
      text: textOf(row.body),
      estimate: row.est_tokens,
      estimateMax: row.est_max,
      charged: spend.get(row.task_id)?.charged ?? 0,
      refunded: spend.get(row.task_id)?.refunded ?? 0,
      files: files.get(row.task_id) ?? [],
      review: row.review === 1,
      verdict: row.verdict,
      attempt: row.attempt,
      version: row.version,
    }));
  }

  /** The ledger lines of one task, in the order they were written. */
  ledgerOfTask(runId: string, taskId: string): LedgerLine[] {
    return this.#ledgerOfTask.all(runId, taskId).map((r) => ({
      id: r.id,
      kind: r.kind,
      tokens: r.tokens,
      at: r.at,
      imgUuid: r.img_uuid,
      assumed: r.assumed === 1,
    }));
  }

  /** A run's ledger after row `afterId`, summed per second, model and kind. */
  spendAfter(runId: string, afterId: number): SpendBucket[] {
    return this.#spendAfter.all(afterId, runId);
  }

  /** The run's ledger rows with ids in (afterId, upTo], summed per second, model and kind. */
  spendBetween(runId: string, afterId: number, upTo: number): SpendBucket[] {
    return this.#spendBetween.all(afterId, upTo, runId);
  }

  /** The newest ledger row id of any run (0 when empty). */
  maxLedgerId(): number {
    return this.#maxLedgerId.get() ?? 0;
  }

  /** The lowest and highest rowid of the run's tasks (undefined when it has none). */
  taskRowids(runId: string): { lo: number; hi: number } | undefined {
    const row = this.#rowidBounds.get(runId, runId);
    return row?.lo == null || row.hi == null ? undefined : { lo: row.lo, hi: row.hi };
  }

  /** modelStates over the run's tasks with rowids in [lo, hi]: one short read of a large run. */
  modelStatesIn(runId: string, lo: number, hi: number): ModelStateRow[] {
    return this.#modelStatesIn.all({ runId, lo, hi });
  }

  /** Finish times and task ids after the cursor (finished_at, task_id), oldest first, at most `limit`. */
  finishedAfter(runId: string, at: string, taskId: string, limit: number): Array<[string, string]> {
    return this.#finishedChunk.all(runId, at, taskId, limit);
  }

  /** A run's tasks per model and state with their estimates. */
  modelStates(runId: string): ModelStateRow[] {
    return this.#modelStates.all({ runId });
  }

  /** How many of the run's tasks finished in each second, oldest first. */
  finishedBuckets(runId: string): Array<{ second: string; n: number }> {
    return this.#finishedBuckets.all(runId);
  }

  /** Tasks that finished after `since` (ISO time), oldest first, at most `limit`. */
  finishedSince(
    runId: string,
    since: string,
    limit: number,
  ): Array<{ taskId: string; finishedAt: string; state: TaskState }> {
    return this.#finishedSince
      .all(runId, since, limit)
      .map((r) => ({ taskId: r.task_id, finishedAt: r.finished_at, state: r.state }));
  }

  /** The newest finish time of the run's tasks (ISO), or undefined when none finished. */
  latestFinish(runId: string): string | undefined {
    return this.#latestFinish.get(runId) ?? undefined;
  }

  /** The run's failures grouped by their reason (same text, one row), largest group first. */
  failuresByReason(runId: string): FailureGroup[] {
    const groups = new Map<string, FailureGroup>();
    let scanned = 0;
    for (const state of FAILURE_STATES) {
      for (const row of this.#failures.iterate({ runId, state, limit: FAILURE_SCAN - scanned })) {
        scanned++;
        const reason = row.error ?? `(${state.replace('_', ' ')}, no reason recorded)`;
        let group = groups.get(reason);
        if (group === undefined) {
          group = { reason, states: [], count: 0, tasks: [] };
          groups.set(reason, group);
        }
        group.count++;
        if (!group.states.includes(row.state)) group.states.push(row.state);
        if (group.tasks.length < FAILURE_IDS) group.tasks.push(row.task_id);
      }
    }
    return [...groups.values()].sort((a, b) => b.count - a.count || (a.reason < b.reason ? -1 : 1));
  }

  /** Chained tasks that wait (blocked, or pending with upstreams not done), with what they wait on. */
  blockedChains(runId: string, limit: number): BlockedChain[] {
    return this.#blocked.all({ runId, limit }).map((row) => ({
      task: row.task_id,
      state: row.state,
      after: this.#upstreamsOf
        .all(runId, row.task_id)
        .map((u) => ({ name: u.name, task: u.upstream_id, state: u.state })),
    }));
  }

  upstreamsWithState(runId: string, taskId: string): BlockedChain['after'] {
    return this.#upstreamsOf
      .all(runId, taskId)
      .map((u) => ({ name: u.name, task: u.upstream_id, state: u.state }));
  }

  downstreamsWithState(runId: string, taskId: string): BlockedChain['after'] {
    return this.#downstreamsOf
      .all(runId, taskId)
      .map((u) => ({ name: u.name, task: u.task_id, state: u.state }));
  }

  taskState(runId: string, taskId: string): TaskState | undefined {
    return this.#stateOf.get(runId, taskId);
  }

  /** The in-doubt tasks: how many, their estimates, and the most a `--retry-in-doubt` would charge. */
  inDoubtFigures(runId: string): { tasks: number; tokens: number; max: number } {
    return this.#inDoubt.get(runId) ?? { tasks: 0, tokens: 0, max: 0 };
  }

  /** Cheap signals that the database changed: the data version and the newest row ids. */
  changeSignals(): ChangeSignals {
    const row = this.#signals.get();
    return {
      dataVersion: Number(this.#db.pragma('data_version', { simple: true })),
      ledger: row?.ledger ?? 0,
      files: row?.files ?? 0,
      attempts: row?.attempts ?? 0,
      jobEvents: row?.job_events ?? 0,
    };
  }
}

/** The text fields of a request body that are strings. */
function textOf(body: string): Record<string, string> {
  const out: Record<string, string> = {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return out;
  }
  if (parsed === null || typeof parsed !== 'object') return out;
  for (const field of REQUEST_TEXT_FIELDS) {
    const value = (parsed as Record<string, unknown>)[field];
    if (typeof value === 'string') out[field] = value;
  }
  return out;
}
