// The facts of one run's account (src/account/), read in ONE read transaction, so every figure of it
// is of the same moment: a runner committing between two statements cannot make the counts and the
// money disagree. Built for a million tasks: the whole-run sums are range scans in storage order (as
// runTotals does); only the few tasks whose money needs telling apart (sent more than once, or once in
// doubt) are read one by one.

import type { Db } from './db.js';
import type { ReviewCounts } from './reviews.js';
import { awaitsReviewSql } from './shown-state.js';
import { emptyTaskCounts, STORED_TASK_STATES, type TaskState } from './types.js';

/** Sums of the run's tasks' estimates, in tokens. */
export interface AccountEstimates {
  /** Every task but the skipped ones (a rejected upstream took them out of the run). */
  tokens: number;
  min: number;
  max: number;
  /** Tasks not charged yet (pending, awaiting review, submitting): their best and worst case. */
  leftTokens: number;
  leftMax: number;
  /** Tasks in doubt: the most they may have cost. */
  inDoubtMax: number;
}

/** One ledger row of a task whose money is told apart job by job. */
export interface AccountLedgerRow {
  taskId: string;
  imgUuid: string;
  kind: 'charge' | 'refund';
  tokens: number;
  reroll: boolean;
}

/** One submission of such a task: its number and what its answer was. */
export interface AccountAttemptRow {
  taskId: string;
  attemptNo: number;
  outcome: 'submitted' | 'rejected' | 'not_charged' | 'in_doubt' | null;
  imgUuid: string | null;
}

export interface AccountFacts {
  /** Tasks per stored state, `awaiting_review` taken out of `pending`. */
  counts: Record<TaskState, number>;
  review: ReviewCounts & { waiting: number; rerollsAsked: number };
  estimates: AccountEstimates;
  /** Every charge and refund of the run, and how many charges. */
  ledger: { charged: number; refunded: number; charges: number };
  /** The ledger rows and attempts of the tasks sent more than once or ever in doubt. */
  detail: { ledger: AccountLedgerRow[]; attempts: AccountAttemptRow[] };
  /** Charged tasks without a result on disk, per state: how many, and their net (charged − refunded). */
  notOnDisk: Record<'unfetched' | 'stalled' | 'lost', { tasks: number; tokens: number }>;
  /** The first ACCOUNT_ID_LIMIT ids, in manifest order, of the tasks each next step is about. */
  ids: { inDoubt: string[]; awaiting: string[]; unfinished: string[] };
}

/** At most this many task ids per next step. */
export const ACCOUNT_ID_LIMIT = 20;

/** The stored states a later `run` goes on with (UNFINISHED of transitions.ts, `pending` for awaiting review). */
const GOES_ON = ['pending', 'submitting', 'submitted', 'running', 'stalled', 'downloading', 'unfetched'];

interface Range {
  lo: number | null;
  hi: number | null;
}

export class AccountReadStore {
  readonly #read: (runId: string) => AccountFacts;

  // Long on purpose: every statement is prepared once, here, and named for what it does.
  constructor(db: Db) {
    const countByState = db.prepare<[string], { state: TaskState; n: number }>(
      'SELECT state, n FROM task_counts WHERE run_id = ? AND n > 0',
    );
    const countAwaiting = db
      .prepare<[string], number>(
        `SELECT count(*) FROM tasks AS t INDEXED BY tasks_by_state
         WHERE t.run_id = ? AND t.state = 'pending' AND t.waits > 0 AND ${awaitsReviewSql('t')}`,
      )
      .pluck();
    const reviewCounts = db.prepare<[string], ReviewCounts>(
      `SELECT count(*) AS reviewed,
         coalesce(sum(state = 'done' AND verdict IS NULL), 0) AS awaiting,
         coalesce(sum(verdict = 'approved'), 0) AS approved,
         coalesce(sum(verdict = 'rejected'), 0) AS rejected
       FROM tasks INDEXED BY tasks_reviewed WHERE run_id = ? AND review = 1`,
    );
    const rerollsAsked = db
      .prepare<[string], number>(`SELECT count(*) FROM decisions WHERE run_id = ? AND verdict = 'reroll'`)
      .pluck();
    const taskRange = db.prepare<[string], Range>(
      'SELECT min(rowid) AS lo, max(rowid) AS hi FROM tasks WHERE run_id = ?',
    );
    // One pass over the run's rows in storage order (see runTotals in report-reads.ts for why).
    const estimates = db.prepare<[number, number, string], AccountEstimates>(
      `SELECT total(CASE WHEN state <> 'skipped' THEN est_tokens END) AS tokens,
         total(CASE WHEN state <> 'skipped' THEN est_min END) AS min,
         total(CASE WHEN state <> 'skipped' THEN est_max END) AS max,
         total(CASE WHEN state IN ('pending', 'submitting') THEN est_tokens END) AS leftTokens,
         total(CASE WHEN state IN ('pending', 'submitting') THEN est_max END) AS leftMax,
         total(CASE WHEN state = 'in_doubt' THEN est_max END) AS inDoubtMax
       FROM tasks WHERE rowid BETWEEN ? AND ? AND +run_id = ?`,
    );
    const ledgerRange = db.prepare<[string], Range>(
      'SELECT min(id) AS lo, max(id) AS hi FROM ledger WHERE run_id = ?',
    );
    const ledgerSums = db.prepare<[number, number, string], AccountFacts['ledger']>(
      `SELECT total(CASE WHEN kind = 'charge' THEN tokens END) AS charged,
         total(CASE WHEN kind = 'refund' THEN tokens END) AS refunded,
         count(CASE WHEN kind = 'charge' THEN 1 END) AS charges
       FROM ledger WHERE id BETWEEN ? AND ? AND +run_id = ?`,
    );
    const attemptRange = db.prepare<[string], Range>(
      'SELECT min(rowid) AS lo, max(rowid) AS hi FROM attempts WHERE run_id = ?',
    );
    // A task sent once has at most one charge (and its refund): its money is its first job's. Only the
    // tasks sent more than once, or once in doubt, are told apart job by job.
    const sentAgain = db
      .prepare<[number, number, string], string>(
        `SELECT DISTINCT task_id FROM attempts
         WHERE rowid BETWEEN ? AND ? AND +run_id = ? AND (attempt_no > 1 OR outcome = 'in_doubt')`,
      )
      .pluck();
    const ledgerOf = db.prepare<
      [string, string],
      { task_id: string; img_uuid: string; kind: 'charge' | 'refund'; tokens: number; reroll: number }
    >(
      `SELECT task_id, img_uuid, kind, tokens, reroll FROM ledger
       WHERE run_id = ? AND task_id = ? ORDER BY id`,
    );
    const attemptsOf = db.prepare<
      [string, string],
      { task_id: string; attempt_no: number; outcome: AccountAttemptRow['outcome']; img_uuid: string | null }
    >(
      `SELECT task_id, attempt_no, outcome, img_uuid FROM attempts
       WHERE run_id = ? AND task_id = ? ORDER BY attempt_no`,
    );

    const firstIn = db.prepare<[string, string, number], { task_id: string; seq: number }>(
      'SELECT task_id, seq FROM tasks WHERE run_id = ? AND state = ? ORDER BY seq LIMIT ?',
    );
    const firstAwaiting = db
      .prepare<[string, number], string>(
        `SELECT task_id FROM tasks INDEXED BY tasks_reviewed
         WHERE run_id = ? AND review = 1 AND state = 'done' AND verdict IS NULL ORDER BY seq LIMIT ?`,
      )
      .pluck();
    // Per state through (run_id, state, seq), merged here: an IN list would sort a million pending rows.
    const firstUnfinished = (runId: string): string[] =>
      GOES_ON.flatMap((state) => firstIn.all(runId, state, ACCOUNT_ID_LIMIT))
        .sort((a, b) => a.seq - b.seq)
        .slice(0, ACCOUNT_ID_LIMIT)
        .map((r) => r.task_id);

    const notOnDisk = db.prepare<
      [string],
      { state: 'unfetched' | 'stalled' | 'lost'; tasks: number; tokens: number }
    >(
      `SELECT state, count(*) AS tasks,
         total((SELECT total(CASE kind WHEN 'charge' THEN tokens ELSE -tokens END) FROM ledger AS l
           WHERE l.run_id = t.run_id AND l.task_id = t.task_id)) AS tokens
       FROM tasks AS t WHERE run_id = ? AND state IN ('unfetched', 'stalled', 'lost') GROUP BY state`,
    );

    const sumsIn = <T>(range: Range | undefined, read: (lo: number, hi: number) => T | undefined) =>
      range?.lo == null || range.hi == null ? undefined : read(range.lo, range.hi);

    this.#read = db.transaction((runId: string): AccountFacts => {
      const counts = emptyTaskCounts();
      for (const { state, n } of countByState.iterate(runId)) {
        if (STORED_TASK_STATES.includes(state)) counts[state] = n;
      }
      if (counts.pending > 0) {
        counts.awaiting_review = countAwaiting.get(runId) ?? 0;
        counts.pending -= counts.awaiting_review;
      }
      const review = reviewCounts.get(runId) ?? { reviewed: 0, awaiting: 0, approved: 0, rejected: 0 };
      const tasks = taskRange.get(runId);
      const est = sumsIn(tasks, (lo, hi) => estimates.get(lo, hi, runId));
      const ledger = sumsIn(ledgerRange.get(runId), (lo, hi) => ledgerSums.get(lo, hi, runId));
      const special = new Set(
        sumsIn(attemptRange.get(runId), (lo, hi) => sentAgain.all(lo, hi, runId)) ?? [],
      );
      const detail: AccountFacts['detail'] = { ledger: [], attempts: [] };
      for (const taskId of special) {
        for (const r of ledgerOf.iterate(runId, taskId)) {
          detail.ledger.push({
            taskId: r.task_id,
            imgUuid: r.img_uuid,
            kind: r.kind,
            tokens: r.tokens,
            reroll: r.reroll === 1,
          });
        }
        for (const a of attemptsOf.iterate(runId, taskId)) {
          detail.attempts.push({
            taskId: a.task_id,
            attemptNo: a.attempt_no,
            outcome: a.outcome,
            imgUuid: a.img_uuid,
          });
        }
      }
      return {
        counts,
        review: {
          ...review,
          // Pending tasks held by a result nobody decided on: the awaiting_review count itself.
          waiting: counts.awaiting_review,
          rerollsAsked: review.reviewed > 0 ? (rerollsAsked.get(runId) ?? 0) : 0,
        },
        estimates: est ?? { tokens: 0, min: 0, max: 0, leftTokens: 0, leftMax: 0, inDoubtMax: 0 },
        ledger: ledger ?? { charged: 0, refunded: 0, charges: 0 },
        detail,
        notOnDisk: notOnDiskOf(notOnDisk.all(runId)),
        ids: {
          inDoubt: firstIn.all(runId, 'in_doubt', ACCOUNT_ID_LIMIT).map((r) => r.task_id),
          awaiting: review.awaiting > 0 ? firstAwaiting.all(runId, ACCOUNT_ID_LIMIT) : [],
          unfinished: firstUnfinished(runId),
        },
      };
    });
  }

  /** Every fact of the run's account, read in one transaction. */
  accountFacts(runId: string): AccountFacts {
    return this.#read(runId);
  }
}

function notOnDiskOf(
  rows: readonly { state: 'unfetched' | 'stalled' | 'lost'; tasks: number; tokens: number }[],
): AccountFacts['notOnDisk'] {
  const out: AccountFacts['notOnDisk'] = {
    unfetched: { tasks: 0, tokens: 0 },
    stalled: { tasks: 0, tokens: 0 },
    lost: { tasks: 0, tokens: 0 },
  };
  for (const r of rows) out[r.state] = { tasks: r.tasks, tokens: r.tokens };
  return out;
}
