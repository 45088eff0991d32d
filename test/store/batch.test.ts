import { describe, expect, it } from 'vitest';
import { rawDatabase, task, useStoreWithRun } from './helpers.js';

const ctx = useStoreWithRun();

describe('batch: several writes, one commit', () => {
  it('commits every write that succeeds and rolls back only the one that throws', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a'), task('b'), task('c')]);
    const results = store.batch([
      () => store.submissions.recordSubmitIntent('r1', 'a'),
      () => store.tasks.markDone('r1', 'b'), // refused: b is pending, not downloading
      () => store.submissions.recordSubmitIntent('r1', 'c'),
    ]);
    expect(results.map((r) => r.ok)).toEqual([true, false, true]);
    expect(results[0]).toEqual({ ok: true, value: 1 });
    // Another connection sees the committed writes: the batch is durable when it returns.
    const other = rawDatabase(ctx.file(), { readonly: true });
    const states = other.prepare('SELECT task_id, state FROM tasks ORDER BY task_id').all();
    other.close();
    expect(states).toEqual([
      { task_id: 'a', state: 'submitting' },
      { task_id: 'b', state: 'pending' },
      { task_id: 'c', state: 'submitting' },
    ]);
    // A second batch starts fresh.
    expect(store.batch([() => store.submissions.recordSubmitIntent('r1', 'b')])).toEqual([
      { ok: true, value: 1 },
    ]);
  });
});
