// The facts of one run's account (src/account/), read in ONE read transaction, so every figure of it
// is of the same moment: a runner committing between two statements cannot make the counts and the
// money disagree. Built for a million tasks: the counts, the estimates and the money are sums the
// store keeps beside the rows by triggers (task_counts, account_money: migrations 5 and 15), a few rows
// whatever the run's size; only the tasks paid for and without a result are read one by one.
// account-scan.ts computes the same sums by reading every row, the check the tests hold these to.

import type { Db } from './db.js';
import { asTokens, micro } from './micro.js';
import type { ReviewCounts } from './reviews.js';
import { awaitsReviewSql } from './shown-state.js';
import { emptyTaskCounts, MONEY_KINDS, type MoneyKind, STORED_TASK_STATES, type TaskState } from './types.js';

/** Sums of the run's tasks' estimates, in micro-tokens. */
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

/** The money of one kind of job, in micro-tokens. */
export interface KindSums {
  /** Charges (jobs the API accepted). */
  jobs: number;
  /** Tasks with at least one such charge. */
  tasks: number;
  charged: number;
  refunded: number;
}

/** The sums the store keeps per run (and account-scan.ts computes by reading every row). */
export interface AccountSums {
  estimates: AccountEstimates;
  money: Record<MoneyKind, KindSums>;
}

export interface AccountFacts extends AccountSums {
  /** Tasks per stored state, `awaiting_review` taken out of `pending`. */
  counts: Record<TaskState, number>;
  review: ReviewCounts & { waiting: number; rerollsAsked: number };
  /** Charged tasks without a result on disk, per state: how many, and their net (charged − refunded). */
  notOnDisk: Record<'unfetched' | 'stalled' | 'lost', { tasks: number; tokens: number }>;
  /** The first ACCOUNT_ID_LIMIT ids, in manifest order, of the tasks each next step is about. */
  ids: { inDoubt: string[]; awaiting: string[]; unfinished: string[] };
}

/** Sums with nothing in them, every kind present. */
export function emptyAccountSums(): AccountSums {
  return {
    estimates: { tokens: 0, min: 0, max: 0, leftTokens: 0, leftMax: 0, inDoubtMax: 0 },
    money: Object.fromEntries(
      MONEY_KINDS.map((k) => [k, { jobs: 0, tasks: 0, charged: 0, refunded: 0 }]),
    ) as Record<MoneyKind, KindSums>,
  };
}

/** The estimate of one state's tasks, in micro-tokens. */
export interface StateEstimate {
  state: TaskState;
  tokens: number;
  min: number;
  max: number;
}

/** The account's estimates from each state's: what is left is pending or being sent, skipped is out. */
export function estimatesOf(states: Iterable<StateEstimate>): AccountEstimates {
  const e = emptyAccountSums().estimates;
  for (const s of states) {
    if (s.state !== 'skipped') {
      e.tokens += s.tokens;
      e.min += s.min;
      e.max += s.max;
    }
    if (s.state === 'pending' || s.state === 'submitting') {
      e.leftTokens += s.tokens;
      e.leftMax += s.max;
    }
    if (s.state === 'in_doubt') e.inDoubtMax += s.max;
  }
  return e;
}

/** At most this many task ids per next step. */
export const ACCOUNT_ID_LIMIT = 20;

/** The stored states a later `run` goes on with (UNFINISHED of transitions.ts, `pending` for awaiting review). */
const GOES_ON = ['pending', 'submitting', 'submitted', 'running', 'stalled', 'downloading', 'unfetched'];

export class AccountReadStore {
  readonly #read: (runId: string) => AccountFacts;

  // Long on purpose: every statement is prepared once, here, and named for what it does.
  constructor(db: Db) {
    const byState = db.prepare<
      [string],
      { state: TaskState; n: number; tokens: number; min: number; max: number }
    >(
      `SELECT state, n, est_micro AS tokens, est_min_micro AS min, est_max_micro AS max
       FROM task_counts WHERE run_id = ? AND n > 0`,
    );
    const moneyByKind = db.prepare<[string], KindSums & { kind: MoneyKind }>(
      'SELECT kind, jobs, tasks, charged, refunded FROM account_money WHERE run_id = ?',
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
    // The limit is written into the statement, not bound: PostgreSQL plans a statement whose LIMIT is a
    // parameter again on every call (its generic plan, priced for an unknown limit, never looks cheaper).
    const firstIn = db.prepare<[string, string], { task_id: string; seq: number }>(
      `SELECT task_id, seq FROM tasks WHERE run_id = ? AND state = ? ORDER BY seq LIMIT ${ACCOUNT_ID_LIMIT}`,
    );
    const firstAwaiting = db
      .prepare<[string], string>(
        `SELECT task_id FROM tasks INDEXED BY tasks_reviewed
         WHERE run_id = ? AND review = 1 AND state = 'done' AND verdict IS NULL ORDER BY seq LIMIT ${ACCOUNT_ID_LIMIT}`,
      )
      .pluck();
    // Per state through (run_id, state, seq), merged here: an IN list would sort a million pending rows.
    const firstUnfinished = (runId: string): string[] =>
      GOES_ON.flatMap((state) => firstIn.all(runId, state))
        .sort((a, b) => a.seq - b.seq)
        .slice(0, ACCOUNT_ID_LIMIT)
        .map((r) => r.task_id);

    const notOnDisk = db.prepare<
      [string],
      { state: 'unfetched' | 'stalled' | 'lost'; tasks: number; tokens: number }
    >(
      `SELECT state, count(*) AS tasks,
         ${asTokens(`total((SELECT total(CASE kind WHEN 'charge' THEN ${micro('tokens')} ELSE -${micro('tokens')} END)
           FROM ledger AS l WHERE l.run_id = t.run_id AND l.task_id = t.task_id))`)} AS tokens
       FROM tasks AS t WHERE run_id = ? AND state IN ('unfetched', 'stalled', 'lost') GROUP BY state`,
    );

    this.#read = db.transaction((runId: string): AccountFacts => {
      const counts = emptyTaskCounts();
      const states = byState.all(runId);
      for (const { state, n } of states) {
        if (STORED_TASK_STATES.includes(state)) counts[state] = n;
      }
      if (counts.pending > 0) {
        counts.awaiting_review = countAwaiting.get(runId) ?? 0;
        counts.pending -= counts.awaiting_review;
      }
      const review = reviewCounts.get(runId) ?? { reviewed: 0, awaiting: 0, approved: 0, rejected: 0 };
      const { money } = emptyAccountSums();
      for (const { kind, ...sums } of moneyByKind.iterate(runId)) money[kind] = sums;
      return {
        counts,
        review: {
          ...review,
          // Pending tasks held by a result nobody decided on: the awaiting_review count itself.
          waiting: counts.awaiting_review,
          rerollsAsked: review.reviewed > 0 ? (rerollsAsked.get(runId) ?? 0) : 0,
        },
        estimates: estimatesOf(states),
        money,
        notOnDisk: notOnDiskOf(notOnDisk.all(runId)),
        ids: {
          inDoubt: firstIn.all(runId, 'in_doubt').map((r) => r.task_id),
          awaiting: review.awaiting > 0 ? firstAwaiting.all(runId) : [],
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
