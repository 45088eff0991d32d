// Migrations 13 and 16 as a user's state meets them: an older state's runs get their budget from their settings and
// their ledger's totals, tasks in doubt or being sent keep their worst case, re-rolls asked for hold
// theirs; afterwards the triggers keep budgets and totals and give worst cases back. Run on SQLite here
// and on PostgreSQL by postgres.test.ts (each backend's own spelling of the migration).
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/store/db.js';
import { isPostgresUrl } from '../../src/store/location.js';
import { MIGRATIONS } from '../../src/store/migrations.js';
import { PG_MIGRATIONS } from '../../src/store/pg/migrations.js';
import { openPgDatabase } from '../../src/store/pg/open.js';
import { FakeClock, rawDatabase, stateFor, useTempDirs } from './helpers.js';

const temp = useTempDirs();

/** A state file (or its database) at schema 12, before money was in the store, with what an earlier version left in it. */
function olderState(): string {
  const file = join(temp.dir(), 'state.db');
  const state = stateFor(file);
  const now = new FakeClock().now;
  if (isPostgresUrl(state)) {
    // A test's database is copied from one at the current schema: emptied to start from schema 12.
    const raw = rawDatabase(file);
    raw.exec('DROP SCHEMA public CASCADE; CREATE SCHEMA public');
    raw.close();
  }
  const db = isPostgresUrl(state)
    ? openPgDatabase(state, now, PG_MIGRATIONS.slice(0, 12))
    : openDatabase(state, now, MIGRATIONS.slice(0, 12));
  const run = db.prepare(
    `INSERT INTO runs (id, manifest_path, manifest_name, state, settings, created_at)
     VALUES (?, '/m/a.yaml', 'a', 'interrupted', ?, '2026-11-01T00:00:00.000Z')`,
  );
  run.run('priced', JSON.stringify({ budget: 2.5 }));
  run.run('worded', JSON.stringify({ budget: 'lots' }));
  run.run('zero', JSON.stringify({ budget: 0 }));
  run.run('none', '{}');
  const task = db.prepare(
    `INSERT INTO tasks (run_id, task_id, seq, model, endpoint, body, body_hash, est_tokens, est_min, est_max,
       est_basis, est_assumed, state, review, attempt, updated_at)
     VALUES ('priced', ?, ?, 'm', '/e', '{}', 'h', 0.1, 0.1, ?, 'flat', 0, ?, ?, ?, '2026-11-01T00:00:01.000Z')`,
  );
  task.run('doubt', 1, 0.7, 'in_doubt', 0, 1);
  task.run('sending', 2, 0.25, 'submitting', 0, 1);
  task.run('reroll', 3, 0.4, 'pending', 1, 2);
  task.run('waiting', 4, 0.9, 'pending', 0, 1);
  task.run('charged', 5, 0.3, 'done', 0, 1);
  const ledger = db.prepare(
    `INSERT INTO ledger (key_fingerprint, period, run_id, task_id, img_uuid, kind, tokens, at)
     VALUES ('k', '2026-11', 'priced', 'charged', ?, ?, ?, '2026-11-01T00:00:02.000Z')`,
  );
  ledger.run('u1', 'charge', 0.3);
  ledger.run('u0', 'charge', 0.2);
  ledger.run('u0', 'refund', 0.1);
  db.close();
  return file;
}

describe('migration 13 on a state an earlier version wrote', () => {
  it('gives each run its budget and ledger totals, and reserves what was in flight, in doubt or re-rolled', () => {
    const store = temp.open(olderState());
    expect(store.reservations.figures('priced')).toEqual({
      budget: 2_500_000,
      charged: 500_000,
      refunded: 100_000,
      held: 400_000,
      doubt: 950_000,
    });
    for (const id of ['worded', 'zero', 'none']) {
      expect(store.reservations.figures(id).budget, id).toBeUndefined();
    }
  });

  it('then keeps them: a changed budget, a re-roll blocked, a doubt sent back to the queue', () => {
    const store = temp.open(olderState());
    store.runs.updateRunSettings('priced', { budget: 3.0000004 });
    store.runs.updateRunSettings('none', { budget: 1 });
    store.tasks.markBlocked('priced', 'reroll', 'over budget');
    store.tasks.requeueTasks('priced', ['doubt'], ['in_doubt']);
    expect(store.reservations.figures('priced')).toEqual({
      budget: 3_000_000,
      charged: 500_000,
      refunded: 100_000,
      held: 0,
      doubt: 250_000,
    });
    expect(store.reservations.figures('none').budget).toBe(1_000_000);
  });

  it("migration 16 totals the older ledger per manifest and period, for a schedule's period budget", () => {
    const store = temp.open(olderState());
    // 0.3 + 0.2 charged, 0.1 refunded in 2026-11; held 0.4 and doubt 0.95 open in the manifest's runs.
    expect(store.reservations.periodFigures('/m/a.yaml', '2026-11')).toEqual({
      spent: 400_000,
      reserved: 1_350_000,
    });
    expect(store.reservations.periodFigures('/m/a.yaml', '2026-10')).toEqual({
      spent: 0,
      reserved: 1_350_000,
    });
    expect(store.reservations.figures('priced').period).toBeUndefined();
  });
});
