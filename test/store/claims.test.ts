import { describe, expect, it } from 'vitest';
import { leaseHolder } from '../../src/store/index.js';
import { onPostgres, rawDatabase, submit, task, useStoreWithRun } from './helpers.js';

const ctx = useStoreWithRun();
const TTL = 30_000;
const A = leaseHolder(101, 'host-a', 'a');
const B = leaseHolder(202, 'host-b', 'b');

/** A run of `n` tasks t01…, and workers A and B on it. */
function fleetOf(n: number) {
  const store = ctx.store();
  store.tasks.upsertTasks(
    'r1',
    Array.from({ length: n }, (_, i) => task(`t${String(i + 1).padStart(2, '0')}`)),
  );
  store.workers.join('r1', A, 'host-a', 101, TTL);
  store.workers.join('r1', B, 'host-b', 202, TTL);
  return store;
}

const ids = (tasks: ReadonlyArray<{ taskId: string }>) => tasks.map((t) => t.taskId);

describe('claims of a fleet', () => {
  it('gives each pending task to one worker, and only the claimer may move it to submitting', () => {
    const store = fleetOf(5);
    const a = store.claims.claimPending('r1', A, 3, undefined, 'manifest');
    const b = store.claims.claimPending('r1', B, 3, undefined, 'manifest');
    expect(ids(a)).toEqual(['t01', 't02', 't03']);
    expect(ids(b)).toEqual(['t04', 't05']);
    expect(store.claims.claimPending('r1', B, 3)).toEqual(
      ids(b).map((id) => expect.objectContaining({ taskId: id })),
    );
    expect(() => store.submissions.recordSubmitIntent('r1', 't01', B)).toThrow(
      `run r1: task t01 is not claimed by worker ${B}`,
    );
    expect(store.submissions.recordSubmitIntent('r1', 't01', A)).toBe(1);
    // Sent once: its claimer cannot send it a second time either.
    expect(() => store.submissions.recordSubmitIntent('r1', 't01', A)).toThrow(/submitting/);
    const sentBy = rawDatabase(ctx.file())
      .prepare(`SELECT worker_id FROM attempts WHERE task_id = 't01'`)
      .all();
    expect(sentBy).toEqual([{ worker_id: A }]);
  });

  it('hands a lost worker its work back: unsent to the queue, being sent in doubt, jobs to the sweeper', () => {
    const store = fleetOf(5);
    const clock = ctx.clock();
    store.claims.claimPending('r1', B, 5, undefined, 'manifest');
    submit(store, 'r1', 't01', 'uuid-1', 2, 'fp');
    store.submissions.recordSubmitIntent('r1', 't02', B);
    // t05 was finished by B: nothing of B's to take back, and it keeps B's name.
    const raw = rawDatabase(ctx.file());
    raw.prepare("UPDATE tasks SET state = 'done' WHERE task_id = 't05'").run();
    // B is alive: nothing of its own is touched, by the sweep or by a resuming process.
    expect(store.submissions.recoverInterruptedSubmissions('r1')).toEqual([]);
    expect(store.claims.sweep('r1', A)).toEqual({ lost: [], requeued: [], inDoubt: [], adopted: [] });

    clock.advance(TTL / 2);
    store.workers.heartbeat('r1', A, { inFlight: 0, submitted: 0 }, TTL);
    clock.advance(TTL / 2);
    const swept = store.claims.sweep('r1', A);
    expect({ ...swept, adopted: ids(swept.adopted) }).toEqual({
      lost: [B],
      requeued: ['t03', 't04'],
      inDoubt: ['t02'],
      adopted: ['t01'],
    });
    expect(store.tasks.getTask('r1', 't02')?.state).toBe('in_doubt');
    expect(store.workers.heartbeat('r1', B, { inFlight: 2, submitted: 1 }, TTL)).toBe(false);
    // The queue is A's now, and nothing B held is B's any more.
    expect(ids(store.claims.claimPending('r1', A, 10, undefined, 'manifest'))).toEqual(['t03', 't04']);
    expect(store.claims.heldByOthers('r1', A)).toBe(0);
    expect(store.claims.sweep('r1', A).lost).toEqual([]);
    // Re-rolled, the task B finished is A's to claim: a lost worker holds nothing.
    expect(raw.prepare("SELECT claimed_by FROM tasks WHERE task_id = 't05'").get()).toEqual({
      claimed_by: B,
    });
    raw.prepare("UPDATE tasks SET state = 'pending' WHERE task_id = 't05'").run();
    raw.close();
    expect(ids(store.claims.claimPending('r1', A, 10, undefined, 'manifest'))).toEqual(['t03', 't04', 't05']);
  });

  it('lets exactly the last live worker out close the run', () => {
    const store = fleetOf(2);
    store.claims.claimPending('r1', A, 1);
    expect(store.claims.heldByOthers('r1', B)).toBe(1);
    expect(store.claims.leave('r1', A)).toEqual({ last: false, others: 1 });
    // What A held is free again for B.
    expect(store.claims.heldByOthers('r1', B)).toBe(0);
    expect(ids(store.claims.claimPending('r1', B, 5, undefined, 'manifest'))).toEqual(['t01', 't02']);
    expect(store.claims.leave('r1', B)).toEqual({ last: true, others: 0 });
    expect(store.claims.leave('r1', B)).toEqual({ last: true, others: 0 });
  });

  it('a worker leaving gives back what it still holds; its finished tasks keep its name until they come back', () => {
    const store = fleetOf(7);
    expect(ids(store.claims.claimPending('r1', A, 7, undefined, 'manifest'))).toHaveLength(7);
    submit(store, 'r1', 't01', 'uuid-1', 2, 'fp');
    store.submissions.recordSubmitIntent('r1', 't04', A);
    const raw = rawDatabase(ctx.file());
    const claims = () =>
      Object.fromEntries(
        (
          raw.prepare('SELECT task_id, claimed_by FROM tasks ORDER BY task_id').all() as Array<{
            task_id: string;
            claimed_by: string | null;
          }>
        ).map((r) => [r.task_id, r.claimed_by]),
      );
    try {
      raw.prepare("UPDATE tasks SET state = 'done' WHERE task_id = 't02'").run();
      raw.prepare("UPDATE tasks SET state = 'failed' WHERE task_id = 't03'").run();
      raw.prepare("UPDATE tasks SET state = 'in_doubt' WHERE task_id = 't07'").run();
      // While A is on the run, a finished task of its own back in the queue is A's: B does not take it.
      raw.prepare("UPDATE tasks SET state = 'pending' WHERE task_id = 't03'").run();
      expect(ids(store.claims.claimPending('r1', B, 7, undefined, 'manifest'))).toEqual([]);
      raw.prepare("UPDATE tasks SET state = 'failed' WHERE task_id = 't03'").run();

      expect(store.claims.leave('r1', A)).toEqual({ last: false, others: 1 });
      // Held (a job watched, a POST being sent, claimed to send): given back. Finished: A's name kept.
      expect(claims()).toEqual({
        t01: null,
        t02: A,
        t03: A,
        t04: null,
        t05: null,
        t06: null,
        t07: A,
      });
      expect(store.claims.heldByOthers('r1', B)).toBe(0);
      // Back in the queue (a re-roll, a retry of a failure or of a doubt), a task A did is anyone's now.
      raw.prepare("UPDATE tasks SET state = 'pending' WHERE task_id IN ('t02', 't03', 't07')").run();
      expect(ids(store.claims.claimPending('r1', B, 10, undefined, 'manifest'))).toEqual([
        't02',
        't03',
        't05',
        't06',
        't07',
      ]);
    } finally {
      raw.close();
    }
  });

  it('gives back a task its worker will not send, and claims around the ones it gave up on', () => {
    const store = fleetOf(3);
    expect(ids(store.claims.claimPending('r1', A, 2, undefined, 'manifest'))).toEqual(['t01', 't02']);
    expect(store.claims.heldByOthers('r1', B)).toBe(2);
    // t01 does not fit the budget for A: nobody waits for it, and B may look at it for itself.
    store.claims.giveUp('r1', A, ['t01']);
    expect(store.claims.heldByOthers('r1', B)).toBe(1);
    // A's next claim leaves out what it gave up on, without taking it back from the queue.
    const skip = new Set(['t01']);
    expect(ids(store.claims.claimPending('r1', A, 5, undefined, 'manifest', skip))).toEqual(['t02', 't03']);
    expect(ids(store.claims.claimPending('r1', B, 5, undefined, 'manifest'))).toEqual(['t01']);
    // Only a pending task of its own is given back: B's claim stays B's, a sent task stays its sender's.
    store.claims.giveUp('r1', A, ['t01']);
    expect(store.claims.heldByOthers('r1', A)).toBe(1);
    store.submissions.recordSubmitIntent('r1', 't02', A);
    store.claims.giveUp('r1', A, ['t02']);
    expect(store.claims.heldByOthers('r1', B)).toBe(2);
  });

  it('leaves the downstreams of a result another worker may still fetch to that worker or the last out', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('up'), { ...task('down'), upstreams: [{ name: '', taskId: 'up' }] }]);
    store.workers.join('r1', A, 'host-a', 101, TTL);
    store.workers.join('r1', B, 'host-b', 202, TTL);
    store.claims.claimPending('r1', B, 1);
    submit(store, 'r1', 'up', 'uuid-up', 2);
    // B's download of the paid result failed: it fetches it again, or stops and leaves it to the others.
    const raw = rawDatabase(ctx.file());
    raw
      .prepare("UPDATE tasks SET state = 'unfetched', error = 'connection reset' WHERE task_id = 'up'")
      .run();
    raw.close();
    const checkOf = (me: string) => {
      const elsewhere = store.claims.jobsElsewhere('r1', me);
      return ids(store.chains.blockDownstreams('r1', (id) => elsewhere.has(id)));
    };
    expect(checkOf(A)).toEqual([]);
    // Left by B, the job is nobody's until a sweep adopts it: still not A's to block.
    store.claims.leave('r1', B);
    expect(checkOf(A)).toEqual([]);
    expect(store.tasks.getTask('r1', 'down')?.state).toBe('pending');
    expect(ids(store.claims.sweep('r1', A).adopted)).toEqual(['up']);
    // A holds it now: when A gives up on its result, the downstream is A's to block.
    expect(checkOf(A)).toEqual(['down']);
  });

  it.runIf(onPostgres())('skips the rows another connection holds locked instead of waiting for them', () => {
    const store = fleetOf(3);
    const other = rawDatabase(ctx.file());
    try {
      other.exec(`BEGIN; SELECT * FROM tasks WHERE task_id = 't01' FOR UPDATE`);
      expect(ids(store.claims.claimPending('r1', A, 2, undefined, 'manifest'))).toEqual(['t02', 't03']);
      other.exec('ROLLBACK');
      expect(ids(store.claims.claimPending('r1', B, 2, undefined, 'manifest'))).toEqual(['t01']);
    } finally {
      other.close();
    }
  });
});
