// Choosing results: the decisions a person takes on a reviewed task's result, and what they do
// to the task and its downstreams, each in one transaction. Approval releases the downstreams (the
// `waits` triggers of migration 11 count an unapproved upstream as not done); rejection skips them; a
// re-roll sends the done task back to pending as a new attempt, submitted like every other submission.

import { scrub } from '../util/secrets.js';
import type { ChainStore } from './chains.js';
import type { Db } from './db.js';
import { type FileRow, toFile } from './files.js';
import { tokensTotal } from './micro.js';
import { OverBudgetError, type ReservationStore } from './reservations.js';
import { awaitsReviewSql, shownStateSql } from './shown-state.js';
import { type TaskRow, toTask } from './task-rows.js';
import { fromIso, toIso } from './time.js';
import type { Clock, FileRecord, TaskRecord, TaskState } from './types.js';

export const VERDICTS = ['approve', 'reject', 'reroll'] as const;
export type Verdict = (typeof VERDICTS)[number];

export interface DecisionRecord {
  id: number;
  runId: string;
  taskId: string;
  /** The attempt (result) the decision was taken on. */
  attempt: number;
  verdict: Verdict;
  note: string | null;
  /** The local user who took it (os.userInfo). */
  decidedBy: string;
  decidedAt: Date;
  /** The task's version the deciding party saw. */
  version: number;
}

export interface DecideRequest {
  verdict: Verdict;
  note?: string;
  by: string;
  /** The version the deciding party saw; the decision is refused when the task moved since. */
  expectedVersion?: number;
}

export type DecideOutcome =
  | {
      taskId: string;
      ok: true;
      verdict: Verdict;
      /** The task's version after the decision. */
      version: number;
      attempt: number;
      /** False when the task already had this verdict (nothing recorded). */
      changed: boolean;
      /**
       * A re-roll: the files of the earlier result. Their rows stay until the caller has moved them to
       * `attempt-<n>/` and calls dropEarlierFiles: a crash in between leaves the rows to finish the move with.
       */
      earlierFiles: FileRecord[];
    }
  | {
      taskId: string;
      ok: false;
      reason: string;
      version?: number;
      /** The budget could not hold the re-rolls of the ask: none was recorded. */
      overBudget?: true;
    };

interface DecisionRow {
  id: number;
  run_id: string;
  task_id: string;
  attempt: number;
  verdict: Verdict;
  note: string | null;
  decided_by: string;
  decided_at: string;
  version: number;
}

type Key = { runId: string; taskId: string };

export interface ReviewCounts {
  reviewed: number;
  /** Done, nothing decided on the current result yet. */
  awaiting: number;
  approved: number;
  rejected: number;
}

export class ReviewStore {
  readonly #now: Clock;
  readonly #chains: ChainStore;
  readonly #selectTask;
  readonly #lockTask;
  readonly #selectAwaiting;
  readonly #countAwaiting;
  readonly #selectReviewed;
  readonly #anyReviewed;
  readonly #lastDecisionId;
  readonly #insertDecision;
  readonly #decisionsOfTask;
  readonly #decisionsSince;
  readonly #decisionsOfRun;
  readonly #setVerdict;
  readonly #reroll;
  readonly #filesOfTask;
  readonly #dropEarlierFiles;
  readonly #unskip;
  readonly #queuedRerollMax;
  readonly #reviewCounts;
  readonly #waitingOnReview;
  readonly #awaitingReviewPage;
  readonly #shownState;
  readonly #rerollSpend;
  readonly #decide;
  readonly #decideMany;
  readonly #money: ReservationStore;

  // Long on purpose: every statement is prepared once, here, and named for what it does.
  constructor(db: Db, now: Clock, chains: ChainStore, money: ReservationStore) {
    this.#now = now;
    this.#chains = chains;
    this.#money = money;
    this.#selectTask = db.prepare<[string, string], TaskRow>(
      'SELECT * FROM tasks WHERE run_id = ? AND task_id = ?',
    );
    // A decision reads the task, decides, then writes: on PostgreSQL (overrides.ts) this read locks the
    // task's row first, so two decisions on one task (the page and `review` at once) take turns and the
    // second sees the first's; SQLite's transaction holds the file's one write lock already.
    this.#lockTask = db.prepare<[string, string]>(
      'SELECT state AS locked FROM tasks WHERE run_id = ? AND task_id = ?',
    );
    this.#selectAwaiting = db.prepare<[string], TaskRow>(
      `SELECT * FROM tasks INDEXED BY tasks_reviewed WHERE run_id = ? AND review = 1 AND state = 'done' AND verdict IS NULL ORDER BY seq`,
    );
    this.#countAwaiting = db
      .prepare<[string], number>(
        `SELECT count(*) FROM tasks INDEXED BY tasks_reviewed WHERE run_id = ? AND review = 1 AND state = 'done' AND verdict IS NULL`,
      )
      .pluck();
    this.#selectReviewed = db.prepare<[string], TaskRow>(
      'SELECT * FROM tasks INDEXED BY tasks_reviewed WHERE run_id = ? AND review = 1 ORDER BY seq',
    );
    this.#anyReviewed = db
      .prepare<[string], number>(
        'SELECT 1 FROM tasks INDEXED BY tasks_reviewed WHERE run_id = ? AND review = 1 LIMIT 1',
      )
      .pluck();
    // The rowid's largest value: one look at the end of the table, however many decisions there are.
    this.#lastDecisionId = db.prepare<[], number | null>('SELECT max(id) FROM decisions').pluck();
    this.#insertDecision = db.prepare<
      Key & {
        attempt: number;
        verdict: Verdict;
        note: string | null;
        by: string;
        now: string;
        version: number;
      }
    >(
      `INSERT INTO decisions (run_id, task_id, attempt, verdict, note, decided_by, decided_at, version)
       VALUES (:runId, :taskId, :attempt, :verdict, :note, :by, :now, :version)`,
    );
    this.#decisionsOfTask = db.prepare<[string, string], DecisionRow>(
      'SELECT * FROM decisions WHERE run_id = ? AND task_id = ? ORDER BY id',
    );
    this.#decisionsSince = db.prepare<[string, string, number], DecisionRow>(
      'SELECT * FROM decisions WHERE run_id = ? AND task_id = ? AND version >= ? ORDER BY id',
    );
    this.#decisionsOfRun = db.prepare<[string], DecisionRow>(
      'SELECT * FROM decisions WHERE run_id = ? ORDER BY id',
    );
    this.#setVerdict = db.prepare<Key & { verdict: 'approved' | 'rejected'; now: string }>(
      `UPDATE tasks SET verdict = :verdict, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state = 'done' AND review = 1`,
    );
    // A new attempt: the task forgets its job (the ledger keeps its charge), nothing decided on it yet.
    this.#reroll = db.prepare<Key & { now: string }>(
      `UPDATE tasks SET state = 'pending', verdict = NULL, attempt = attempt + 1, img_uuid = NULL, cost = NULL,
         cost_assumed = 0, recovered = 0, refunded = NULL, error = NULL, submitted_at = NULL, finished_at = NULL,
         job_status = NULL, job_duration = NULL, last_polled_at = NULL, next_poll_at = NULL, poll_count = 0,
         source = NULL, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state = 'done' AND review = 1`,
    );
    this.#filesOfTask = db.prepare<[string, string], FileRow>(
      'SELECT * FROM files WHERE run_id = ? AND task_id = ? ORDER BY idx',
    );
    // Only a re-rolled task not sent yet has rows of an earlier result: a pending attempt 2, 3, …
    this.#dropEarlierFiles = db.prepare<Key>(
      `DELETE FROM files WHERE run_id = :runId AND task_id = :taskId AND EXISTS (SELECT 1 FROM tasks
         WHERE run_id = :runId AND task_id = :taskId AND review = 1 AND attempt > 1 AND state = 'pending')`,
    );
    this.#unskip = db.prepare<Key & { now: string }>(
      `UPDATE tasks SET state = 'pending', error = NULL, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state = 'skipped'`,
    );
    // Re-rolls asked for and not answered yet: their worst cases are spoken for in the budget.
    this.#queuedRerollMax = db
      .prepare<[string], number>(
        `SELECT ${tokensTotal('est_max')} FROM tasks INDEXED BY tasks_reviewed
         WHERE run_id = ? AND review = 1 AND attempt > 1 AND state = 'pending'`,
      )
      .pluck();
    this.#waitingOnReview = db
      .prepare<[string], number>(
        `SELECT count(DISTINCT t.task_id) FROM tasks up INDEXED BY tasks_reviewed
         JOIN task_upstreams u ON u.run_id = up.run_id AND u.upstream_id = up.task_id
         JOIN tasks t ON t.run_id = u.run_id AND t.task_id = u.task_id
         WHERE up.run_id = ? AND up.review = 1 AND up.state = 'done' AND up.verdict IS NULL
           AND ${awaitsReviewSql('t')}`,
      )
      .pluck();
    // Keyset paging by seq through tasks_by_state (run_id, state, seq, waits): the pending tasks after
    // `afterSeq`, kept when they wait for a person. A page never re-reads earlier ones.
    this.#awaitingReviewPage = db.prepare<{ runId: string; afterSeq: number; limit: number }, TaskRow>(
      `SELECT * FROM tasks AS t INDEXED BY tasks_by_state
       WHERE t.run_id = :runId AND t.state = 'pending' AND t.seq > :afterSeq AND ${awaitsReviewSql('t')}
       ORDER BY t.seq LIMIT :limit`,
    );
    this.#shownState = db
      .prepare<[string, string], TaskState>(
        `SELECT ${shownStateSql('t')} FROM tasks AS t WHERE t.run_id = ? AND t.task_id = ?`,
      )
      .pluck();
    this.#reviewCounts = db.prepare<[string], ReviewCounts>(
      `SELECT count(*) AS reviewed,
         coalesce(sum(state = 'done' AND verdict IS NULL), 0) AS awaiting,
         coalesce(sum(verdict = 'approved'), 0) AS approved,
         coalesce(sum(verdict = 'rejected'), 0) AS rejected
       FROM tasks INDEXED BY tasks_reviewed WHERE run_id = ? AND review = 1`,
    );
    // A re-roll's job is charged once and may be refunded (it failed): both sides, by its img_uuid, added
    // in whole micro-tokens (src/store/micro.ts; written out, as PostgreSQL's override of it is keyed by it).
    this.#rerollSpend = db.prepare<[string], { charged: number; refunded: number; jobs: number }>(
      `SELECT (total(CAST(round(c.tokens * 1000000) AS INTEGER)) / 1000000.0) AS charged, count(*) AS jobs,
         ((SELECT total(CAST(round(r.tokens * 1000000) AS INTEGER)) FROM ledger r WHERE r.kind = 'refund'
           AND r.img_uuid IN (SELECT img_uuid FROM ledger WHERE run_id = c.run_id AND kind = 'charge' AND reroll = 1))
           / 1000000.0) AS refunded
       FROM ledger c WHERE c.run_id = ? AND c.kind = 'charge' AND c.reroll = 1`,
    );
    this.#decide = db.transaction((runId: string, taskId: string, req: DecideRequest) =>
      this.#decideInTransaction(runId, taskId, req),
    );
    this.#decideMany = db.transaction(
      (runId: string, asks: ReadonlyArray<{ taskId: string; req: DecideRequest }>) =>
        asks.map(({ taskId, req }) => this.#decideInTransaction(runId, taskId, req)),
    );
  }

  /** Reviewed results nobody decided on yet, in manifest order. */
  awaiting(runId: string): TaskRecord[] {
    return this.#selectAwaiting.all(runId).map(toTask);
  }

  countAwaiting(runId: string): number {
    return this.#countAwaiting.get(runId) ?? 0;
  }

  /** Every task of the run marked `review: true`, whatever its state. */
  reviewedTasks(runId: string): TaskRecord[] {
    return this.#selectReviewed.all(runId).map(toTask);
  }

  hasReviewed(runId: string): boolean {
    return this.#anyReviewed.get(runId) !== undefined;
  }

  /** A number that moves whenever anyone takes a decision: what a running run looks at each tick. */
  decisionMark(): number {
    return this.#lastDecisionId.get() ?? 0;
  }

  decisionsOf(runId: string, taskId?: string): DecisionRecord[] {
    const rows =
      taskId === undefined ? this.#decisionsOfRun.all(runId) : this.#decisionsOfTask.all(runId, taskId);
    return rows.map(toDecision);
  }

  /** The worst cases of re-rolls asked for and not sent yet (once sent, they are submitting or charged). */
  queuedRerollMax(runId: string): number {
    return this.#queuedRerollMax.get(runId) ?? 0;
  }

  /** Reviewed tasks of the run by their review status. */
  reviewCounts(runId: string): ReviewCounts {
    return this.#reviewCounts.get(runId) ?? { reviewed: 0, awaiting: 0, approved: 0, rejected: 0 };
  }

  /**
   * The tasks shown as `awaiting_review` (src/store/shown-state.ts), in manifest order, a page at a time:
   * give the last one's `seq` as `afterSeq` for the next page (keyset paging; -1 for the first).
   */
  tasksAwaitingReview(runId: string, page: { afterSeq?: number; limit?: number } = {}): TaskRecord[] {
    const limit = Math.max(1, Math.min(page.limit ?? 100, 1000));
    return this.#awaitingReviewPage.all({ runId, afterSeq: page.afterSeq ?? -1, limit }).map(toTask);
  }

  /** A task's state as shown (`awaiting_review` for a pending one waiting for a person); undefined when absent. */
  shownStateOf(runId: string, taskId: string): TaskState | undefined {
    return this.#shownState.get(runId, taskId);
  }

  /** How many tasks are shown as `awaiting_review`: pending, waiting for a person's approval of an upstream. */
  waitingOnReview(runId: string): number {
    return this.#waitingOnReview.get(runId) ?? 0;
  }

  /** What re-rolls cost: their jobs' charges and refunds (a re-roll is a second ask, shown apart). */
  rerollSpend(runId: string): { charged: number; refunded: number; jobs: number } {
    return this.#rerollSpend.get(runId) ?? { charged: 0, refunded: 0, jobs: 0 };
  }

  /**
   * The rows of a re-rolled task's earlier result, once its files are kept at `attempt-<n>/` (or in the
   * bucket). Does nothing unless the task is a re-roll not sent yet.
   */
  dropEarlierFiles(runId: string, taskId: string): void {
    this.#dropEarlierFiles.run({ runId, taskId });
  }

  /**
   * One decision on one task, in one transaction; refused (with why) rather than thrown. A re-roll the
   * budget cannot hold throws OverBudgetError, with nothing recorded.
   */
  decide(runId: string, taskId: string, req: DecideRequest): DecideOutcome {
    return this.#decide.immediate(runId, taskId, req);
  }

  /**
   * The decisions of one ask, in one transaction: re-rolls reserve their worst cases together, so the
   * budget holds all of them or none is recorded (every task refused with the reason).
   */
  decideMany(runId: string, asks: ReadonlyArray<{ taskId: string; req: DecideRequest }>): DecideOutcome[] {
    try {
      return this.#decideMany.immediate(runId, asks);
    } catch (error) {
      if (!(error instanceof OverBudgetError)) throw error;
      return asks.map(({ taskId }) => ({ taskId, ok: false, reason: error.message, overBudget: true }));
    }
  }

  #decideInTransaction(runId: string, taskId: string, req: DecideRequest): DecideOutcome {
    this.#lockTask.get(runId, taskId);
    const row = this.#selectTask.get(runId, taskId);
    if (row === undefined) return { taskId, ok: false, reason: `no task ${taskId} in run ${runId}` };
    const task = toTask(row);
    const refused = (reason: string): DecideOutcome => ({ taskId, ok: false, reason, version: task.version });
    if (!task.review)
      return refused(`${taskId} is not reviewed (the manifest does not say review: true for it)`);
    if (req.expectedVersion !== undefined && req.expectedVersion !== task.version) {
      return refused(
        `${taskId} changed since you looked (version ${req.expectedVersion}, now ${task.version}): ${this.#whatChanged(task, req.expectedVersion)}`,
      );
    }
    if (task.state !== 'done') {
      return refused(
        `${taskId} is ${task.state.replace('_', ' ')}, attempt ${task.attempt}: only a result on disk can be decided; wait for it`,
      );
    }
    const now = toIso(this.#now());
    const key = { runId, taskId, now };
    const target = req.verdict === 'approve' ? 'approved' : req.verdict === 'reject' ? 'rejected' : undefined;
    if (target !== undefined && task.verdict === target) {
      return {
        taskId,
        ok: true,
        verdict: req.verdict,
        version: task.version,
        attempt: task.attempt,
        changed: false,
        earlierFiles: [],
      };
    }
    this.#insertDecision.run({
      ...key,
      attempt: task.attempt,
      verdict: req.verdict,
      note: req.note === undefined || req.note === '' ? null : scrub(req.note),
      by: scrub(req.by),
      version: task.version,
    });
    let earlierFiles: FileRecord[] = [];
    if (target !== undefined) {
      this.#setVerdict.run({ ...key, verdict: target });
    } else {
      // The rows stay: the caller moves the files first, then drops them (dropEarlierFiles).
      earlierFiles = this.#filesOfTask.all(runId, taskId).map(toFile);
      this.#reroll.run(key);
      // Its worst case is reserved now, before anything of it can be sent.
      this.#money.reserveRerolls(runId, [taskId], now);
    }
    // Approved or re-rolled: downstreams skipped for an earlier rejection wait for it again; filled-in
    // ones not sent take the new result. Those still behind another rejected upstream are skipped again.
    if (req.verdict !== 'reject') {
      for (const down of this.#chains.downstreamsOf(runId, taskId)) {
        this.#unskip.run({ runId, taskId: down, now });
        const state = this.#selectTask.get(runId, down)?.state;
        if (state === 'pending') this.#chains.restorePlanned(runId, down);
      }
    }
    this.#chains.skipDownstreams(runId);
    const after = toTask(this.#selectTask.get(runId, taskId) ?? row);
    return {
      taskId,
      ok: true,
      verdict: req.verdict,
      version: after.version,
      attempt: after.attempt,
      changed: true,
      earlierFiles,
    };
  }

  /** What happened to a task since version `seen`: the decisions taken since, else its state now. */
  #whatChanged(task: TaskRecord, seen: number): string {
    const since = this.#decisionsSince.all(task.runId, task.taskId, seen).map(toDecision);
    const parts = since.map(
      (d) =>
        `${PAST[d.verdict]} by ${d.decidedBy} at ${d.decidedAt.toISOString()}${d.note ? ` ("${d.note}")` : ''}`,
    );
    const now =
      task.state === 'done'
        ? `its result (attempt ${task.attempt}) is ${task.verdict ?? 'awaiting review'}`
        : `it is ${task.state.replace('_', ' ')} (attempt ${task.attempt})`;
    return `${parts.length > 0 ? `${parts.join('; ')}; ` : ''}${now}; look again and decide anew`;
  }
}

const PAST: Record<Verdict, string> = { approve: 'approved', reject: 'rejected', reroll: 're-rolled' };

function toDecision(row: DecisionRow): DecisionRecord {
  return {
    id: row.id,
    runId: row.run_id,
    taskId: row.task_id,
    attempt: row.attempt,
    verdict: row.verdict,
    note: row.note,
    decidedBy: row.decided_by,
    decidedAt: fromIso(row.decided_at),
    version: row.version,
  };
}
