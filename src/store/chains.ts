// Chains in the store: which tasks a task waits for (`task_upstreams`, migration 7), the
// request filled in just before it is sent (the planned one kept beside it), and the `blocked` state of
// a task whose upstream will not give it a result in this run.

import type { Estimate } from '../catalog/types.js';
import { scrub } from '../util/secrets.js';
import type { Db } from './db.js';
import { bodyHash } from './fingerprint.js';
import { COPY_ROWS, CopyRows, copyTargetOf } from './pg/bulk.js';
import { refusedMove, type TaskRow, toTask } from './task-rows.js';
import { toIso } from './time.js';
import type { Clock, TaskRecord, TaskState, UpstreamLink } from './types.js';

/** Upstream states that give a downstream nothing in this run: it is blocked, never submitted. */
export const BLOCKING_STATES: readonly TaskState[] = [
  'failed',
  'rejected',
  'in_doubt',
  'lost',
  'blocked',
  'unfetched',
];
/** Upstream states of a job on its way: a downstream waits for them in this run. */
const ACTIVE_STATES: readonly TaskState[] = [
  'submitting',
  'submitted',
  'running',
  'stalled',
  'downloading',
  'unfetched',
];
/** Of those, the ones a new run cannot mend by itself (an unfetched result is fetched again at its start). */
const STILL_BLOCKING: readonly TaskState[] = ['failed', 'rejected', 'in_doubt', 'lost', 'blocked'];

/** Tasks whose upstream is not done, with that upstream: what a run may wait for. */
export interface WaitingOn {
  taskId: string;
  upstreamId: string;
  /** Null when the run has no such task (the manifest no longer makes it). */
  upstreamState: TaskState | null;
  upstreamError: string | null;
}

export class ChainStore {
  readonly #now: Clock;
  readonly #insertUpstream;
  readonly #deleteUpstreams;
  readonly #anyUpstream;
  readonly #upstreamsOf;
  readonly #upstreamsOfRun;
  readonly #downstreamsOf;
  readonly #waitingOnBlocking;
  readonly #waitingOnActive;
  readonly #blockedWithUpstreams;
  readonly #markBlocked;
  readonly #unblock;
  readonly #fillIn;
  readonly #rejectUnsent;
  readonly #selectTask;
  readonly #restorePlanned;
  readonly #waitingOnRejected;
  readonly #markSkipped;
  /** A PostgreSQL state's way in for a new run's links (COPY); undefined on SQLite. */
  readonly #copy: CopyRows | undefined;

  // Long on purpose: every statement is prepared once, here, and named for what it does.
  constructor(db: Db, now: Clock) {
    const copyTarget = copyTargetOf(db);
    this.#copy =
      copyTarget && new CopyRows(copyTarget, 'task_upstreams', ['run_id', 'task_id', 'name', 'upstream_id']);
    this.#now = now;
    this.#insertUpstream = db.prepare<[string, string, string, string]>(
      'INSERT INTO task_upstreams (run_id, task_id, name, upstream_id) VALUES (?, ?, ?, ?)',
    );
    this.#deleteUpstreams = db.prepare<[string, string]>(
      'DELETE FROM task_upstreams WHERE run_id = ? AND task_id = ?',
    );
    this.#anyUpstream = db
      .prepare<[string], number>('SELECT 1 FROM task_upstreams WHERE run_id = ? LIMIT 1')
      .pluck();
    this.#upstreamsOf = db.prepare<[string, string], { name: string; upstreamId: string }>(
      'SELECT name, upstream_id AS upstreamId FROM task_upstreams WHERE run_id = ? AND task_id = ? ORDER BY name',
    );
    this.#upstreamsOfRun = db.prepare<[string], { taskId: string; name: string; upstreamId: string }>(
      'SELECT task_id AS taskId, name, upstream_id AS upstreamId FROM task_upstreams WHERE run_id = ? ORDER BY task_id, name',
    );
    this.#downstreamsOf = db
      .prepare<[string, string], string>(
        'SELECT task_id FROM task_upstreams WHERE run_id = ? AND upstream_id = ?',
      )
      .pluck();
    // From the upstreams' side, through the state index: the few upstreams in a given state with a
    // pending downstream, however many downstreams wait.
    const fromUpstreams = (states: readonly string[]) =>
      db.prepare<[string], WaitingOn>(
        `SELECT t.task_id AS taskId, up.task_id AS upstreamId, up.state AS upstreamState, up.error AS upstreamError
         FROM tasks up
         JOIN task_upstreams u ON u.run_id = up.run_id AND u.upstream_id = up.task_id
         JOIN tasks t ON t.run_id = u.run_id AND t.task_id = u.task_id
         WHERE up.run_id = ? AND up.state IN (${states.map((x) => `'${x}'`).join(', ')}) AND t.state = 'pending'
         ORDER BY t.seq`,
      );
    // Downstreams of a result the user rejected, or of a task skipped for that: with the
    // rejection (who, note) their reason names.
    this.#waitingOnRejected = db.prepare<
      [string],
      { taskId: string; upstreamId: string; upstreamState: TaskState; by: string | null; note: string | null }
    >(
      `SELECT t.task_id AS taskId, up.task_id AS upstreamId, up.state AS upstreamState,
         d.decided_by AS by, d.note AS note
       FROM tasks up
       JOIN task_upstreams u ON u.run_id = up.run_id AND u.upstream_id = up.task_id
       JOIN tasks t ON t.run_id = u.run_id AND t.task_id = u.task_id
       LEFT JOIN decisions d ON d.id = (SELECT max(id) FROM decisions x
         WHERE x.run_id = up.run_id AND x.task_id = up.task_id AND x.verdict = 'reject')
       WHERE up.run_id = ? AND t.state IN ('pending', 'blocked')
         AND ((up.state = 'done' AND up.review = 1 AND up.verdict = 'rejected') OR up.state = 'skipped')
       ORDER BY t.seq`,
    );
    this.#markSkipped = db.prepare<{ runId: string; taskId: string; reason: string; now: string }>(
      `UPDATE tasks SET state = 'skipped', error = :reason, finished_at = :now, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state IN ('pending', 'blocked')`,
    );
    this.#waitingOnBlocking = fromUpstreams(BLOCKING_STATES);
    this.#waitingOnActive = fromUpstreams(ACTIVE_STATES);
    this.#blockedWithUpstreams = db.prepare<[string], { taskId: string; upstreamState: TaskState | null }>(
      `SELECT t.task_id AS taskId, up.state AS upstreamState
       FROM tasks t
       JOIN task_upstreams u ON u.run_id = t.run_id AND u.task_id = t.task_id
       LEFT JOIN tasks up ON up.run_id = u.run_id AND up.task_id = u.upstream_id
       WHERE t.run_id = ? AND t.state = 'blocked'`,
    );
    this.#markBlocked = db.prepare<{ runId: string; taskId: string; reason: string; now: string }>(
      `UPDATE tasks SET state = 'blocked', error = :reason, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state = 'pending'`,
    );
    this.#unblock = db.prepare<{ runId: string; taskId: string; now: string }>(
      `UPDATE tasks SET state = 'pending', error = NULL, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state = 'blocked'`,
    );
    this.#fillIn = db.prepare<{
      runId: string;
      taskId: string;
      body: string;
      hash: string;
      tokens: number;
      min: number;
      max: number;
      basis: string;
      assumed: number;
      now: string;
    }>(
      `UPDATE tasks SET
         planned_body = coalesce(planned_body, body),
         planned_estimate = coalesce(planned_estimate, json_object('tokens', est_tokens, 'min', est_min,
           'max', est_max, 'basis', est_basis, 'assumedPrice', json(CASE est_assumed WHEN 1 THEN 'true' ELSE 'false' END))),
         body = :body, body_hash = :hash, est_tokens = :tokens, est_min = :min, est_max = :max,
         est_basis = :basis, est_assumed = :assumed, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state = 'pending'`,
    );
    this.#rejectUnsent = db.prepare<{ runId: string; taskId: string; reason: string; now: string }>(
      `UPDATE tasks SET state = 'rejected', error = :reason, finished_at = :now, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state = 'pending'`,
    );
    this.#selectTask = db.prepare<[string, string], TaskRow>(
      'SELECT * FROM tasks WHERE run_id = ? AND task_id = ?',
    );
    // Back to the request and estimate of the plan: its upstream will make a new result. The casts are
    // for PostgreSQL, whose json_extract gives text (SQLite's gives the number).
    this.#restorePlanned = db.prepare<{ runId: string; taskId: string; hash: string; now: string }>(
      `UPDATE tasks SET body = planned_body, body_hash = :hash,
         est_tokens = CAST(json_extract(planned_estimate, '$.tokens') AS DOUBLE PRECISION),
         est_min = CAST(json_extract(planned_estimate, '$.min') AS DOUBLE PRECISION),
         est_max = CAST(json_extract(planned_estimate, '$.max') AS DOUBLE PRECISION),
         est_basis = json_extract(planned_estimate, '$.basis'),
         est_assumed = CASE CAST(json_extract(planned_estimate, '$.assumedPrice') AS INTEGER) WHEN 1 THEN 1 ELSE 0 END,
         planned_body = NULL, planned_estimate = NULL, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND planned_body IS NOT NULL AND planned_estimate IS NOT NULL`,
    );
  }

  /** Replaces the upstreams of a task (inside the caller's transaction). */
  setUpstreams(runId: string, taskId: string, upstreams: readonly UpstreamLink[]): void {
    this.#deleteUpstreams.run(runId, taskId);
    for (const { name, upstreamId } of upstreams) this.#insertUpstream.run(runId, taskId, name, upstreamId);
  }

  /**
   * The upstreams of tasks just inserted, which have none stored (inside the caller's transaction): on
   * PostgreSQL by COPY, 10,000 links a statement, rather than a statement per link.
   */
  addUpstreamsOfNew(runId: string, links: ReadonlyArray<readonly [string, readonly UpstreamLink[]]>): void {
    const copy = this.#copy;
    if (copy === undefined) {
      for (const [taskId, upstreams] of links) this.setUpstreams(runId, taskId, upstreams);
      return;
    }
    let rows = 0;
    try {
      for (const [taskId, upstreams] of links) {
        for (const { name, upstreamId } of upstreams) {
          copy.add([runId, taskId, name, upstreamId]);
          if (++rows % COPY_ROWS === 0) copy.end();
        }
      }
    } catch (error) {
      copy.abort(`mediabatch stopped storing the run's chains: ${(error as Error).message}`);
      throw error;
    }
    copy.end();
  }

  /** Whether any task of the run waits for another: only then do submissions look at upstreams. */
  hasChains(runId: string): boolean {
    return this.#anyUpstream.get(runId) !== undefined;
  }

  upstreamsOf(runId: string, taskId: string): UpstreamLink[] {
    return this.#upstreamsOf.all(runId, taskId);
  }

  /** Every chained task's upstreams, for reports and status. */
  upstreamsOfRun(runId: string): Map<string, UpstreamLink[]> {
    const map = new Map<string, UpstreamLink[]>();
    for (const { taskId, name, upstreamId } of this.#upstreamsOfRun.iterate(runId)) {
      const list = map.get(taskId) ?? [];
      list.push({ name, upstreamId });
      map.set(taskId, list);
    }
    return map;
  }

  /** The tasks that wait for `taskId`, and the tasks that wait for those, and so on. */
  downstreamsOf(runId: string, taskId: string): string[] {
    const found = new Set<string>();
    const queue = [taskId];
    for (let next = queue.pop(); next !== undefined; next = queue.pop()) {
      for (const down of this.#downstreamsOf.all(runId, next)) {
        if (found.has(down) || down === taskId) continue;
        found.add(down);
        queue.push(down);
      }
    }
    return [...found];
  }

  /** Pending tasks whose upstream is being produced or fetched (sent, not done yet), one row per such upstream. */
  waitingOnActive(runId: string): WaitingOn[] {
    return this.#waitingOnActive.all(runId);
  }

  /**
   * Blocks the pending tasks whose upstream gives them nothing in this run (failed, rejected, in doubt,
   * lost, blocked, or its paid result not on disk), with the reason, and so on down the chains. `spare`:
   * upstreams this process is still working on (a result being fetched again). Returns those blocked, with why.
   */
  blockDownstreams(
    runId: string,
    spare: (upstreamId: string) => boolean = () => false,
  ): Array<{ taskId: string; reason: string }> {
    // Downstreams of rejected results are skipped first (the user's own decision: not news to report).
    this.skipDownstreams(runId);
    const blocked: Array<{ taskId: string; reason: string }> = [];
    const now = toIso(this.#now());
    for (;;) {
      let changed = false;
      for (const w of this.#waitingOnBlocking.all(runId)) {
        if (spare(w.upstreamId)) continue;
        const reason = scrub(blockReason(w));
        if (this.#markBlocked.run({ runId, taskId: w.taskId, reason, now }).changes === 1) {
          blocked.push({ taskId: w.taskId, reason });
          changed = true;
        }
      }
      if (!changed) return blocked;
    }
  }

  /**
   * Skips the tasks (pending or blocked) whose upstream's result was rejected, or was itself skipped, and
   * so on down the chains: never submitted, nothing charged. Returns those skipped, with why.
   */
  skipDownstreams(runId: string): Array<{ taskId: string; reason: string }> {
    const skipped: Array<{ taskId: string; reason: string }> = [];
    const now = toIso(this.#now());
    for (;;) {
      let changed = false;
      for (const w of this.#waitingOnRejected.all(runId)) {
        const why =
          w.upstreamState === 'skipped'
            ? `waits for ${w.upstreamId}, which is skipped`
            : `waits for ${w.upstreamId}, whose result was rejected${w.by ? ` by ${w.by}` : ''}${w.note ? ` ("${w.note}")` : ''}`;
        const reason = scrub(
          `${why}: never submitted, nothing charged; approve or re-roll ${w.upstreamId} to send it on`,
        );
        if (this.#markSkipped.run({ runId, taskId: w.taskId, reason, now }).changes === 1) {
          skipped.push({ taskId: w.taskId, reason });
          changed = true;
        }
      }
      if (!changed) return skipped;
    }
  }

  /**
   * Sends blocked chained tasks back to pending when none of their upstreams still blocks them (a run
   * that retries the upstream, or fetches its result, gives them their chance). Returns their ids.
   */
  unblockDownstreams(runId: string): string[] {
    const unblocked: string[] = [];
    const now = toIso(this.#now());
    for (;;) {
      const stuck = new Set<string>();
      const candidates = new Set<string>();
      for (const { taskId, upstreamState } of this.#blockedWithUpstreams.iterate(runId)) {
        candidates.add(taskId);
        if (upstreamState === null || STILL_BLOCKING.includes(upstreamState)) stuck.add(taskId);
      }
      let changed = false;
      for (const taskId of candidates) {
        if (stuck.has(taskId)) continue;
        if (this.#unblock.run({ runId, taskId, now }).changes === 1) {
          unblocked.push(taskId);
          changed = true;
        }
      }
      if (!changed) return unblocked;
    }
  }

  /** The request with its references filled in, and its exact price: stored before the intent is. */
  fillIn(runId: string, taskId: string, wireBody: string, estimate: Estimate): TaskRecord {
    const body = scrub(wireBody);
    const changes = this.#fillIn.run({
      runId,
      taskId,
      body,
      hash: bodyHash(body),
      tokens: estimate.tokens,
      min: estimate.min,
      max: estimate.max,
      basis: estimate.basis,
      assumed: estimate.assumedPrice ? 1 : 0,
      now: toIso(this.#now()),
    }).changes;
    const row = this.#selectTask.get(runId, taskId);
    if (changes === 0 || row === undefined) throw refusedMove(row?.state, runId, taskId, 'submitting');
    return toTask(row);
  }

  /** A chained task whose filled-in request breaks its model's rules: never sent, nothing charged. */
  rejectUnsent(runId: string, taskId: string, reason: string): void {
    const changes = this.#rejectUnsent.run({
      runId,
      taskId,
      reason: scrub(reason),
      now: toIso(this.#now()),
    }).changes;
    if (changes === 0)
      throw refusedMove(this.#selectTask.get(runId, taskId)?.state, runId, taskId, 'rejected');
  }

  /** A filled-in task goes back to its planned request (inside the caller's transaction); false if it was not filled in. */
  restorePlanned(runId: string, taskId: string): boolean {
    const row = this.#selectTask.get(runId, taskId);
    if (row?.planned_body === null || row?.planned_body === undefined) return false;
    return (
      this.#restorePlanned.run({ runId, taskId, hash: bodyHash(row.planned_body), now: toIso(this.#now()) })
        .changes === 1
    );
  }
}

function blockReason(w: WaitingOn): string {
  const up = w.upstreamId;
  const error = w.upstreamError ? ` (${w.upstreamError})` : '';
  const tail = 'never submitted, nothing charged';
  switch (w.upstreamState) {
    case 'failed':
      return `waits for ${up}, which failed${error}: ${tail}; run again with --retry-failed to submit ${up} again, and this task follows`;
    case 'rejected':
      return `waits for ${up}, which was rejected${error}: ${tail}; fix ${up} in the manifest and run again`;
    case 'in_doubt':
      return `waits for ${up}, which is in doubt (its charge is unknown): ${tail}; run again with --retry-in-doubt to settle it, and this task follows`;
    case 'lost':
      return `waits for ${up}, whose paid result is lost${error}: ${tail}`;
    case 'unfetched':
      return `waits for ${up}, whose paid result is not on disk yet${error}: ${tail}; run again to fetch it, and this task follows`;
    default:
      return `waits for ${up}, which is blocked: ${tail}`;
  }
}
