// The few statements of the store that PostgreSQL cannot run even rewritten (sql.ts): SQLite's "bare
// column" beside max() (the value from the row holding the maximum), sums of comparisons (SQLite's
// booleans are numbers), an outer column in a subquery of an aggregate. Each is keyed by its SQLite
// text (whitespace folded); a statement changed in its sub-store no longer matches, and the contract suite
// on PostgreSQL then fails on it, so the two are changed together.

import { ACCOUNT_SQL } from '../account-reads.js';
import { REQUEST_TEXT_FIELDS, requestTextSql, TASK_PAGE_SQL } from '../report-reads.js';

const fold = (sql: string): string => sql.replace(/\s+/g, ' ').trim();

/**
 * The report's page of tasks with the request's text fields read from the body parsed once per row
 * (json_doc, migration 21: the document, or NULL when the body is not JSON), where SQLite's form calls
 * json_valid, json_type and json_extract for each field (fifteen function calls, ten parses, a row).
 */
function taskPage(): string {
  const fields = REQUEST_TEXT_FIELDS.reduce(
    (sql, field) =>
      sql.replace(
        requestTextSql(field),
        `CASE WHEN jsonb_typeof(b.doc -> '${field}') = 'string' THEN b.doc ->> '${field}' END AS ${field}`,
      ),
    TASK_PAGE_SQL,
  );
  // OFFSET 0 keeps the subquery a subquery: pulled up, json_doc would run once per field again.
  return fields.replace(
    'FROM tasks AS t WHERE',
    'FROM tasks AS t CROSS JOIN LATERAL (SELECT json_doc(t.body) AS doc OFFSET 0) AS b WHERE',
  );
}

const OVERRIDES = new Map<string, string>(
  [
    [
      `SELECT task_id, sent_at, max(attempt_no) AS n, count(*) AS total,
         count(CASE WHEN outcome = 'submitted' THEN 1 END) AS charged
       FROM attempts WHERE run_id = :runId AND task_id IN (SELECT value FROM json_each(:ids)) GROUP BY task_id`,
      `SELECT task_id, (array_agg(sent_at ORDER BY attempt_no DESC))[1] AS sent_at, max(attempt_no) AS n, count(*) AS total,
         count(CASE WHEN outcome = 'submitted' THEN 1 END) AS charged
       FROM attempts WHERE run_id = :runId AND task_id IN (SELECT value FROM json_each(:ids)) GROUP BY task_id`,
    ],
    [
      `SELECT count(*) AS reviewed,
         coalesce(sum(state = 'done' AND verdict IS NULL), 0) AS awaiting,
         coalesce(sum(verdict = 'approved'), 0) AS approved,
         coalesce(sum(verdict = 'rejected'), 0) AS rejected
       FROM tasks INDEXED BY tasks_reviewed WHERE run_id = ? AND review = 1`,
      `SELECT count(*) AS reviewed,
         count(*) FILTER (WHERE state = 'done' AND verdict IS NULL) AS awaiting,
         count(*) FILTER (WHERE verdict = 'approved') AS approved,
         count(*) FILTER (WHERE verdict = 'rejected') AS rejected
       FROM tasks WHERE run_id = ? AND review = 1`,
    ],
    [
      `SELECT (total(CAST(round(c.tokens * 1000000) AS INTEGER)) / 1000000.0) AS charged, count(*) AS jobs,
         ((SELECT total(CAST(round(r.tokens * 1000000) AS INTEGER)) FROM ledger r WHERE r.kind = 'refund'
           AND r.img_uuid IN (SELECT img_uuid FROM ledger WHERE run_id = c.run_id AND kind = 'charge' AND reroll = 1))
           / 1000000.0) AS refunded
       FROM ledger c WHERE c.run_id = ? AND c.kind = 'charge' AND c.reroll = 1`,
      `SELECT (total(CAST(round(c.tokens * 1000000) AS INTEGER)) / 1000000.0) AS charged, count(c.id) AS jobs,
         ((SELECT total(CAST(round(r.tokens * 1000000) AS INTEGER)) FROM ledger r WHERE r.kind = 'refund'
           AND r.img_uuid IN (SELECT img_uuid FROM ledger WHERE run_id = x.run_id AND kind = 'charge' AND reroll = 1))
           / 1000000.0) AS refunded
       FROM (SELECT CAST(? AS TEXT) AS run_id) AS x
         LEFT JOIN ledger c ON c.run_id = x.run_id AND c.kind = 'charge' AND c.reroll = 1
       GROUP BY x.run_id`,
    ],
    // A claim skips the rows another worker's claim holds locked (graphile-worker's and pg-boss's way):
    // the workers never queue behind each other for the same pending tasks.
    [
      `UPDATE tasks SET claimed_by = :worker
     WHERE rowid IN (SELECT rowid FROM tasks WHERE run_id = :runId AND state = 'pending' AND waits = 0
       AND (claimed_by IS NULL OR claimed_by = :worker OR claimed_by IN (SELECT worker_id FROM workers
         WHERE run_id = :runId AND (stopped_at IS NOT NULL OR lost_at IS NOT NULL)))
       AND (:only IS NULL OR task_id IN (SELECT value FROM json_each(:only)))
       AND (:skip IS NULL OR task_id NOT IN (SELECT value FROM json_each(:skip)))
       ORDER BY expected_ms DESC, seq LIMIT :limit)
     RETURNING *`,
      `WITH next AS (SELECT rowid FROM tasks WHERE run_id = :runId AND state = 'pending' AND waits = 0
         AND (claimed_by IS NULL OR claimed_by = :worker OR claimed_by IN (SELECT worker_id FROM workers
           WHERE run_id = :runId AND (stopped_at IS NOT NULL OR lost_at IS NOT NULL)))
         AND (CAST(:only AS TEXT) IS NULL OR task_id IN (SELECT value FROM json_each(:only)))
         AND (CAST(:skip AS TEXT) IS NULL OR task_id NOT IN (SELECT value FROM json_each(:skip)))
         ORDER BY expected_ms DESC, seq LIMIT :limit FOR UPDATE SKIP LOCKED)
       UPDATE tasks SET claimed_by = :worker FROM next WHERE tasks.rowid = next.rowid
       RETURNING tasks.*`,
    ],
    [
      `UPDATE tasks SET claimed_by = :worker
     WHERE rowid IN (SELECT rowid FROM tasks WHERE run_id = :runId AND state = 'pending' AND waits = 0
       AND (claimed_by IS NULL OR claimed_by = :worker OR claimed_by IN (SELECT worker_id FROM workers
         WHERE run_id = :runId AND (stopped_at IS NOT NULL OR lost_at IS NOT NULL)))
       AND (:only IS NULL OR task_id IN (SELECT value FROM json_each(:only)))
       AND (:skip IS NULL OR task_id NOT IN (SELECT value FROM json_each(:skip)))
       ORDER BY seq LIMIT :limit)
     RETURNING *`,
      `WITH next AS (SELECT rowid FROM tasks WHERE run_id = :runId AND state = 'pending' AND waits = 0
         AND (claimed_by IS NULL OR claimed_by = :worker OR claimed_by IN (SELECT worker_id FROM workers
           WHERE run_id = :runId AND (stopped_at IS NOT NULL OR lost_at IS NOT NULL)))
         AND (CAST(:only AS TEXT) IS NULL OR task_id IN (SELECT value FROM json_each(:only)))
         AND (CAST(:skip AS TEXT) IS NULL OR task_id NOT IN (SELECT value FROM json_each(:skip)))
         ORDER BY seq LIMIT :limit FOR UPDATE SKIP LOCKED)
       UPDATE tasks SET claimed_by = :worker FROM next WHERE tasks.rowid = next.rowid
       RETURNING tasks.*`,
    ],
    // The workers leaving one run take its row's lock in turn: one of them is the last.
    ['SELECT id FROM runs WHERE id = ?', 'SELECT id FROM runs WHERE id = ? FOR UPDATE'],
    // A budget check (reservations.ts) holds its run's money lock until its transaction ends, so the next
    // check of that budget reads what this one reserved; a fired run's check holds its period's lock too.
    // Advisory locks keyed by the run (the manifest and period): the answers that book charges on the run's
    // rows are not held up by them, and they cannot change what a check allows (a charge settles the worst
    // case it replaces in the same commit). A hash shared by two runs only makes them take turns.
    [
      'SELECT run_id FROM run_money WHERE run_id = ?',
      `SELECT pg_advisory_xact_lock(hashtextextended('mediabatch money ' || ?, 0))`,
    ],
    [
      'SELECT manifest_path FROM period_money WHERE manifest_path = ? AND period = ?',
      `SELECT pg_advisory_xact_lock(hashtextextended('mediabatch period ' || ? || ' ' || ?, 0))`,
    ],
    // The counts of tasks a plan inserts, under the run's counts lock, which the commit of every task's
    // move takes (PostgreSQL migration 19) before its rows of task_counts: taken in that order by both, a
    // plan and a worker's commit never wait for each other in a circle.
    [
      `INSERT INTO task_counts (run_id, state, n, est_micro, est_min_micro, est_max_micro)
       VALUES (?, 'pending', ?, ?, ?, ?)
       ON CONFLICT (run_id, state) DO UPDATE SET n = task_counts.n + excluded.n,
         est_micro = task_counts.est_micro + excluded.est_micro,
         est_min_micro = task_counts.est_min_micro + excluded.est_min_micro,
         est_max_micro = task_counts.est_max_micro + excluded.est_max_micro`,
      `INSERT INTO task_counts (run_id, state, n, est_micro, est_min_micro, est_max_micro)
       SELECT k.run_id, 'pending', k.n, k.est, k.est_min, k.est_max
       FROM (SELECT CAST(? AS TEXT) AS run_id, CAST(? AS BIGINT) AS n, CAST(? AS BIGINT) AS est,
               CAST(? AS BIGINT) AS est_min, CAST(? AS BIGINT) AS est_max) AS k
         CROSS JOIN LATERAL (SELECT pg_advisory_xact_lock(hashtextextended('mediabatch counts ' || k.run_id, 0))) AS l
       ON CONFLICT (run_id, state) DO UPDATE SET n = task_counts.n + excluded.n,
         est_micro = task_counts.est_micro + excluded.est_micro,
         est_min_micro = task_counts.est_min_micro + excluded.est_min_micro,
         est_max_micro = task_counts.est_max_micro + excluded.est_max_micro`,
    ],
    // A task a transaction reads, decides on and then writes (a review decision, a doubt resolved by a
    // callback), locked for that transaction: two of them on one task take turns.
    [
      'SELECT state AS locked FROM tasks WHERE run_id = ? AND task_id = ?',
      'SELECT state AS locked FROM tasks WHERE run_id = ? AND task_id = ? FOR UPDATE',
    ],
    // A resumed run's tasks, a thousand ids at a time: one look-up through the primary key per id, whatever
    // the planner believes of the table (right after a million rows went in, its statistics still say a few
    // hundred, and it would read the whole run for every thousand ids).
    [
      `SELECT task_id, body_hash, state, est_tokens, est_min, est_max, est_basis, est_assumed, retries, file_name, expected_ms,
         planned_body, review
       FROM tasks WHERE run_id = ? AND task_id IN (SELECT value FROM json_each(?))`,
      `WITH r AS (SELECT CAST(? AS TEXT) AS run_id)
       SELECT t.* FROM r, json_each(?) AS j, LATERAL (
         SELECT task_id, body_hash, state, est_tokens, est_min, est_max, est_basis, est_assumed, retries, file_name,
           expected_ms, planned_body, review
         FROM tasks WHERE tasks.run_id = r.run_id AND tasks.task_id = j.value LIMIT 1) AS t`,
    ],
    [TASK_PAGE_SQL, taskPage()],
    // The account's one statement: SQLite's JSON lists in PostgreSQL's words (json_agg is NULL over no
    // rows, which the statement's coalesce turns into '[]' as SQLite's json_group_array gives).
    [
      ACCOUNT_SQL,
      ACCOUNT_SQL.replaceAll('json_group_array(', 'json_agg(').replaceAll('json_array(', 'json_build_array('),
    ],
  ].map(([sqlite, pg]) => [fold(sqlite as string), pg as string]),
);

/**
 * A token amount in whole micro-tokens (an estimate, a ledger's tokens, a parameter): PostgreSQL's round()
 * of a double breaks ties to even; micro() (migrations 13 and 23) rounds as SQLite's round() does.
 */
const MICRO = /CAST\(round\(((?:\w+\.)?\w+|\?) \* 1000000\) AS INTEGER\)/g;

/** The statement to rewrite for PostgreSQL: its override, or itself, token amounts rounded as SQLite does. */
export function pgOverride(sql: string): string {
  return (OVERRIDES.get(fold(sql)) ?? sql).replace(MICRO, 'micro($1)');
}
