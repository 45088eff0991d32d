// The store's side of chains. `waits` (migration 9) must equal the real number of upstreams not
// done after any sequence of changes by any writer, so that the ready tasks are an index range; blocked
// and unblocked downstreams follow their upstreams.
import { describe, expect, it } from 'vitest';
import { STORED_TASK_STATES } from '../../src/store/types.js';
import { estimate, rawDatabase, task, useStoreWithRun } from './helpers.js';

const ctx = useStoreWithRun();

function realWaits(file: string): Record<string, number> {
  const db = rawDatabase(file, { readonly: true });
  const rows = db
    .prepare(
      `SELECT t.task_id AS id, t.waits AS stored,
         (SELECT count(*) FROM task_upstreams u WHERE u.run_id = t.run_id AND u.task_id = t.task_id
            AND (SELECT up.state FROM tasks up WHERE up.run_id = u.run_id AND up.task_id = u.upstream_id) IS NOT 'done') AS real
       FROM tasks t WHERE t.run_id = 'r1'`,
    )
    .all() as Array<{ id: string; stored: number; real: number }>;
  db.close();
  const wrong: Record<string, number> = {};
  for (const r of rows) if (r.stored !== r.real) wrong[r.id] = r.stored - r.real;
  return wrong;
}

const chained = (id: string, ...ups: string[]) => ({
  ...task(id),
  upstreams: ups.map((u, i) => ({ name: ups.length === 1 ? '' : `n${i}`, taskId: u })),
});

describe('chains in the store', () => {
  it('fill a downstream in with its exact price, and restore its planned request and range', () => {
    const store = ctx.store();
    const planned = {
      ...chained('clip', 'still'),
      estimate: estimate(2.5, { min: 1.25, max: 60.5, assumedPrice: true }),
    };
    store.tasks.upsertTasks('r1', [task('still'), planned]);
    const before = store.tasks.getTask('r1', 'clip');
    const filled = store.chains.fillIn('r1', 'clip', '{"prompt":"filled"}', estimate(5.125));
    expect(filled.estimate).toEqual(estimate(5.125));
    expect(store.chains.restorePlanned('r1', 'clip')).toBe(true);
    const restored = store.tasks.getTask('r1', 'clip');
    expect(restored?.wireBody).toBe(before?.wireBody);
    expect(restored?.estimate).toEqual(planned.estimate);
    // Nothing filled in any more: nothing to restore.
    expect(store.chains.restorePlanned('r1', 'clip')).toBe(false);
  });

  it('keep waits exact through inserts (a downstream before its upstream), moves by any writer, and resumes', () => {
    const store = ctx.store();
    // clip-i waits for still-i; poster-i waits for clip-i and still-i; written downstream first.
    const specs = [];
    for (let i = 0; i < 40; i++) specs.push(chained(`poster-${i}`, `clip-${i}`, `still-${i}`));
    for (let i = 0; i < 40; i++) specs.push(chained(`clip-${i}`, `still-${i}`));
    for (let i = 0; i < 40; i++) specs.push(task(`still-${i}`));
    store.tasks.upsertTasks('r1', specs);
    expect(realWaits(ctx.file())).toEqual({});
    expect(store.tasks.nextPending('r1', 1_000, undefined, 'manifest').map((t) => t.taskId)).toEqual(
      Array.from({ length: 40 }, (_, i) => `still-${i}`),
    );

    const raw = rawDatabase(ctx.file());
    let x = 11;
    const random = () => {
      x = (x * 1103515245 + 12345) % 2 ** 31;
      return x / 2 ** 31;
    };
    const ids = specs.map((s) => s.taskId);
    // One script of 1,500 updates, one after another in one transaction: the triggers fire for each row
    // all the same, and PostgreSQL is spared 1,500 round trips.
    const updates: string[] = [];
    for (let i = 0; i < 1_500; i++) {
      const state =
        random() < 0.4
          ? 'done'
          : (STORED_TASK_STATES[Math.floor(random() * STORED_TASK_STATES.length)] ?? 'pending');
      const id = ids[Math.floor(random() * ids.length)];
      updates.push(`UPDATE tasks SET state = '${state}' WHERE run_id = 'r1' AND task_id = '${id}';`);
    }
    raw.exec(`BEGIN; ${updates.join('\n')} COMMIT;`);
    raw.close();
    expect(realWaits(ctx.file())).toEqual({});
    // A resume of the same manifest rewrites the links: still exact.
    store.tasks.upsertTasks('r1', specs);
    expect(realWaits(ctx.file())).toEqual({});
    // The ready ones are exactly the pending tasks whose upstreams are all done.
    const db = rawDatabase(ctx.file(), { readonly: true });
    const state = new Map(
      (
        db.prepare("SELECT task_id, state FROM tasks WHERE run_id = 'r1'").all() as Array<{
          task_id: string;
          state: string;
        }>
      ).map((r) => [r.task_id, r.state]),
    );
    db.close();
    const ready = specs
      .filter(
        (s) =>
          state.get(s.taskId) === 'pending' &&
          (s.upstreams ?? []).every((u) => state.get(u.taskId) === 'done'),
      )
      .map((s) => s.taskId)
      .sort();
    expect(
      store.tasks
        .nextPending('r1', 1_000)
        .map((t) => t.taskId)
        .sort(),
    ).toEqual(ready);
  });

  // On PostgreSQL a new run's links go in by COPY, 10,000 a statement: these 10,050 take two.
  it("keep waits exact for a new run's many links, in more than one statement", () => {
    const store = ctx.store();
    const specs = [task('root')];
    for (let i = 0; i < 10_050; i++) specs.push(chained(`clip-${i}`, i % 2 === 0 ? 'root' : `clip-${i - 1}`));
    store.tasks.upsertTasks('r1', specs);
    expect(realWaits(ctx.file())).toEqual({});
    expect(store.chains.upstreamsOf('r1', 'clip-10049')).toEqual([{ name: '', upstreamId: 'clip-10048' }]);
    expect(store.tasks.nextPending('r1', 10, undefined, 'manifest').map((t) => t.taskId)).toEqual(['root']);
  });

  it('block the downstreams of a failed upstream, down the chain, and unblock them when it is requeued', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a'), chained('b', 'a'), chained('c', 'b'), task('z')]);
    const raw = rawDatabase(ctx.file());
    raw
      .prepare("UPDATE tasks SET state = 'failed', error = 'the service failed it' WHERE task_id = 'a'")
      .run();
    raw.close();
    const blocked = store.chains.blockDownstreams('r1');
    expect(blocked.map((b) => b.taskId)).toEqual(['b', 'c']);
    expect(blocked[0]?.reason).toBe(
      'waits for a, which failed (the service failed it): never submitted, nothing charged; run again with --retry-failed to submit a again, and this task follows',
    );
    expect(blocked[1]?.reason).toBe('waits for b, which is blocked: never submitted, nothing charged');
    expect(store.tasks.requeueTasks('r1', ['a'], ['failed'])).toEqual(['a']);
    expect(store.chains.unblockDownstreams('r1').sort()).toEqual(['b', 'c']);
    expect(store.tasks.countTasksByState('r1').pending).toBe(4);
  });

  it.each([
    ['rejected', /^waits for a, which was rejected \(the API refused it\): never submitted, nothing charged/],
    [
      'lost',
      /^waits for a, whose paid result is lost \(the API refused it\): never submitted, nothing charged/,
    ],
  ])('block the downstreams of an upstream that ended %s', (state, reason) => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a'), chained('b', 'a'), task('z')]);
    const raw = rawDatabase(ctx.file());
    raw.prepare("UPDATE tasks SET state = ?, error = 'the API refused it' WHERE task_id = 'a'").run(state);
    raw.close();
    const blocked = store.chains.blockDownstreams('r1');
    expect(blocked.map((b) => b.taskId)).toEqual(['b']);
    expect(blocked[0]?.reason).toMatch(reason);
    expect(store.tasks.nextPending('r1', 10).map((t) => t.taskId)).toEqual(['z']);
  });
});
