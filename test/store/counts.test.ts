// The tasks per state of a run are kept in task_counts by triggers, so progress and status read a
// handful of rows at any size. They must equal a real count after any sequence of changes, and after reopen.
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { STORED_TASK_STATES, TASK_STATES } from '../../src/store/types.js';
import { rawDatabase, stateFor, task, useStoreWithRun } from './helpers.js';

const ctx = useStoreWithRun();

function counted(file: string, runId: string): Record<string, number> {
  const db = rawDatabase(file, { readonly: true });
  const rows = db
    .prepare('SELECT state, count(*) AS n FROM tasks WHERE run_id = ? GROUP BY state')
    .all(runId) as { state: string; n: number }[];
  db.close();
  const counts: Record<string, number> = Object.fromEntries(TASK_STATES.map((s) => [s, 0]));
  for (const r of rows) counts[r.state] = r.n;
  return counts;
}

/** A small deterministic random sequence, so a failure can be replayed. */
function sequence(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
}

describe('task counts per state', () => {
  it("equal a real count after the store's inserts, moves by every writer, deletes, and a reopen", () => {
    const store = ctx.store();
    store.runs.createRun({ id: 'r2', manifestPath: '/m/other.yaml', manifestName: 'other', settings: {} });
    store.tasks.upsertTasks(
      'r1',
      Array.from({ length: 300 }, (_, i) => task(`t${i}`)),
    );
    store.tasks.upsertTasks('r2', [task('x'), task('y')]);
    expect(store.tasks.countTasksByState('r1')).toEqual(counted(ctx.file(), 'r1'));
    expect(store.tasks.countTasksByState('r1').pending).toBe(300);

    // Moves through the store's own paths, then any state at all by another writer (the triggers see both).
    for (let i = 0; i < 100; i++) store.submissions.recordSubmitIntent('r1', `t${i}`);
    store.tasks.requeueTasks('r1', ['t1', 't2', 't3'], ['submitting']);
    const raw = rawDatabase(ctx.file());
    const random = sequence(7);
    // One script of 2,000 updates, one after another in one transaction: the triggers fire for each row
    // all the same, and PostgreSQL is spared 2,000 round trips.
    const updates: string[] = [];
    for (let i = 0; i < 2_000; i++) {
      const state = STORED_TASK_STATES[Math.floor(random() * STORED_TASK_STATES.length)] ?? 'pending';
      const id = `t${Math.floor(random() * 300)}`;
      // A move, an estimate changed in place (a chained task's filled-in request), or both at once.
      const kind = random();
      const est = `est_tokens = ${Math.floor(random() * 5_000) / 1_000}, est_max = ${Math.floor(random() * 9_000) / 1_000}`;
      const set = kind < 0.6 ? `state = '${state}'` : kind < 0.8 ? est : `state = '${state}', ${est}`;
      updates.push(`UPDATE tasks SET ${set} WHERE run_id = 'r1' AND task_id = '${id}';`);
    }
    raw.exec(`BEGIN; ${updates.join('\n')} COMMIT;`);
    raw.prepare("DELETE FROM tasks WHERE run_id = 'r1' AND task_id IN ('t250', 't251')").run();
    raw.close();

    const expected = counted(ctx.file(), 'r1');
    expect(store.tasks.countTasksByState('r1')).toEqual(expected);
    expect(Object.values(expected).reduce((a, b) => a + b, 0)).toBe(298);
    expect(store.tasks.countTasksByState('r2')).toEqual(counted(ctx.file(), 'r2'));
    expect(store.accountFacts('r1').estimates).toEqual(store.accountSumsByScan('r1').estimates);

    store.close();
    const again = openStore(stateFor(ctx.file()));
    try {
      expect(again.tasks.countTasksByState('r1')).toEqual(expected);
    } finally {
      again.close();
    }
  });

  it('are not changed by a transaction that rolls back', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a'), task('b')]);
    const before = store.tasks.countTasksByState('r1');
    expect(() => store.tasks.upsertTasks('r1', [task('c'), task('c')])).toThrow(/listed twice/);
    expect(store.tasks.countTasksByState('r1')).toEqual(before);
    expect(before).toEqual(counted(ctx.file(), 'r1'));
  });
});
