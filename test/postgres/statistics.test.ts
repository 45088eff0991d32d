// PostgreSQL plans a statement by what it last counted of a table. A new run's tasks go in by COPY, which
// counts nothing: without a count, the move of one task (`WHERE run_id AND task_id AND state = 'pending'`)
// went through the state index and read every pending task of the run, once per submission. The store
// counts the table once a new run's first tasks are in, when its role owns the table.
import { afterAll, describe, expect, it, vi } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { PgDb } from '../../src/store/pg/db.js';
import { startPostgres } from '../helpers/postgres.js';
import { task } from '../store/helpers.js';

vi.setConfig({ testTimeout: 60_000 });

const pg = await startPostgres();
afterAll(() => pg.stop());

const counted = (db: PgDb) =>
  db.prepare(`SELECT reltuples FROM pg_class WHERE oid = 'tasks'::regclass`).pluck().get() as number;

const tasks = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => task(`${prefix}${i}`));

describe("a new run's tasks on PostgreSQL", () => {
  it('are counted for the planner once stored, and one task is then read by its primary key', () => {
    const url = pg.freshDatabase();
    const store = openStore(url);
    const db = new PgDb(url);
    try {
      store.runs.createRun({ id: 'r1', manifestPath: '/m.yaml', manifestName: 'm', settings: {} });
      store.tasks.upsertTasks('r1', tasks(2000, 't'));
      expect(counted(db)).toBe(2000);
      const plan = db
        .prepare(
          `EXPLAIN UPDATE tasks SET state = 'submitting' WHERE run_id = 'r1' AND task_id = 't7' AND state = 'pending'`,
        )
        .pluck()
        .all()
        .join('\n');
      expect(plan).toContain('tasks_pkey');
    } finally {
      db.close();
      store.close();
    }
  });

  it('are stored by a role that may only read and write the tables, which leaves the count to autovacuum', () => {
    const url = pg.freshDatabase();
    openStore(url).close();
    const owner = new PgDb(url);
    owner.exec(`DO $$ BEGIN CREATE ROLE worker LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
    owner.exec('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO worker');
    owner.exec('GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO worker');
    const store = openStore(url.replace('postgres@', 'worker@'));
    try {
      store.runs.createRun({ id: 'r1', manifestPath: '/m.yaml', manifestName: 'm', settings: {} });
      expect(store.tasks.upsertTasks('r1', tasks(50, 'w')).inserted).toBe(50);
      expect(counted(owner)).toBeLessThan(50);
    } finally {
      store.close();
      owner.close();
    }
  });
});
