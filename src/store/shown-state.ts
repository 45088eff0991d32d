// `awaiting_review`: the state a user sees for a downstream whose reviewed upstream has its
// result and nobody approved it yet. It is DERIVED here, in this one place, and never stored: the task stays
// `pending` in the tasks table with `waits` > 0 (migration 11's triggers count an unapproved reviewed
// upstream as not done), so the only thing that ever decides a submission -- nextPending's `waits = 0` --
// is untouched and cannot release it before approval; no new transition, no table rebuild. Every reader
// that shows or filters states (counts, report rows, the view) takes the state through this module.

/**
 * The SQL predicate "this pending task waits for a person": an upstream that is reviewed, done and not
 * decided on. `t` is the alias of the tasks table in the caller's statement. Cheap: `waits > 0` first,
 * then the upstreams of that one task through task_upstreams' primary key.
 */
export function awaitsReviewSql(t: string): string {
  return `(${t}.state = 'pending' AND ${t}.waits > 0 AND EXISTS (SELECT 1 FROM task_upstreams AS aw_u
    JOIN tasks AS aw_up ON aw_up.run_id = aw_u.run_id AND aw_up.task_id = aw_u.upstream_id
    WHERE aw_u.run_id = ${t}.run_id AND aw_u.task_id = ${t}.task_id
      AND aw_up.review = 1 AND aw_up.state = 'done' AND aw_up.verdict IS NULL))`;
}

/** The state as shown: `awaiting_review` for a pending task that waits for a person, else the stored one. */
export function shownStateSql(t: string): string {
  return `(CASE WHEN ${awaitsReviewSql(t)} THEN 'awaiting_review' ELSE ${t}.state END)`;
}

/**
 * The stored states to read for these shown ones (`awaiting_review` is stored as `pending`), for a filter
 * that goes through the (run_id, state, …) indexes before the shown state is compared.
 */
export function storedStatesFor(states: readonly string[]): string[] {
  const stored = new Set(states.map((s) => (s === 'awaiting_review' ? 'pending' : s)));
  return [...stored];
}
