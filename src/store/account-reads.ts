// The facts of one run's account (src/account/), read in ONE statement (ACCOUNT_SQL), so every figure of
// it is of the same moment: a runner committing meanwhile cannot make the counts and the money disagree,
// and a PostgreSQL server is asked once. Built for a million tasks: the counts, the estimates and the money are sums the
// store keeps beside the rows by triggers (task_counts, account_money: migrations 5 and 15), a few rows
// whatever the run's size; only the tasks paid for and without a result are read one by one.
// account-scan.ts computes the same sums by reading every row, the check the tests hold these to.

import type { Db } from './db.js';
import { micro } from './micro.js';
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

/** One list of the account statement: `[[…], …]` as JSON text, `[]` over no rows. */
function listOf(columns: string, from: string): string {
  return `(SELECT coalesce(json_group_array(json_array(${columns})), '[]') FROM ${from})`;
}

/** The first ACCOUNT_ID_LIMIT tasks of one state, by seq, through the (run_id, state, seq) index. */
function firstOf(state: string, alias: string): string {
  return `(SELECT task_id, seq FROM tasks WHERE run_id = :runId AND state = '${state}' ORDER BY seq LIMIT ${ACCOUNT_ID_LIMIT}) AS ${alias}`;
}

/**
 * Every fact of a run's account in ONE statement, one row: a single round trip to a PostgreSQL server
 * (where the dozen statements it replaces cost a round trip each), and one snapshot on both backends.
 * Lists come as JSON arrays of arrays; PostgreSQL's spelling of the JSON functions is in
 * src/store/pg/overrides.ts. The limits are written into the text, not bound: PostgreSQL plans a
 * statement whose LIMIT is a parameter again on every call. Ids carry their seq and are ordered here.
 */
export const ACCOUNT_SQL = `SELECT
  ${listOf('state, n, est_micro, est_min_micro, est_max_micro', 'task_counts WHERE run_id = :runId AND n > 0')} AS states,
  ${listOf('kind, jobs, tasks, charged, refunded', 'account_money WHERE run_id = :runId')} AS money,
  (SELECT count(*) FROM tasks AS t INDEXED BY tasks_by_state
    WHERE t.run_id = :runId AND t.state = 'pending' AND t.waits > 0 AND ${awaitsReviewSql('t')}) AS awaiting_review,
  (SELECT json_array(count(*), count(CASE WHEN state = 'done' AND verdict IS NULL THEN 1 END),
      count(CASE WHEN verdict = 'approved' THEN 1 END), count(CASE WHEN verdict = 'rejected' THEN 1 END))
    FROM tasks INDEXED BY tasks_reviewed WHERE run_id = :runId AND review = 1) AS review,
  (SELECT count(*) FROM decisions WHERE run_id = :runId AND verdict = 'reroll') AS rerolls_asked,
  ${listOf(
    'state, tasks, net',
    `(SELECT state, count(*) AS tasks,
        CAST(total((SELECT total(CASE kind WHEN 'charge' THEN ${micro('tokens')} ELSE -${micro('tokens')} END)
          FROM ledger AS l WHERE l.run_id = t.run_id AND l.task_id = t.task_id)) AS INTEGER) AS net
      FROM tasks AS t WHERE run_id = :runId AND state IN ('unfetched', 'stalled', 'lost') GROUP BY state) AS d`,
  )} AS not_on_disk,
  ${listOf('task_id, seq', firstOf('in_doubt', 'f'))} AS in_doubt,
  ${listOf(
    'task_id, seq',
    `(SELECT task_id, seq FROM tasks INDEXED BY tasks_reviewed
       WHERE run_id = :runId AND review = 1 AND state = 'done' AND verdict IS NULL ORDER BY seq LIMIT ${ACCOUNT_ID_LIMIT}) AS w`,
  )} AS awaiting,
  ${listOf(
    'task_id, seq',
    // Per state through (run_id, state, seq), merged here: an IN list would sort a million pending rows.
    `(${GOES_ON.map((state, i) => `SELECT task_id, seq FROM ${firstOf(state, `g${i}`)}`).join(' UNION ALL ')}) AS u`,
  )} AS unfinished`;

interface AccountRow {
  /** JSON: [state, n, tokens, min, max][]. */
  states: string;
  /** JSON: [kind, jobs, tasks, charged, refunded][]. */
  money: string;
  awaiting_review: number;
  /** JSON: [reviewed, awaiting, approved, rejected]. */
  review: string;
  rerolls_asked: number;
  /** JSON: [state, tasks, net micro-tokens][]. */
  not_on_disk: string;
  /** JSON: [task_id, seq][] each. */
  in_doubt: string;
  awaiting: string;
  unfinished: string;
}

type Cell = string | number;

/** A JSON list of the statement, its rows as arrays. */
function rows(json: string): Cell[][] {
  return JSON.parse(json) as Cell[][];
}

/** The first ACCOUNT_ID_LIMIT ids of a list of [task_id, seq], by seq. */
function firstIds(json: string): string[] {
  return rows(json)
    .sort((a, b) => Number(a[1]) - Number(b[1]))
    .slice(0, ACCOUNT_ID_LIMIT)
    .map((r) => String(r[0]));
}

export class AccountReadStore {
  readonly #read: (runId: string) => AccountFacts;

  constructor(db: Db) {
    const account = db.prepare<{ runId: string }, AccountRow>(ACCOUNT_SQL);
    this.#read = (runId) => {
      const row = account.get({ runId });
      if (row === undefined) throw new Error('the account statement gave no row');
      return factsOf(row);
    };
  }

  /** Every fact of the run's account, read in one statement. */
  accountFacts(runId: string): AccountFacts {
    return this.#read(runId);
  }
}

function factsOf(row: AccountRow): AccountFacts {
  const counts = emptyTaskCounts();
  const states: StateEstimate[] = rows(row.states).map(([state, n, tokens, min, max]) => {
    const s = state as TaskState;
    if (STORED_TASK_STATES.includes(s)) counts[s] = Number(n);
    return { state: s, tokens: Number(tokens), min: Number(min), max: Number(max) };
  });
  if (counts.pending > 0) {
    counts.awaiting_review = row.awaiting_review;
    counts.pending -= counts.awaiting_review;
  }
  const [reviewed = 0, awaiting = 0, approved = 0, rejected = 0] = (JSON.parse(row.review) as number[]).map(
    Number,
  );
  const { money } = emptyAccountSums();
  for (const [kind, jobs, tasks, charged, refunded] of rows(row.money)) {
    money[kind as MoneyKind] = {
      jobs: Number(jobs),
      tasks: Number(tasks),
      charged: Number(charged),
      refunded: Number(refunded),
    };
  }
  return {
    counts,
    review: {
      reviewed,
      awaiting,
      approved,
      rejected,
      // Pending tasks held by a result nobody decided on: the awaiting_review count itself.
      waiting: counts.awaiting_review,
      rerollsAsked: reviewed > 0 ? row.rerolls_asked : 0,
    },
    estimates: estimatesOf(states),
    money,
    notOnDisk: notOnDiskOf(
      rows(row.not_on_disk).map(([state, tasks, net]) => ({
        state: state as 'unfetched' | 'stalled' | 'lost',
        tasks: Number(tasks),
        // As SQL's asTokens divides the whole micro-tokens: the same double on both backends.
        tokens: Number(net) / 1_000_000,
      })),
    ),
    ids: {
      inDoubt: firstIds(row.in_doubt),
      awaiting: awaiting > 0 ? firstIds(row.awaiting) : [],
      unfinished: firstIds(row.unfinished),
    },
  };
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
