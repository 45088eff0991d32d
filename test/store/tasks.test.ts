import { describe, expect, it } from 'vitest';
import { bodyHash, StoreError, type TaskState } from '../../src/store/index.js';
import { estimate, onPostgres, submit, task, useStoreWithRun } from './helpers.js';

const ctx = useStoreWithRun();

// On SQLite, 100,000 tasks in one call. On PostgreSQL 2,050 (a new run's rows by COPY, then a resume that
// reads each back and inserts as SQLite does); more rows than one COPY takes are in the tests of a repeated
// id and of tasks that stop coming below. Storing 1,000,000 there is a figure of `npm run bench`
// (bench/postgres-plan.ts), not a test.
const MANY = onPostgres() ? 2_050 : 100_000;

describe('upsertTasks', () => {
  it(`stores ${MANY.toLocaleString('en-US')} tasks in one call, in manifest order, with the wire body given back verbatim`, () => {
    const store = ctx.store();
    const specs = Array.from({ length: MANY }, (_, i) => task(`t-${i}`, { n: i }));
    const result = store.tasks.upsertTasks('r1', specs);
    expect(result).toEqual({ inserted: MANY, unchanged: 0, updated: [], changed: [], missing: [] });
    expect(store.tasks.countTasksByState('r1').pending).toBe(MANY);
    const first = store.tasks.nextPending('r1', 2);
    expect(first.map((t) => t.taskId)).toEqual(['t-0', 't-1']);
    expect(first[0]?.wireBody).toBe(specs[0]?.wireBody);
    expect(first[0]?.bodyHash).toBe(bodyHash(specs[0]?.wireBody ?? ''));

    // Running it again with the same manifest changes nothing.
    expect(store.tasks.upsertTasks('r1', specs)).toEqual({
      inserted: 0,
      unchanged: MANY,
      updated: [],
      changed: [],
      missing: [],
    });
  });

  it('is all or nothing: a duplicate task id leaves no task behind', () => {
    const store = ctx.store();
    expect(() => store.tasks.upsertTasks('r1', [task('a'), task('b'), task('a')])).toThrow(
      new StoreError('run r1: task a: listed twice: task ids must be unique'),
    );
    expect(store.tasks.tasksOfRun('r1')).toEqual([]);
  });

  it.each([
    ['in an earlier batch of rows', 150],
    ['earlier in the same batch', 30],
  ])('names a duplicate id of a new run %s, and keeps no task', (_, at) => {
    const store = ctx.store();
    const specs = Array.from({ length: 250 }, (_, i) => task(`t-${i}`));
    specs.splice(at, 0, task('t-7'));
    expect(() => store.tasks.upsertTasks('r1', specs)).toThrow(
      new StoreError('run r1: task t-7: listed twice: task ids must be unique'),
    );
    expect(store.tasks.tasksOfRun('r1')).toEqual([]);
    expect(store.tasks.countTasksByState('r1').pending).toBe(0);
  });

  // PostgreSQL takes a new run's rows by COPY, 10,000 a statement: the first repeat here is in the copy
  // before the one that finds it (on SQLite, a hundred statements before).
  it('names an id listed twice 10,000 rows apart, and keeps no task', () => {
    const store = ctx.store();
    const specs = Array.from({ length: 10_050 }, (_, i) => task(`t-${i}`));
    specs.splice(10_020, 0, task('t-7'));
    expect(() => store.tasks.upsertTasks('r1', specs)).toThrow(
      new StoreError('run r1: task t-7: listed twice: task ids must be unique'),
    );
    expect(store.tasks.countTasksByState('r1').pending).toBe(0);
    expect(store.tasks.upsertTasks('r1', specs.slice(0, 3)).inserted).toBe(3);
  });

  it('gives back every field as given, whatever characters it holds', () => {
    const store = ctx.store();
    const odd = 'tab\there, line\nbreak, cr\rhere, back\\slash, \\N, é, 日本, 🎞️, "quoted"';
    const spec = {
      ...task(`id ${odd}`),
      wireBody: `{"prompt":"${odd}","raw":"a\tb\nc\\d"}`,
      estimate: estimate(0.1 + 0.2, { min: 1e-7, max: 12345.678, basis: odd, assumedPrice: true }),
      fileName: `dir\\${odd}.png`,
      expectedMs: 5500,
      retries: 2,
      review: true,
    };
    store.tasks.upsertTasks('r1', [task('first'), spec]);
    expect(store.tasks.getTask('r1', spec.taskId)).toMatchObject({
      taskId: spec.taskId,
      seq: 1,
      wireBody: spec.wireBody,
      bodyHash: bodyHash(spec.wireBody),
      estimate: spec.estimate,
      fileName: spec.fileName,
      expectedMs: 5500,
      state: 'pending',
    });
    expect(store.tasks.upsertTasks('r1', [task('first'), spec]).unchanged).toBe(2);
  });

  it('stores nothing when the tasks stop coming with an error, and takes them again after', () => {
    const store = ctx.store();
    function* failing() {
      for (let i = 0; i < 10_500; i++) yield task(`t-${i}`);
      throw new Error('the manifest could not be read further');
    }
    expect(() => store.tasks.upsertTasks('r1', failing())).toThrow('the manifest could not be read further');
    expect(store.tasks.countTasksByState('r1').pending).toBe(0);
    expect(store.tasks.upsertTasks('r1', [task('t-0'), task('t-1')]).inserted).toBe(2);
    expect(store.tasks.countTasksByState('r1').pending).toBe(2);
  });

  // PostgreSQL reads a resumed run's ids 10,000 a statement: t-9999 sorts last, in the second page.
  it('names the tasks a resumed manifest no longer lists, among more than 10,000', () => {
    const store = ctx.store();
    const specs = Array.from({ length: 10_050 }, (_, i) => task(`t-${i}`));
    store.tasks.upsertTasks('r1', specs);
    const kept = specs.filter((s) => s.taskId !== 't-0' && s.taskId !== 't-9999');
    const result = store.tasks.upsertTasks('r1', [...kept, task('t-new')]);
    expect(result).toMatchObject({ inserted: 1, unchanged: 10_048 });
    expect([...result.missing].sort()).toEqual(['t-0', 't-9999']);
  });

  it('refuses tasks for a run that does not exist', () => {
    expect(() => ctx.store().tasks.upsertTasks('nope', [task('a')])).toThrow(/run nope: not found/);
  });

  it('after a manifest edit: updates never-charged tasks, lists sent ones, and never touches unchanged ones', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [
      task('pending'),
      task('done'),
      task('same'),
      task('rejected'),
      task('gone'),
    ]);
    submit(store, 'r1', 'done', 'uuid-done', 3);
    store.jobs.recordJobStatus('uuid-done', 'success', {}, 'poll');
    store.tasks.markDone('r1', 'done');
    submit(store, 'r1', 'same', 'uuid-same', 3);
    const attempt = store.submissions.recordSubmitIntent('r1', 'rejected');
    store.submissions.recordNotCharged('r1', 'rejected', attempt, {
      outcome: 'rejected',
      httpStatus: 400,
      code: 400,
      message: 'bad',
    });

    const edited = [
      task('pending', { prompt: 'new' }),
      task('done', { prompt: 'new' }),
      task('same'),
      task('rejected', { prompt: 'new' }),
      task('added'),
    ];
    const result = store.tasks.upsertTasks('r1', edited);
    expect(result.inserted).toBe(1);
    expect(result.unchanged).toBe(1);
    expect(result.updated).toEqual(['pending', 'rejected']);
    expect(result.changed).toEqual([
      {
        taskId: 'done',
        state: 'done',
        oldHash: bodyHash(task('done').wireBody),
        newHash: bodyHash(edited[1]?.wireBody ?? ''),
      },
    ]);
    expect(result.missing).toEqual(['gone']);
    // The changed task keeps its result until the user accepts the change.
    expect(store.tasks.getTask('r1', 'done')?.state).toBe('done');
    expect(store.tasks.getTask('r1', 'done')?.wireBody).toBe(task('done').wireBody);
    expect(store.tasks.getTask('r1', 'rejected')).toMatchObject({ state: 'pending', error: null });
    expect(store.tasks.getTask('r1', 'same')).toMatchObject({ state: 'submitted', imgUuid: 'uuid-same' });
  });

  it('with acceptChanges, resets a changed task to pending with the new body, keeping its charge in the ledger', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    submit(store, 'r1', 'a', 'uuid-a', 3);
    store.jobs.recordJobStatus('uuid-a', 'success', {}, 'poll');
    store.files.recordFile('r1', 'a', {
      index: 0,
      kind: 'image',
      path: '/out/a/1.png',
      bytes: 10,
      sha256: 'x',
    });
    store.tasks.markDone('r1', 'a');

    const edited = task('a', { prompt: 'new' });
    const result = store.tasks.upsertTasks('r1', [edited], { acceptChanges: true });
    expect(result.changed.map((c) => c.taskId)).toEqual(['a']);
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({
      state: 'pending',
      imgUuid: null,
      wireBody: edited.wireBody,
    });
    expect(store.files.filesOfTask('r1', 'a')).toEqual([]);
    expect(store.ledger.runSpent('r1')).toEqual({ charged: 3, refunded: 0, net: 3 });
    // The new submission gets the next attempt number.
    expect(store.submissions.recordSubmitIntent('r1', 'a')).toBe(2);
  });

  it('refreshes the estimate of an unchanged task', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    store.tasks.upsertTasks('r1', [{ ...task('a'), estimate: estimate(5, { assumedPrice: true }) }]);
    expect(store.tasks.getTask('r1', 'a')?.estimate).toEqual(estimate(5, { assumedPrice: true }));
  });
});

describe('queries', () => {
  it('counts tasks by state, every state present', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a'), task('b'), task('c')]);
    submit(store, 'r1', 'a', 'uuid-a', 3);
    expect(store.tasks.countTasksByState('r1')).toEqual<Record<TaskState, number>>({
      pending: 2,
      awaiting_review: 0,
      submitting: 0,
      in_doubt: 0,
      submitted: 1,
      running: 0,
      stalled: 0,
      downloading: 0,
      unfetched: 0,
      done: 0,
      failed: 0,
      rejected: 0,
      blocked: 0,
      lost: 0,
      skipped: 0,
    });
    expect(store.tasks.tasksByState('r1', ['submitted', 'pending']).map((t) => t.taskId)).toEqual([
      'a',
      'b',
      'c',
    ]);
  });

  it('sums what is left to submit per model, for the whole run and for --only and --limit', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [
      { ...task('a', {}, 1), model: 'flat-image', expectedMs: 5_000 },
      { ...task('b', {}, 2), model: 'video', expectedMs: 60_000 },
      { ...task('c', {}, 4), model: 'flat-image', expectedMs: 1_000 },
    ]);
    const row = (model: string, tasks: number, tokens: number) => ({
      model,
      tasks,
      tokens,
      min: tokens,
      max: tokens,
    });
    expect(store.tasks.pendingByModel('r1')).toEqual([row('flat-image', 2, 5), row('video', 1, 2)]);
    expect(store.tasks.pendingByModel('r1', { only: ['a', 'c'] })).toEqual([row('flat-image', 2, 5)]);
    // The longest expected jobs go first; in manifest order the first ones.
    expect(store.tasks.pendingByModel('r1', { limit: 2 })).toEqual([
      row('flat-image', 1, 1),
      row('video', 1, 2),
    ]);
    expect(store.tasks.pendingByModel('r1', { limit: 1, order: 'manifest' })).toEqual([
      row('flat-image', 1, 1),
    ]);
    expect(store.tasks.pendingByModel('r1', { only: ['c'], limit: 5 })).toEqual([row('flat-image', 1, 4)]);
  });

  it('hands out for polling only submitted or running tasks whose next poll is due', () => {
    const store = ctx.store();
    const clock = ctx.clock();
    store.tasks.upsertTasks('r1', [task('a'), task('b'), task('c'), task('d')]);
    submit(store, 'r1', 'a', 'uuid-a', 3);
    submit(store, 'r1', 'b', 'uuid-b', 3);
    submit(store, 'r1', 'c', 'uuid-c', 3);
    store.jobs.recordJobStatus('uuid-c', 'success', {}, 'poll');

    expect(store.tasks.tasksToWatch('r1').map((t) => t.taskId)).toEqual(['a', 'b']);
    const t0 = clock.now();
    store.tasks.notePolled('r1', 'a', new Date(t0.getTime() + 5_000));
    store.tasks.notePolled('r1', 'b', new Date(t0.getTime() + 10_000));
    expect(store.tasks.tasksToWatch('r1')).toEqual([]);
    expect(store.tasks.nextPollAt('r1')).toEqual(new Date(t0.getTime() + 5_000));

    clock.advance(5_000);
    expect(store.tasks.tasksToWatch('r1').map((t) => t.taskId)).toEqual(['a']);
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({ pollCount: 1, lastPolledAt: t0 });
    clock.advance(5_000);
    expect(store.tasks.tasksToWatch('r1').map((t) => t.taskId)).toEqual(['a', 'b']);
    store.tasks.setNextPoll('r1', 'a', new Date(t0.getTime() + 60_000));
    expect(store.tasks.tasksToWatch('r1').map((t) => t.taskId)).toEqual(['b']);
  });

  it('marks a downloaded task done, and refuses done for a task whose job has not succeeded', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a'), task('b')]);
    submit(store, 'r1', 'a', 'uuid-a', 3);
    submit(store, 'r1', 'b', 'uuid-b', 3);
    store.jobs.recordJobStatus('uuid-a', 'success', {}, 'poll');
    store.tasks.markDone('r1', 'a');
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({ state: 'done', finishedAt: ctx.clock().now() });
    expect(() => store.tasks.markDone('r1', 'b')).toThrow(
      'run r1: task b: cannot move from submitted to done',
    );
  });

  it('requeues in-doubt tasks only on request, and only from the states asked for', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a'), task('b')]);
    const attempt = store.submissions.recordSubmitIntent('r1', 'a');
    store.submissions.recordInDoubt('r1', 'a', attempt, { message: 'timeout after sending' });
    submit(store, 'r1', 'b', 'uuid-b', 3);
    expect(store.tasks.requeueTasks('r1', ['a', 'b'], ['in_doubt'])).toEqual(['a']);
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({ state: 'pending', error: null });
    expect(store.tasks.getTask('r1', 'b')?.state).toBe('submitted');
  });

  it('blocks and unblocks a pending task', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    store.tasks.markBlocked('r1', 'a', 'over budget: raise `budget` or use --allow-partial');
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({
      state: 'blocked',
      error: expect.stringContaining('budget'),
    });
    expect(() => store.submissions.recordSubmitIntent('r1', 'a')).toThrow(
      'cannot move from blocked to submitting',
    );
    store.tasks.unblock('r1', 'a');
    expect(store.tasks.getTask('r1', 'a')?.state).toBe('pending');
  });
});
