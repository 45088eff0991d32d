// The few statements of the store that PostgreSQL cannot run even rewritten (sql.ts): SQLite's "bare
// column" beside max(), which takes the value from the row holding the maximum. Each is keyed by its SQLite
// text (whitespace folded); a statement changed in its sub-store no longer matches, and the contract suite
// on PostgreSQL then fails on it, so the two are changed together.

const fold = (sql: string): string => sql.replace(/\s+/g, ' ').trim();

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
  ].map(([sqlite, pg]) => [fold(sqlite as string), pg as string]),
);

/** The statement to rewrite for PostgreSQL: its override, or itself. */
export function pgOverride(sql: string): string {
  return OVERRIDES.get(fold(sql)) ?? sql;
}
