import { describe, expect, it } from 'vitest';
import { onPostgres, rawDatabase, submit, task, useStoreWithRun } from './helpers.js';

const ctx = useStoreWithRun();

/**
 * Every rule a column of a task's rows holds (a state among the known ones, a flag 0 or 1, a count not below
 * zero, a period's shape…), written once as an UPDATE that breaks it. SQLite holds them as CHECKs; PostgreSQL
 * as its columns' types (domains, migrations 25 and 26), checked only where a statement sets the column.
 */
const BROKEN: readonly string[] = [
  `UPDATE tasks SET state = 'queued'`,
  `UPDATE tasks SET est_assumed = 2`,
  `UPDATE tasks SET cost_assumed = -1`,
  `UPDATE tasks SET recovered = 2`,
  `UPDATE tasks SET review = 2`,
  `UPDATE tasks SET verdict = 'maybe'`,
  `UPDATE tasks SET source = 'push'`,
  `UPDATE tasks SET planned_estimate = '{"tokens":'`,
  `UPDATE tasks SET retries = -1`,
  `UPDATE tasks SET expected_ms = -1`,
  `UPDATE tasks SET waits = -1`,
  `UPDATE tasks SET attempt = 0`,
  `UPDATE tasks SET version = 0`,
  `UPDATE attempts SET outcome = 'maybe'`,
  `UPDATE attempts SET attempt_no = 0`,
  `UPDATE job_events SET source = 'push'`,
  `UPDATE job_events SET record = '{'`,
  `UPDATE files SET kind = 'text'`,
  `UPDATE files SET idx = -1`,
  `UPDATE files SET bytes = -1`,
  `UPDATE ledger SET period = '2026-1'`,
  `UPDATE ledger SET kind = 'gift'`,
  `UPDATE ledger SET tokens = -0.5`,
  `UPDATE ledger SET assumed = 2`,
  `UPDATE ledger SET reroll = 2`,
  `UPDATE ledger SET money_kind = 'bonus'`,
  `UPDATE task_counts SET n = -1`,
  `UPDATE task_counts SET est_micro = -1`,
  `UPDATE task_counts SET est_min_micro = -1`,
  `UPDATE task_counts SET est_max_micro = -1`,
  `UPDATE run_money SET budget = -1`,
  `UPDATE run_money SET charged = -1`,
  `UPDATE run_money SET refunded = -1`,
  `UPDATE run_money SET period = '26-01'`,
  `UPDATE run_money SET period_budget = -1`,
  `UPDATE reservations SET kind = 'gift'`,
  `UPDATE reservations SET amount = -1`,
  `UPDATE reservations SET state = 'gone'`,
  `UPDATE reservations SET charged = -1`,
  `UPDATE account_money SET kind = 'bonus'`,
  `UPDATE account_money SET jobs = -1`,
  `UPDATE account_money SET tasks = -1`,
  `UPDATE account_money SET charged = -1`,
  `UPDATE account_money SET refunded = -1`,
  `UPDATE period_money SET charged = -1`,
  `UPDATE period_money SET refunded = -1`,
  `UPDATE runs SET state = 'paused'`,
  `UPDATE runs SET active_ms = -1`,
  `UPDATE runs SET settings = '{"budget":'`,
  `UPDATE runs SET plan_digest = 'abc'`,
  `UPDATE runs SET plan_tasks = -1`,
  `INSERT INTO uploads (storage, key, sha256, bytes, uploaded_at) VALUES ('s3://b', 'k', 'abc', 1, 'x')`,
  `INSERT INTO uploads (storage, key, sha256, bytes, uploaded_at) VALUES ('s3://b', 'k', '${'a'.repeat(64)}', -1, 'x')`,
  `INSERT INTO decisions (run_id, task_id, attempt, verdict, decided_by, decided_at, version)
   VALUES ('r1', 'a', 1, 'maybe', 'me', 'x', 1)`,
  `INSERT INTO decisions (run_id, task_id, attempt, verdict, decided_by, decided_at, version)
   VALUES ('r1', 'a', 0, 'approve', 'me', 'x', 1)`,
];

describe("the rules of a task's columns", () => {
  it('refuse a value each rule forbids with a CHECK failure, on a row that exists, and keep the allowed ones', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    submit(store, 'r1', 'a', 'uuid-a', 3);
    store.jobs.recordJobStatus(
      'uuid-a',
      'success',
      { img_uuid: 'uuid-a', status: 'success', json: null },
      'poll',
    );
    store.files.recordFile('r1', 'a', { index: 0, kind: 'image', path: '/x.png', bytes: 1, sha256: 'h' });
    const raw = rawDatabase(ctx.file());
    const outcome = (sql: string) => {
      try {
        return raw.prepare(sql).run().changes > 0 ? 'kept' : 'no row';
      } catch (err) {
        return (err as { code?: string }).code;
      }
    };
    for (const sql of BROKEN) expect(outcome(sql), sql).toBe('SQLITE_CONSTRAINT_CHECK');
    // The same columns given values their rules allow: kept, so each refusal above was the rule's.
    for (const sql of [
      `UPDATE tasks SET review = 1, verdict = 'approved', waits = 0, attempt = 2, source = 'callback'`,
      `UPDATE tasks SET planned_estimate = '{"tokens":3}'`,
      `UPDATE ledger SET period = '2026-12', tokens = 0`,
      `UPDATE run_money SET period = '2026-01', budget = NULL`,
      `UPDATE reservations SET state = 'released', charged = NULL`,
      `UPDATE files SET kind = 'json', idx = 0`,
      `UPDATE runs SET state = 'interrupted', active_ms = 0, plan_digest = '${'a'.repeat(64)}', plan_tasks = 0`,
      `INSERT INTO uploads (storage, key, sha256, bytes, uploaded_at) VALUES ('s3://b', 'k', '${'a'.repeat(64)}', 0, 'x')`,
      `INSERT INTO decisions (run_id, task_id, attempt, verdict, decided_by, decided_at, version)
       VALUES ('r1', 'a', 1, 'reroll', 'me', 'x', 1)`,
    ]) {
      expect(outcome(sql), sql).toBe('kept');
    }
    raw.close();
  });

  // A table's CHECK is read back from its text and planned in every statement that writes the table, on
  // PostgreSQL: a rule added later as a CHECK would bring that cost back to every write of its table.
  it.runIf(onPostgres())(
    'are held by column types on PostgreSQL, with no CHECK left on any table and no trigger under a WHEN',
    () => {
      const raw = rawDatabase(ctx.file());
      const checks = raw
        .prepare(
          `SELECT conrelid::regclass::text || '.' || conname FROM pg_constraint
         WHERE contype = 'c' AND conrelid <> 0 AND connamespace = current_schema()::regnamespace ORDER BY 1`,
        )
        .pluck()
        .all();
      // The same holds for a trigger's WHEN condition, read and planned in every statement that may fire it.
      const conditions = raw
        .prepare('SELECT tgname FROM pg_trigger WHERE tgqual IS NOT NULL ORDER BY 1')
        .pluck()
        .all();
      raw.close();
      expect(checks).toEqual([]);
      expect(conditions).toEqual([]);
    },
  );
});
