// A worker leaving a run (or swept as lost) looks only at the tasks it still holds: on PostgreSQL those are
// found by the partial index `tasks_held` (migration 27), which a finished task leaves, so leaving a run of a
// million finished tasks reads what the worker has in hand, not its history (bench/leave.ts measures it).
import { afterAll, describe, expect, it, vi } from 'vitest';
import { HELD_STATES } from '../../src/store/claims.js';
import { openStore } from '../../src/store/index.js';
import { PgDb } from '../../src/store/pg/db.js';
import { startPostgres } from '../helpers/postgres.js';
import { task } from '../store/helpers.js';

vi.setConfig({ testTimeout: 60_000 });

const pg = await startPostgres();
afterAll(() => pg.stop());

describe('the tasks a worker holds on PostgreSQL', () => {
  it('are found by their own index when it leaves, and only they are given back', () => {
    const url = pg.freshDatabase();
    const store = openStore(url);
    const db = new PgDb(url);
    try {
      store.runs.createRun({ id: 'r1', manifestPath: '/m.yaml', manifestName: 'm', settings: {} });
      store.tasks.upsertTasks(
        'r1',
        Array.from({ length: 3000 }, (_, i) => task(`t${String(i).padStart(4, '0')}`)),
      );
      store.workers.join('r1', 'A', 'host-a', 1, 60_000);
      store.workers.join('r1', 'B', 'host-b', 2, 60_000);
      expect(store.claims.claimPending('r1', 'A', 3000, undefined, 'manifest')).toHaveLength(3000);
      // A finished all but ten of them.
      db.exec(`UPDATE tasks SET state = 'done' WHERE run_id = 'r1' AND task_id >= 't0010'`);
      db.exec('ANALYZE tasks');

      const held = HELD_STATES.map((s) => `'${s}'`).join(', ');
      const plan = db
        .prepare(
          `EXPLAIN UPDATE tasks SET claimed_by = NULL WHERE run_id = 'r1' AND claimed_by = 'A' AND state IN (${held})`,
        )
        .pluck()
        .all()
        .join('\n');
      expect(plan).toContain('tasks_held');
      // A worker with nothing left to claim counts what the others hold, every second till the run ends:
      // through the same index.
      const count = db
        .prepare(
          `EXPLAIN SELECT count(*) FROM tasks WHERE run_id = 'r1' AND claimed_by IS NOT NULL AND claimed_by <> 'B' AND state IN (${held})`,
        )
        .pluck()
        .all()
        .join('\n');
      expect(count).toContain('tasks_held');
      const indexes = db
        .prepare(
          `SELECT indexname FROM pg_indexes WHERE tablename = 'tasks' AND indexname LIKE 'tasks_%claim%'`,
        )
        .pluck()
        .all();
      expect(indexes).toEqual([]);

      store.claims.leave('r1', 'A');
      const rows = (where: string) =>
        Number(db.prepare(`SELECT count(*) FROM tasks WHERE run_id = 'r1' AND ${where}`).pluck().get());
      expect(rows(`claimed_by IS NULL`)).toBe(10);
      expect(rows(`claimed_by = 'A' AND state = 'done'`)).toBe(2990);
    } finally {
      db.close();
      store.close();
    }
  });
});
