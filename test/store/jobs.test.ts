import { describe, expect, it } from 'vitest';
import { rawDatabase, submit, task, useStoreWithRun } from './helpers.js';

const ctx = useStoreWithRun();

function jobRecord(status: string, extra: Record<string, unknown> = {}) {
  return { img_uuid: 'uuid-a', status, json: null, ...extra };
}

describe('recordJobStatus', () => {
  it('counts the look that brought the news with the move it makes, and only then', () => {
    const store = ctx.store();
    const now = ctx.clock().now();
    store.tasks.upsertTasks('r1', [task('a')]);
    submit(store, 'r1', 'a', 'uuid-a', 3);
    const next = new Date(now.getTime() + 5_000);
    const moved = store.jobs.recordJobStatus('uuid-a', 'processing', jobRecord('processing'), 'poll', next);
    expect(moved).toMatchObject({ from: 'submitted', to: 'running', moved: true, looked: true });
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({
      state: 'running',
      pollCount: 1,
      lastPolledAt: now,
      nextPollAt: next,
    });
    // The same news again moves nothing: the look is the caller's to count (notePolled), not counted here.
    const again = store.jobs.recordJobStatus('uuid-a', 'processing', jobRecord('processing'), 'poll', now);
    expect(again).toMatchObject({ moved: false, looked: false });
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({ pollCount: 1, nextPollAt: next });
  });

  it('moves a task forward only: a processing event after success leaves it downloading', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    submit(store, 'r1', 'a', 'uuid-a', 3);
    expect(
      store.jobs.recordJobStatus('uuid-a', 'success', jobRecord('success', { duration: 12.5 }), 'callback'),
    ).toEqual({
      task: { runId: 'r1', taskId: 'a' },
      newEvent: true,
      knownStatus: true,
      from: 'submitted',
      to: 'downloading',
      moved: true,
      looked: false,
      refunded: null,
    });
    expect(store.jobs.recordJobStatus('uuid-a', 'processing', jobRecord('processing'), 'poll')).toMatchObject(
      {
        newEvent: true,
        from: 'downloading',
        to: 'downloading',
        moved: false,
      },
    );
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({
      state: 'downloading',
      jobStatus: 'success',
      jobDuration: 12.5,
      source: 'callback',
    });
  });

  it('records each img_uuid + status once, however often it is reported', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    submit(store, 'r1', 'a', 'uuid-a', 3);
    expect(
      store.jobs.recordJobStatus('uuid-a', 'processing', jobRecord('processing'), 'callback').newEvent,
    ).toBe(true);
    ctx.clock().advance(1_000);
    expect(store.jobs.recordJobStatus('uuid-a', 'processing', jobRecord('processing'), 'poll').newEvent).toBe(
      false,
    );
    expect(store.jobs.jobEvents('uuid-a')).toMatchObject([{ status: 'processing', source: 'callback' }]);
  });

  it('refunds a failed job once, for the amount charged, even when the failure is reported twice', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    submit(store, 'r1', 'a', 'uuid-a', 4.5);
    const first = store.jobs.recordJobStatus('uuid-a', 'failed', jobRecord('failed'), 'callback');
    const second = store.jobs.recordJobStatus('uuid-a', 'failed', jobRecord('failed'), 'poll');
    expect(first).toMatchObject({ moved: true, to: 'failed', refunded: 4.5 });
    expect(second).toMatchObject({ newEvent: false, moved: false, refunded: null });
    expect(store.ledger.runSpent('r1')).toEqual({ charged: 4.5, refunded: 4.5, net: 0 });
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({ state: 'failed', cost: 4.5, refunded: 4.5 });
  });

  it('does not refund a job already seen succeeding when a contradicting failure arrives', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    submit(store, 'r1', 'a', 'uuid-a', 3);
    store.jobs.recordJobStatus('uuid-a', 'success', jobRecord('success'), 'poll');
    expect(store.jobs.recordJobStatus('uuid-a', 'failed', jobRecord('failed'), 'callback')).toMatchObject({
      moved: false,
      refunded: null,
    });
    expect(store.ledger.runSpent('r1')).toEqual({ charged: 3, refunded: 0, net: 3 });
  });

  it('waits on statuses the API does not document', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    submit(store, 'r1', 'a', 'uuid-a', 3);
    expect(store.jobs.recordJobStatus('uuid-a', 'WAITING', jobRecord('WAITING'), 'poll')).toMatchObject({
      newEvent: true,
      knownStatus: false,
      moved: false,
    });
    expect(store.tasks.getTask('r1', 'a')?.state).toBe('submitted');
  });

  it('still refunds the old job of a task that was reset after a manifest edit', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    submit(store, 'r1', 'a', 'uuid-old', 3);
    store.tasks.upsertTasks('r1', [task('a', { prompt: 'edited' })], { acceptChanges: true });
    expect(store.jobs.recordJobStatus('uuid-old', 'failed', { status: 'failed' }, 'poll')).toMatchObject({
      task: null,
      refunded: 3,
    });
    expect(store.ledger.runSpent('r1')).toEqual({ charged: 3, refunded: 3, net: 0 });
    expect(store.tasks.getTask('r1', 'a')?.state).toBe('pending');
  });

  it('keeps the job record without the signatures of its result links', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    submit(store, 'r1', 'a', 'uuid-a', 3);
    const signed = 'https://cdn.example.com/r/abc.png?X-Signature=SECRETSIG&Expires=1';
    store.jobs.recordJobStatus(
      'uuid-a',
      'success',
      jobRecord('success', { json: [{ type: 'image', value: signed }] }),
      'poll',
    );
    expect(store.jobs.jobEvents('uuid-a')[0]?.record).toEqual(
      jobRecord('success', { json: [{ type: 'image', value: 'https://cdn.example.com/r/abc.png' }] }),
    );
  });
});

describe('recordFile', () => {
  it('keeps only the host of the link a file came from, and replaces the row on a re-download', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    submit(store, 'r1', 'a', 'uuid-a', 3);
    store.jobs.recordJobStatus('uuid-a', 'success', jobRecord('success'), 'poll');
    const file = { index: 0, kind: 'image' as const, path: '/out/r1/a/1.png', bytes: 100, sha256: 'h1' };
    store.files.recordFile('r1', 'a', { ...file, url: 'https://cdn.example.com/x.png?sig=SECRET' });
    store.files.recordFile('r1', 'a', {
      ...file,
      bytes: 120,
      sha256: 'h2',
      url: 'https://cdn2.example.com/x.png?sig=S',
    });
    expect(store.files.filesOfRun('r1')).toEqual([
      {
        runId: 'r1',
        taskId: 'a',
        ...file,
        bytes: 120,
        sha256: 'h2',
        sourceHost: 'cdn2.example.com',
        completedAt: ctx.clock().now(),
      },
    ]);
  });

  it('refuses a file for a task that does not exist', () => {
    const store = ctx.store();
    expect(() =>
      store.files.recordFile('r1', 'ghost', { index: 0, kind: 'image', path: '/x', bytes: 1, sha256: 'h' }),
    ).toThrow('run r1: task ghost: not found in the state database');
  });
});

describe('the JSON columns', () => {
  // A job's record, a run's settings and a chained task's planned estimate are JSON; the database itself
  // refuses anything else, on either backend with the same code, and takes every JSON document.
  it('refuse a text that is not JSON with a CHECK failure, and keep every JSON document', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    const raw = rawDatabase(ctx.file());
    const insertEvent = raw.prepare(
      `INSERT INTO job_events (img_uuid, status, at, source, record) VALUES (?, ?, '2026-11-01T00:00:00.000Z', 'poll', ?)`,
    );
    const refused = (write: () => unknown) => {
      try {
        write();
      } catch (err) {
        return (err as { code?: string }).code;
      }
      return 'kept';
    };
    const documents = ['{"a":[1,2.5,"x",null,true]}', '[]', '"text"', '0', 'null', ' {} '];
    documents.forEach((doc, i) => {
      expect(
        refused(() => insertEvent.run(`u${i}`, 'success', doc)),
        doc,
      ).toBe('kept');
    });
    for (const bad of ['{', '{"a":}', 'nope', '', '[1,]', "{'a':1}"]) {
      expect(
        refused(() => insertEvent.run('u-bad', 'success', bad)),
        bad,
      ).toBe('SQLITE_CONSTRAINT_CHECK');
    }
    expect(refused(() => raw.prepare(`UPDATE runs SET settings = '{"budget":' WHERE id = 'r1'`).run())).toBe(
      'SQLITE_CONSTRAINT_CHECK',
    );
    expect(
      refused(() =>
        raw
          .prepare(`UPDATE tasks SET planned_estimate = 'tokens' WHERE run_id = 'r1' AND task_id = 'a'`)
          .run(),
      ),
    ).toBe('SQLITE_CONSTRAINT_CHECK');
    expect(raw.prepare(`SELECT count(*) AS n FROM job_events`).get()).toEqual({ n: documents.length });
    raw.close();
  });
});
