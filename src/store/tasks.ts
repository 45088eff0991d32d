import type { TaskOrder } from '../manifest/types.js';
import { toMicro } from '../util/money.js';
import { scrub } from '../util/secrets.js';
import type { ChainStore } from './chains.js';
import type { Db } from './db.js';
import { readSoon, runExpectingChange, StoreError } from './db.js';
import { bodyHash } from './fingerprint.js';
import { tokensTotal } from './micro.js';
import { COPY_ROWS, CopyRows, copyTargetOf } from './pg/bulk.js';
import { unknownRun } from './runs.js';
import { awaitsReviewSql } from './shown-state.js';
import { fromStatesJson, refusedMove, type TaskRow, toTask } from './task-rows.js';
import { toIso } from './time.js';
import { NEVER_CHARGED, REQUEUEABLE, WATCHED } from './transitions.js';
import {
  type ChangedTask,
  type Clock,
  emptyTaskCounts,
  type NewTask,
  type TaskRecord,
  type TaskState,
  type UpsertResult,
  type UpstreamLink,
} from './types.js';

interface ExistingTask {
  task_id: string;
  body_hash: string;
  state: TaskState;
  est_tokens: number;
  est_min: number;
  est_max: number;
  est_basis: string;
  est_assumed: number;
  retries: number;
  file_name: string | null;
  expected_ms: number;
  planned_body: string | null;
  review: number;
}

interface TaskValues {
  runId: string;
  taskId: string;
  model: string;
  endpoint: string;
  body: string;
  bodyHash: string;
  estTokens: number;
  estMin: number;
  estMax: number;
  estBasis: string;
  estAssumed: number;
  retries: number;
  fileName: string | null;
  expectedMs: number;
  review: number;
  now: string;
}

type Key = { runId: string; taskId: string };

/** The estimates of the tasks one upsert inserted, in micro-tokens (as task_counts keeps them). */
interface InsertedEstimate {
  tokens: number;
  min: number;
  max: number;
}

export class TaskStore {
  readonly #now: Clock;
  readonly #upsert;
  readonly #runExists;
  readonly #selectExisting;
  readonly #selectExistingOf;
  readonly #anyTask;
  readonly #selectTaskIds;
  readonly #selectTaskIdPage;
  readonly #selectMaxSeq;
  readonly #insertTask;
  readonly #insertTaskBatch;
  readonly #updateEstimate;
  readonly #updateBodyInPlace;
  readonly #resetTaskWithBody;
  readonly #deleteFilesOfTask;
  readonly #selectTask;
  readonly #selectTaskCharged;
  readonly #selectTaskByImgUuid;
  readonly #selectState;
  readonly #selectTasksOfRun;
  readonly #selectTasksByState;
  readonly #selectPending;
  readonly #forgetReportBasis;
  readonly #countInserted;
  readonly #selectPendingOf;
  readonly #selectReady;
  readonly #selectReadyOf;
  readonly #countByState;
  readonly #selectDue;
  readonly #selectEarliestPoll;
  readonly #notePolled;
  readonly #setNextPoll;
  readonly #markBlocked;
  readonly #unblock;
  readonly #requeue;
  readonly #requeueTasks;
  readonly #markDone;
  readonly #move;
  readonly #setError;
  readonly #pendingByModel;
  readonly #pendingByModelOf;

  readonly #chains: ChainStore;
  /** A PostgreSQL state's way in for a new run's rows (COPY); undefined on SQLite. */
  readonly #copy: CopyRows | undefined;
  /** Updates PostgreSQL's statistics of the tasks table (see upsertTasks); undefined on SQLite. */
  readonly #analyze: (() => void) | undefined;

  // Long on purpose: every statement is prepared once, here, and named for what it does.
  constructor(db: Db, now: Clock, chains: ChainStore) {
    this.#now = now;
    this.#chains = chains;
    const copyTarget = copyTargetOf(db);
    this.#copy = copyTarget && new CopyRows(copyTarget, 'tasks', COPY_COLUMNS);
    // SQLite's ANALYZE would change its own planner's choices: PostgreSQL only. Only the table's owner may
    // count it (any other role gets a WARNING, which libpq prints on stderr): a worker's role that may only
    // read and write skips it, and autovacuum counts the rows a little later.
    this.#analyze =
      copyTarget &&
      (() =>
        void db.exec(`DO $$ BEGIN
          IF pg_has_role((SELECT relowner FROM pg_class WHERE oid = 'tasks'::regclass), 'USAGE') THEN
            ANALYZE tasks;
          END IF;
        END $$`));
    this.#runExists = db.prepare<[string], number>('SELECT 1 FROM runs WHERE id = ?').pluck();
    this.#forgetReportBasis = db.prepare<[string]>('UPDATE runs SET report_basis = NULL WHERE id = ?');
    this.#countInserted = db.prepare<[string, number, number, number, number]>(
      `INSERT INTO task_counts (run_id, state, n, est_micro, est_min_micro, est_max_micro)
       VALUES (?, 'pending', ?, ?, ?, ?)
       ON CONFLICT (run_id, state) DO UPDATE SET n = task_counts.n + excluded.n,
         est_micro = task_counts.est_micro + excluded.est_micro,
         est_min_micro = task_counts.est_min_micro + excluded.est_min_micro,
         est_max_micro = task_counts.est_max_micro + excluded.est_max_micro`,
    );
    // One task at a time through the primary key: a resumed run of a million tasks never holds them all.
    this.#selectExisting = db.prepare<[string, string], ExistingTask>(
      `SELECT task_id, body_hash, state, est_tokens, est_min, est_max, est_basis, est_assumed, retries, file_name, expected_ms,
         planned_body, review
       FROM tasks WHERE run_id = ? AND task_id = ?`,
    );
    // The same for many ids at once, on PostgreSQL only: there each statement is a round trip.
    this.#selectExistingOf = db.prepare<[string, string], ExistingTask>(
      `SELECT task_id, body_hash, state, est_tokens, est_min, est_max, est_basis, est_assumed, retries, file_name, expected_ms,
         planned_body, review
       FROM tasks WHERE run_id = ? AND task_id IN (SELECT value FROM json_each(?))`,
    );
    this.#anyTask = db.prepare<[string], number>('SELECT 1 FROM tasks WHERE run_id = ? LIMIT 1').pluck();
    this.#selectTaskIds = db.prepare<[string], string>('SELECT task_id FROM tasks WHERE run_id = ?').pluck();
    // PostgreSQL hands over a statement's rows all at once: there a run's ids are read a page at a time.
    this.#selectTaskIdPage = {
      first: db
        .prepare<[string, number], string>(
          'SELECT task_id FROM tasks WHERE run_id = ? ORDER BY task_id LIMIT ?',
        )
        .pluck(),
      after: db
        .prepare<[string, string, number], string>(
          'SELECT task_id FROM tasks WHERE run_id = ? AND task_id > ? ORDER BY task_id LIMIT ?',
        )
        .pluck(),
    };
    this.#selectMaxSeq = db
      .prepare<[string], number | null>('SELECT max(seq) FROM tasks WHERE run_id = ?')
      .pluck();
    this.#insertTask = db.prepare<unknown[]>(insertTasksSql(1));
    this.#insertTaskBatch = db.prepare<unknown[]>(insertTasksSql(INSERT_BATCH));
    this.#updateEstimate = db.prepare<[TaskValues]>(
      `UPDATE tasks SET est_tokens = :estTokens, est_min = :estMin, est_max = :estMax, est_basis = :estBasis,
         est_assumed = :estAssumed, retries = :retries, file_name = :fileName, expected_ms = :expectedMs, review = :review,
         updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId`,
    );
    this.#updateBodyInPlace = db.prepare<[TaskValues & { neverCharged: string }]>(
      `UPDATE tasks SET model = :model, endpoint = :endpoint, body = :body, body_hash = :bodyHash,
         est_tokens = :estTokens, est_min = :estMin, est_max = :estMax, est_basis = :estBasis,
         est_assumed = :estAssumed, retries = :retries, file_name = :fileName, expected_ms = :expectedMs, review = :review,
         planned_body = NULL, planned_estimate = NULL, state = 'pending', error = NULL, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state IN (SELECT value FROM json_each(:neverCharged))`,
    );
    // The old job's charge and refund stay in the ledger, keyed by its img_uuid; the task starts afresh.
    this.#resetTaskWithBody = db.prepare<[TaskValues]>(
      `UPDATE tasks SET model = :model, endpoint = :endpoint, body = :body, body_hash = :bodyHash,
         est_tokens = :estTokens, est_min = :estMin, est_max = :estMax, est_basis = :estBasis,
         est_assumed = :estAssumed, retries = :retries, file_name = :fileName, expected_ms = :expectedMs, review = :review,
         planned_body = NULL, planned_estimate = NULL, ${RESET_COLUMNS}, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId`,
    );
    this.#deleteFilesOfTask = db.prepare<[string, string]>(
      'DELETE FROM files WHERE run_id = ? AND task_id = ?',
    );
    this.#selectTask = db.prepare<[string, string], TaskRow>(
      'SELECT * FROM tasks WHERE run_id = ? AND task_id = ?',
    );
    this.#selectTaskCharged = db.prepare<[string, string], TaskRow & { charged_attempts: number }>(
      `SELECT *, (SELECT count(*) FROM attempts AS a WHERE a.run_id = t.run_id AND a.task_id = t.task_id
         AND a.outcome = 'submitted') AS charged_attempts
       FROM tasks AS t WHERE run_id = ? AND task_id = ?`,
    );
    this.#selectTaskByImgUuid = db.prepare<[string], TaskRow>('SELECT * FROM tasks WHERE img_uuid = ?');
    this.#selectState = db
      .prepare<[string, string], TaskState>('SELECT state FROM tasks WHERE run_id = ? AND task_id = ?')
      .pluck();
    this.#selectTasksOfRun = db.prepare<[string], TaskRow>(
      'SELECT * FROM tasks WHERE run_id = ? ORDER BY seq',
    );
    this.#selectTasksByState = db.prepare<[string, string], TaskRow>(
      `SELECT * FROM tasks WHERE run_id = ? AND state IN (SELECT value FROM json_each(?)) ORDER BY seq`,
    );
    // `waits = 0` holds for every task of a run without chains, so the longest-first reads are one statement
    // for both, and it lets the index give the order.
    const readyLongest = db.prepare<[string, number], TaskRow>(
      `SELECT * FROM tasks WHERE run_id = ? AND state = 'pending' AND waits = 0 ORDER BY expected_ms DESC, seq LIMIT ?`,
    );
    const readyLongestOf = db.prepare<[string, string, number], TaskRow>(
      `SELECT * FROM tasks WHERE run_id = ? AND state = 'pending' AND waits = 0
         AND task_id IN (SELECT value FROM json_each(?)) ORDER BY expected_ms DESC, seq LIMIT ?`,
    );
    this.#selectPending = {
      manifest: db.prepare<[string, number], TaskRow>(
        `SELECT * FROM tasks WHERE run_id = ? AND state = 'pending' ORDER BY seq LIMIT ?`,
      ),
      longest: readyLongest,
    };
    // A chained task goes only when every task it waits for is done: `waits` (migration 9) counts the
    // others, kept by triggers, so the ready ones are an index range however many wait (longest first), or
    // found inside the state index (manifest order).
    this.#selectReady = {
      manifest: db.prepare<[string, number], TaskRow>(
        `SELECT * FROM tasks WHERE run_id = ? AND state = 'pending' AND waits = 0 ORDER BY seq LIMIT ?`,
      ),
      longest: readyLongest,
    };
    this.#selectReadyOf = {
      manifest: db.prepare<[string, string, number], TaskRow>(
        `SELECT * FROM tasks WHERE run_id = ? AND state = 'pending' AND waits = 0
           AND task_id IN (SELECT value FROM json_each(?)) ORDER BY seq LIMIT ?`,
      ),
      longest: readyLongestOf,
    };
    this.#selectPendingOf = {
      manifest: db.prepare<[string, string, number], TaskRow>(
        `SELECT * FROM tasks WHERE run_id = ? AND state = 'pending'
           AND task_id IN (SELECT value FROM json_each(?)) ORDER BY seq LIMIT ?`,
      ),
      longest: readyLongestOf,
    };
    // Kept by triggers (migration 5): a handful of rows, whatever the size of the run. The pending tasks
    // shown as awaiting_review come in the same statement (one round trip to a PostgreSQL server), found
    // from the reviewed upstreams that have a result and no decision (the partial index tasks_reviewed),
    // never by a scan of the run's pending tasks; only for a run that has pending tasks.
    this.#countByState = db.prepare<[string], { state: TaskState; n: number; awaiting: number }>(
      `SELECT c.state, c.n, CASE WHEN c.state = 'pending' AND c.n > 0 THEN (
         SELECT count(DISTINCT t.task_id) FROM tasks AS up INDEXED BY tasks_reviewed
         JOIN task_upstreams AS u ON u.run_id = up.run_id AND u.upstream_id = up.task_id
         JOIN tasks AS t ON t.run_id = u.run_id AND t.task_id = u.task_id
         WHERE up.run_id = c.run_id AND up.review = 1 AND up.state = 'done' AND up.verdict IS NULL
           AND ${awaitsReviewSql('t')}) ELSE 0 END AS awaiting
       FROM task_counts AS c WHERE c.run_id = ?`,
    );
    this.#selectDue = db.prepare<[string, string, number], TaskRow>(
      `SELECT * FROM tasks
       WHERE run_id = ? AND state IN (${WATCHED_SQL}) AND (next_poll_at IS NULL OR next_poll_at <= ?)
       ORDER BY next_poll_at NULLS FIRST, seq LIMIT ?`,
    );
    this.#selectEarliestPoll = db
      .prepare<[string], string | null>(
        `SELECT min(coalesce(next_poll_at, '')) FROM tasks WHERE run_id = ? AND state IN (${WATCHED_SQL})`,
      )
      .pluck();
    this.#notePolled = db.prepare<{ runId: string; taskId: string; now: string; next: string }>(
      `UPDATE tasks SET last_polled_at = :now, poll_count = poll_count + 1, next_poll_at = :next, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId`,
    );
    this.#setNextPoll = db.prepare<{ runId: string; taskId: string; now: string; next: string }>(
      `UPDATE tasks SET next_poll_at = :next, updated_at = :now WHERE run_id = :runId AND task_id = :taskId`,
    );
    this.#markBlocked = db.prepare<Key & { reason: string; now: string; from: string }>(
      `UPDATE tasks SET state = 'blocked', error = :reason, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state IN (SELECT value FROM json_each(:from))`,
    );
    this.#unblock = db.prepare<Key & { now: string }>(
      `UPDATE tasks SET state = 'pending', error = NULL, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state = 'blocked'`,
    );
    this.#requeue = db.prepare<Key & { now: string; from: string }>(
      `UPDATE tasks SET ${RESET_COLUMNS}, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state IN (SELECT value FROM json_each(:from))`,
    );
    this.#requeueTasks = db.transaction(
      (runId: string, taskIds: readonly string[], from: string): string[] => {
        const now = toIso(this.#now());
        return taskIds.filter((taskId) => {
          if (this.#requeue.run({ runId, taskId, now, from }).changes === 0) return false;
          this.#deleteFilesOfTask.run(runId, taskId);
          return true;
        });
      },
    );
    this.#markDone = db.prepare<Key & { now: string; from: string }>(
      `UPDATE tasks SET state = 'done', error = NULL, finished_at = :now, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state IN (SELECT value FROM json_each(:from))`,
    );
    this.#move = db.prepare<
      Key & { to: TaskState; error: string | null; ends: number; now: string; from: string }
    >(
      `UPDATE tasks SET state = :to, error = :error, updated_at = :now,
         finished_at = CASE WHEN :ends = 1 THEN :now ELSE finished_at END
       WHERE run_id = :runId AND task_id = :taskId AND state IN (SELECT value FROM json_each(:from))`,
    );
    this.#pendingByModel = db.prepare<
      [string],
      { model: string; tasks: number; tokens: number; min: number; max: number }
    >(
      `SELECT model, count(*) AS tasks, ${tokensTotal('est_tokens')} AS tokens,
         ${tokensTotal('est_min')} AS min, ${tokensTotal('est_max')} AS max
       FROM tasks WHERE run_id = ? AND state = 'pending' GROUP BY model ORDER BY min(seq)`,
    );
    // The same, for the tasks a run will really submit: some ids only, the first n only.
    // The order must be the submitter's, so that `--limit N` prices the N tasks it will submit.
    const pendingOf = (order: string) =>
      db.prepare<
        [string, number, string | null, number],
        { model: string; tasks: number; tokens: number; min: number; max: number }
      >(
        `SELECT model, count(*) AS tasks, ${tokensTotal('est_tokens')} AS tokens,
         ${tokensTotal('est_min')} AS min, ${tokensTotal('est_max')} AS max
         FROM (SELECT * FROM tasks WHERE run_id = ? AND state = 'pending'
                 AND (? = 0 OR task_id IN (SELECT value FROM json_each(?))) ORDER BY ${order} LIMIT ?) AS chosen
         GROUP BY model ORDER BY min(seq)`,
      );
    this.#pendingByModelOf = { manifest: pendingOf('seq'), longest: pendingOf('expected_ms DESC, seq') };
    this.#setError = db.prepare<Key & { error: string | null; now: string }>(
      'UPDATE tasks SET error = :error, updated_at = :now WHERE run_id = :runId AND task_id = :taskId',
    );
    this.#upsert = db.transaction(
      (runId: string, specs: Iterable<NewTask>, acceptChanges: boolean, allNew: boolean) =>
        this.#upsertInTransaction(runId, specs, acceptChanges, allNew),
    );
  }

  /**
   * Records the manifest's tasks for a run, in one transaction. New tasks are inserted as pending;
   * unchanged ones are left alone (only their estimate is refreshed); see UpsertResult for changed ones.
   */
  upsertTasks(
    runId: string,
    specs: Iterable<NewTask>,
    opts: { acceptChanges?: boolean; allNew?: boolean } = {},
  ): UpsertResult {
    const result = this.#upsert.immediate(runId, specs, opts.acceptChanges ?? false, opts.allNew ?? false);
    // PostgreSQL plans each statement by what it last counted of the table: for a new state nothing, for
    // a new run of thousands of tasks far too few. With a run's tasks counted as a handful, the move of one
    // task (`WHERE run_id AND task_id AND state = 'pending'`) went through the state index and read every
    // pending task of the run, once per submission. Counted again once a run's first rows are in (the
    // rows stored later while it runs change little: autovacuum counts those).
    if (this.#analyze !== undefined && opts.allNew !== true && result.inserted > 0) this.#analyze();
    return result;
  }

  /**
   * `allNew`: the caller knows none of these tasks is stored (the later rows of a new run stored while it
   * runs): no look-up per task, as for a new run; the primary key still refuses a duplicate.
   */
  #upsertInTransaction(
    runId: string,
    specs: Iterable<NewTask>,
    acceptChanges: boolean,
    allNew: boolean,
  ): UpsertResult {
    if (this.#runExists.get(runId) === undefined) throw unknownRun(runId);
    // A new run has no tasks to compare with: no look-up per task.
    const resumed = !allNew && this.#anyTask.get(runId) !== undefined;
    const hadChains = resumed && this.#chains.hasChains(runId);
    // A resumed run needs every id to find the tasks the manifest no longer lists; a new run does not, and
    // its primary key refuses a duplicate: no set of a million ids.
    const seen = resumed ? new Set<string>() : undefined;
    const now = toIso(this.#now());
    let nextSeq = (this.#selectMaxSeq.get(runId) ?? -1) + 1;
    const result: UpsertResult = { inserted: 0, unchanged: 0, updated: [], changed: [], missing: [] };
    const batch: unknown[] = [];
    let touched = false;
    // Upstream rows reference their task, so they are written once the batches of new tasks are in.
    const links: Array<[string, UpstreamLink[]]> = [];
    const resetIds: string[] = [];
    const inserted: InsertedEstimate = { tokens: 0, min: 0, max: 0 };

    // A new run's rows go to PostgreSQL by COPY, streamed while the next ones are made: nothing else is read
    // or written on the connection meanwhile (a resumed run looks each task up, and inserts as SQLite does).
    const copy = resumed ? undefined : this.#copy;
    const copied: string[] = [];
    try {
      for (const { spec, old } of this.#withStored(runId, specs, resumed)) {
        if (seen?.has(spec.taskId)) throw listedTwice(runId, spec.taskId);
        seen?.add(spec.taskId);
        const values = taskValues(runId, spec, now);
        // Links are written for chained tasks, and rewritten on resume only in a run that has chains: a
        // task may have lost its `after`. A run without any costs nothing here, at any size.
        if (spec.upstreams !== undefined || (old !== undefined && hadChains)) {
          links.push([
            spec.taskId,
            (spec.upstreams ?? []).map(({ name, taskId }) => ({ name, upstreamId: taskId })),
          ]);
        }
        if (old === undefined) {
          if (copy !== undefined) this.#copyRow(runId, copy, copied, copyValues(values, nextSeq++));
          else {
            pushInsertParams(batch, values, nextSeq++);
            if (batch.length === INSERT_BATCH * INSERT_COLUMNS)
              this.#insertRows(runId, this.#insertTaskBatch, batch.splice(0));
          }
          result.inserted++;
          inserted.tokens += toMicro(values.estTokens);
          inserted.min += toMicro(values.estMin);
          inserted.max += toMicro(values.estMax);
        } else if (this.#storedAgain(old, values, { acceptChanges, result, resetIds })) {
          touched = true;
        }
      }
    } catch (error) {
      copy?.abort(`mediabatch stopped storing the run's tasks: ${(error as Error).message}`);
      throw error;
    }
    if (copy !== undefined) this.#endCopy(runId, copy, copied);
    this.#finishUpsert(runId, { batch, links, resetIds, result, now, touched, seen, inserted, resumed });
    return result;
  }

  /**
   * Each spec with the task stored under its id, if any (only a resumed run has some). SQLite reads them one
   * at a time; PostgreSQL a thousand ids a statement, as a round trip each would take minutes at a million.
   */
  *#withStored(
    runId: string,
    specs: Iterable<NewTask>,
    resumed: boolean,
  ): Generator<{ spec: NewTask; old: ExistingTask | undefined }> {
    if (!resumed) {
      for (const spec of specs) yield { spec, old: undefined };
      return;
    }
    if (this.#copy === undefined) {
      for (const spec of specs) yield { spec, old: this.#selectExisting.get(runId, spec.taskId) };
      return;
    }
    let group: NewTask[] = [];
    for (const spec of specs) {
      group.push(spec);
      if (group.length < LOOKUP_GROUP) continue;
      yield* this.#lookUp(runId, group);
      group = [];
    }
    yield* this.#lookUp(runId, group);
  }

  *#lookUp(runId: string, specs: NewTask[]): Generator<{ spec: NewTask; old: ExistingTask | undefined }> {
    if (specs.length === 0) return;
    const stored = new Map<string, ExistingTask>();
    const ids = JSON.stringify(specs.map((s) => s.taskId));
    for (const row of this.#selectExistingOf.iterate(runId, ids)) stored.set(row.task_id, row);
    for (const spec of specs) yield { spec, old: stored.get(spec.taskId) };
  }

  /** A task the run has stored, listed again: left, refreshed, updated or changed. Whether it was touched. */
  #storedAgain(
    old: ExistingTask,
    values: TaskValues,
    o: { acceptChanges: boolean; result: UpsertResult; resetIds: string[] },
  ): boolean {
    // A filled-in chained task is compared with the request it was planned with, not the one it sent.
    const plannedHash = old.planned_body == null ? old.body_hash : bodyHash(old.planned_body);
    if (plannedHash === values.bodyHash) {
      o.result.unchanged++;
      // A filled-in task's estimate is its exact price: the plan's range does not replace it.
      if (old.planned_body !== null || !estimateDiffers(old, values)) return false;
      this.#updateEstimate.run(values);
      return true;
    }
    if (NEVER_CHARGED.includes(old.state)) {
      this.#updateBodyInPlace.run({ ...values, neverCharged: JSON.stringify(NEVER_CHARGED) });
      o.result.updated.push(values.taskId);
      return false;
    }
    const changed: ChangedTask = {
      taskId: values.taskId,
      state: old.state,
      oldHash: plannedHash,
      newHash: values.bodyHash,
    };
    o.result.changed.push(changed);
    if (!o.acceptChanges) return false;
    this.#resetTaskWithBody.run(values);
    this.#deleteFilesOfTask.run(values.runId, values.taskId);
    o.resetIds.push(values.taskId);
    return true;
  }

  /** After the rows are read: the last batch, the chains' links, resets downstream, counts, and the ids no longer listed. */
  #finishUpsert(
    runId: string,
    o: {
      batch: unknown[];
      links: Array<[string, UpstreamLink[]]>;
      resetIds: string[];
      result: UpsertResult;
      now: string;
      touched: boolean;
      seen: Set<string> | undefined;
      inserted: InsertedEstimate;
      resumed: boolean;
    },
  ): void {
    const { batch, result } = o;
    for (let i = 0; i < batch.length; i += INSERT_COLUMNS) {
      this.#insertRows(runId, this.#insertTask, batch.slice(i, i + INSERT_COLUMNS));
    }
    // A new run's tasks have no links stored: they are only added (on PostgreSQL, by COPY).
    if (!o.resumed) this.#chains.addUpstreamsOfNew(runId, o.links);
    else for (const [taskId, upstreams] of o.links) this.#chains.setUpstreams(runId, taskId, upstreams);
    if (o.resetIds.length > 0) this.#resetDownstreams(runId, o.resetIds, result, o.now);
    // Counted and summed here rather than by a trigger per row (migrations 5 and 15): every task is
    // inserted pending.
    if (result.inserted > 0) {
      const { tokens, min, max } = o.inserted;
      this.#countInserted.run(runId, result.inserted, tokens, min, max);
    }
    // A task added or re-estimated is news the report on disk does not have.
    if (o.touched || result.inserted > 0 || result.updated.length > 0) this.#forgetReportBasis.run(runId);
    if (o.seen) {
      for (const taskId of this.#storedIds(runId)) if (!o.seen.has(taskId)) result.missing.push(taskId);
    }
  }

  /** The ids of the run's stored tasks: as SQLite steps through them, or a page at a time on PostgreSQL. */
  *#storedIds(runId: string): Generator<string> {
    if (this.#copy === undefined) {
      yield* this.#selectTaskIds.iterate(runId);
      return;
    }
    let page = this.#selectTaskIdPage.first.all(runId, ID_PAGE);
    for (;;) {
      yield* page;
      const last = page.at(-1);
      if (page.length < ID_PAGE || last === undefined) return;
      page = this.#selectTaskIdPage.after.all(runId, last, ID_PAGE);
    }
  }

  /** New tasks' rows; an id already taken (stored, or earlier in these rows) is named, as a set would have. */
  #insertRows(runId: string, insert: { run(params: unknown[]): unknown }, params: unknown[]): void {
    try {
      insert.run(params);
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_CONSTRAINT_PRIMARYKEY') throw error;
      const taskIds: string[] = [];
      for (let i = 1; i < params.length; i += INSERT_COLUMNS) taskIds.push(params[i] as string);
      this.#throwListedTwice(runId, taskIds);
      throw error;
    }
  }

  /** One new row into the open copy; every COPY_ROWS rows the copy ends (and a new one opens at the next). */
  #copyRow(runId: string, copy: CopyRows, copied: string[], values: unknown[]): void {
    copy.add(values as Parameters<CopyRows['add']>[0]);
    copied.push(values[1] as string);
    if (copied.length === COPY_ROWS) this.#endCopy(runId, copy, copied);
  }

  /** Ends the copy: its rows are in, or an id it repeats (of these rows or a stored task) is named. */
  #endCopy(runId: string, copy: CopyRows, copied: string[]): void {
    try {
      copy.end();
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_CONSTRAINT_PRIMARYKEY') throw error;
      this.#throwListedTwice(runId, copied);
      throw error;
    } finally {
      copied.length = 0;
    }
  }

  /** The first of `taskIds` that an earlier one or a stored task already has, as the error it is. */
  #throwListedTwice(runId: string, taskIds: Iterable<string>): void {
    const earlier = new Set<string>();
    for (const taskId of taskIds) {
      if (earlier.has(taskId) || this.#selectExisting.get(runId, taskId) !== undefined) {
        throw listedTwice(runId, taskId);
      }
      earlier.add(taskId);
    }
  }

  /**
   * Upstreams submitted anew (`--accept-changes`) make new results, so their downstreams need them: a
   * downstream not yet charged goes back to its planned request; a charged one is changed too, reset.
   */
  #resetDownstreams(runId: string, resetIds: readonly string[], result: UpsertResult, now: string): void {
    const handled = new Set([...resetIds, ...result.updated]);
    for (const upstreamId of resetIds) {
      for (const taskId of this.#chains.downstreamsOf(runId, upstreamId)) {
        if (handled.has(taskId)) continue;
        handled.add(taskId);
        const task = this.#selectTask.get(runId, taskId);
        if (task === undefined) continue;
        if (NEVER_CHARGED.includes(task.state)) {
          this.#chains.restorePlanned(runId, taskId);
          continue;
        }
        result.changed.push({ taskId, state: task.state, oldHash: task.body_hash, newHash: task.body_hash });
        this.#chains.restorePlanned(runId, taskId);
        this.#requeue.run({ runId, taskId, now, from: JSON.stringify([task.state]) });
        this.#deleteFilesOfTask.run(runId, taskId);
      }
    }
  }

  getTask(runId: string, taskId: string): TaskRecord | undefined {
    const row = this.#selectTask.get(runId, taskId);
    return row === undefined ? undefined : toTask(row);
  }

  /**
   * The task and how many of its jobs were accepted (and charged) so far, across retries, in one read:
   * what the runner says of a submission it just recorded as accepted. Read when the returned function
   * is called: after the commit of the transaction that asked, it came in the commit's round trip on
   * PostgreSQL (readSoon).
   */
  taskWithChargesSoon(
    runId: string,
    taskId: string,
  ): () => { task: TaskRecord; chargedAttempts: number } | undefined {
    const soon = readSoon(this.#selectTaskCharged, runId, taskId);
    return () => {
      const row = soon();
      return row === undefined ? undefined : { task: toTask(row), chargedAttempts: row.charged_attempts };
    };
  }

  getTaskByImgUuid(imgUuid: string): TaskRecord | undefined {
    const row = this.#selectTaskByImgUuid.get(imgUuid);
    return row === undefined ? undefined : toTask(row);
  }

  /** Every task of the run, in manifest order. */
  tasksOfRun(runId: string): TaskRecord[] {
    return this.#selectTasksOfRun.all(runId).map(toTask);
  }

  tasksByState(runId: string, states: readonly TaskState[]): TaskRecord[] {
    return this.#selectTasksByState.all(runId, JSON.stringify(states)).map(toTask);
  }

  /**
   * The next pending tasks to submit: the longest expected jobs first, or in manifest order. A chained
   * task is among them only once every task it waits for is done.
   */
  nextPending(
    runId: string,
    limit: number,
    only?: readonly string[],
    order: TaskOrder = 'longest',
  ): TaskRecord[] {
    const chained = this.#chains.hasChains(runId);
    const rows =
      only === undefined
        ? (chained ? this.#selectReady : this.#selectPending)[order].all(runId, limit)
        : (chained ? this.#selectReadyOf : this.#selectPendingOf)[order].all(
            runId,
            JSON.stringify(only),
            limit,
          );
    return rows.map(toTask);
  }

  /**
   * Every state with its count (zero included), as shown: the pending tasks that wait for a person's
   * approval of a reviewed upstream counted as `awaiting_review` (src/store/shown-state.ts).
   */
  countTasksByState(runId: string): Record<TaskState, number> {
    const counts = emptyTaskCounts();
    let awaiting = 0;
    for (const row of this.#countByState.iterate(runId)) {
      counts[row.state] = row.n;
      if (row.state === 'pending') awaiting = row.awaiting;
    }
    if (awaiting > 0) {
      counts.pending -= awaiting;
      counts.awaiting_review = awaiting;
    }
    return counts;
  }

  /** What is left to submit, per model in manifest order: counts and summed estimates, without loading rows. */
  pendingByModel(
    runId: string,
    subset: { only?: readonly string[]; limit?: number; order?: TaskOrder } = {},
  ): { model: string; tasks: number; tokens: number; min: number; max: number }[] {
    if (subset.only === undefined && subset.limit === undefined) return this.#pendingByModel.all(runId);
    const only = subset.only === undefined ? null : JSON.stringify(subset.only);
    const query = this.#pendingByModelOf[subset.order ?? 'longest'];
    // No limit is the largest one both backends read (PostgreSQL refuses SQLite's -1).
    return query.all(runId, only === null ? 0 : 1, only, subset.limit ?? Number.MAX_SAFE_INTEGER);
  }

  /** Submitted or running tasks whose next poll is due (never polled first), at most `limit`. */
  tasksToWatch(runId: string, limit = 1_000): TaskRecord[] {
    return this.#selectDue.all(runId, toIso(this.#now()), limit).map(toTask);
  }

  /** When the next poll of the run falls due; null when nothing is watched, `now` when one never was polled. */
  nextPollAt(runId: string): Date | null {
    const earliest = this.#selectEarliestPoll.get(runId);
    if (earliest === null || earliest === undefined) return null;
    return earliest === '' ? this.#now() : new Date(earliest);
  }

  /** A poll happened now; the next one is due at `nextPollAt`. */
  notePolled(runId: string, taskId: string, nextPollAt: Date): void {
    runExpectingChange(
      this.#notePolled,
      { runId, taskId, now: toIso(this.#now()), next: toIso(nextPollAt) },
      () => {
        throw refusedMove(undefined, runId, taskId, 'running');
      },
    );
  }

  /** Moves the next poll, e.g. slows polling to the fallback while callbacks arrive. */
  setNextPoll(runId: string, taskId: string, at: Date): void {
    runExpectingChange(this.#setNextPoll, { runId, taskId, now: toIso(this.#now()), next: toIso(at) }, () => {
      throw refusedMove(undefined, runId, taskId, 'running');
    });
  }

  /** A pending task that cannot be submitted until the user acts (the reason says what to do). */
  markBlocked(runId: string, taskId: string, reason: string): void {
    const from = fromStatesJson('blocked');
    if (this.#markBlocked.run({ runId, taskId, reason, now: toIso(this.#now()), from }).changes === 0) {
      throw refusedMove(this.#selectState.get(runId, taskId), runId, taskId, 'blocked');
    }
  }

  unblock(runId: string, taskId: string): void {
    if (this.#unblock.run({ runId, taskId, now: toIso(this.#now()) }).changes === 0) {
      throw refusedMove(this.#selectState.get(runId, taskId), runId, taskId, 'pending');
    }
  }

  /**
   * Sends tasks back to pending on the user's request (`--retry-in-doubt`: `['in_doubt']`), forgetting
   * their job and files; their charges stay in the ledger. Returns the ids that were requeued.
   */
  requeueTasks(
    runId: string,
    taskIds: readonly string[],
    from: readonly TaskState[] = REQUEUEABLE,
  ): string[] {
    const allowed = from.filter((s) => REQUEUEABLE.includes(s));
    return this.#requeueTasks.immediate(runId, taskIds, JSON.stringify(allowed));
  }

  /** Every file of the task is on disk. */
  markDone(runId: string, taskId: string): void {
    runExpectingChange(
      this.#markDone,
      { runId, taskId, now: toIso(this.#now()), from: fromStatesJson('done') },
      () => {
        throw refusedMove(this.#selectState.get(runId, taskId), runId, taskId, 'done');
      },
    );
  }

  /**
   * Moves a task along its life cycle outside the submission and job-status paths: `stalled` (past its
   * deadline), `unfetched` (paid, result not on disk yet), `downloading` (trying the files again),
   * `lost` (paid, and the service no longer has the result). The reason is kept as the task's error.
   */
  moveTask(
    runId: string,
    taskId: string,
    to: 'stalled' | 'unfetched' | 'downloading' | 'lost',
    reason: string | null,
  ): void {
    const ends = to === 'lost' ? 1 : 0;
    const from = fromStatesJson(to);
    if (
      this.#move.run({
        runId,
        taskId,
        to,
        error: reason === null ? null : scrub(reason),
        ends,
        now: toIso(this.#now()),
        from,
      }).changes === 0
    ) {
      throw refusedMove(this.#selectState.get(runId, taskId), runId, taskId, to);
    }
  }

  /** Notes a problem (e.g. a download retry) without changing the task's state; null clears it. */
  setTaskError(runId: string, taskId: string, error: string | null): void {
    if (
      this.#setError.run({
        runId,
        taskId,
        error: error === null ? null : scrub(error),
        now: toIso(this.#now()),
      }).changes === 0
    ) {
      throw refusedMove(undefined, runId, taskId, 'pending');
    }
  }
}

// Written into the SQL as literals, as the partial index tasks_due_for_poll is: SQLite uses that index only
// for a query whose state list it can match, which a bound json_each list is not.
const WATCHED_SQL = WATCHED.map((s) => `'${s}'`).join(', ');

/** What a task forgets when it starts over: its job, its answer, its polling. */
const RESET_COLUMNS = `state = 'pending', verdict = NULL, img_uuid = NULL, cost = NULL, cost_assumed = 0, recovered = 0,
  refunded = NULL, error = NULL,
  submitted_at = NULL, finished_at = NULL, job_status = NULL, job_duration = NULL, last_polled_at = NULL,
  next_poll_at = NULL, poll_count = 0, source = NULL`;

function listedTwice(runId: string, taskId: string): StoreError {
  return new StoreError(`run ${runId}: task ${taskId}: listed twice: task ids must be unique`);
}

/** Rows per INSERT statement when adding many tasks: fewer statements, far under SQLite's parameter limit. */
const INSERT_BATCH = 100;
const INSERT_COLUMNS = 17;
/** Ids a resumed run looks up per statement on PostgreSQL. */
const LOOKUP_GROUP = 1_000;
/** Ids read per statement on PostgreSQL when a resumed run looks for the tasks its manifest no longer lists. */
const ID_PAGE = 10_000;
/** The columns of a copied row: those of insertTasksSql in pushInsertParams's order, then the state. */
const COPY_COLUMNS = [
  'run_id',
  'task_id',
  'seq',
  'model',
  'endpoint',
  'body',
  'body_hash',
  'est_tokens',
  'est_min',
  'est_max',
  'est_basis',
  'est_assumed',
  'updated_at',
  'retries',
  'file_name',
  'expected_ms',
  'review',
  'state',
];

function insertTasksSql(rows: number): string {
  const row = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?)`;
  return `INSERT INTO tasks (run_id, task_id, seq, model, endpoint, body, body_hash,
    est_tokens, est_min, est_max, est_basis, est_assumed, state, updated_at, retries, file_name, expected_ms, review)
    VALUES ${Array.from({ length: rows }, () => row).join(', ')}`;
}

/** Appends one task's INSERT_COLUMNS parameters, in the column order of insertTasksSql. */
function pushInsertParams(params: unknown[], v: TaskValues, seq: number): void {
  params.push(v.runId, v.taskId, seq, v.model, v.endpoint, v.body, v.bodyHash);
  params.push(v.estTokens, v.estMin, v.estMax, v.estBasis, v.estAssumed, v.now, v.retries, v.fileName);
  params.push(v.expectedMs, v.review);
}

/** One task's row for COPY_COLUMNS: every new task starts pending. */
function copyValues(v: TaskValues, seq: number): unknown[] {
  const row: unknown[] = [];
  pushInsertParams(row, v, seq);
  row.push('pending');
  return row;
}

function taskValues(runId: string, spec: NewTask, now: string): TaskValues {
  // A key pasted into a prompt is not kept (nor sent): the stored body is what the runner sends.
  const body = scrub(spec.wireBody);
  return {
    runId,
    taskId: spec.taskId,
    model: spec.model,
    endpoint: spec.endpoint,
    body,
    bodyHash: bodyHash(body),
    estTokens: spec.estimate.tokens,
    estMin: spec.estimate.min,
    estMax: spec.estimate.max,
    estBasis: spec.estimate.basis,
    estAssumed: spec.estimate.assumedPrice ? 1 : 0,
    retries: spec.retries ?? 0,
    fileName: spec.fileName ?? null,
    expectedMs: Math.max(0, Math.round(spec.expectedMs ?? 0)),
    review: spec.review === true ? 1 : 0,
    now,
  };
}

function estimateDiffers(old: ExistingTask, values: TaskValues): boolean {
  return (
    old.est_tokens !== values.estTokens ||
    old.est_min !== values.estMin ||
    old.est_max !== values.estMax ||
    old.est_basis !== values.estBasis ||
    old.est_assumed !== values.estAssumed ||
    old.retries !== values.retries ||
    old.file_name !== values.fileName ||
    old.expected_ms !== values.expectedMs ||
    old.review !== values.review
  );
}
