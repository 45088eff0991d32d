// The report's reads: tasks a page at a time in the report's order, with their spend, files and latest
// submission, and the per-model figures summed without loading the run.
import { describe, expect, it } from 'vitest';
import type { ReportTaskRow, Store } from '../../src/store/index.js';
import { estimate, submit, T0, task, useStoreWithRun } from './helpers.js';

const ctx = useStoreWithRun();

function all(
  store: Store,
  opts: Parameters<Store['reportReads']['reportTaskPages']>[1] = {},
): ReportTaskRow[] {
  return [...store.reportReads.reportTaskPages('r1', opts)].flat();
}

/** a..f in manifest order; c and e in doubt, b failed (refunded), d done with two files, f pending. */
function mixedRun(store: Store): void {
  store.tasks.upsertTasks(
    'r1',
    ['a', 'b', 'c', 'd', 'e', 'f'].map((id) => task(id)),
  );
  submit(store, 'r1', 'a', 'uuid-a', 3);
  submit(store, 'r1', 'b', 'uuid-b', 3);
  store.jobs.recordJobStatus('uuid-b', 'failed', { status: 'failed' }, 'poll');
  for (const id of ['e', 'c']) {
    const attempt = store.submissions.recordSubmitIntent('r1', id);
    store.submissions.recordInDoubt('r1', id, attempt, { message: 'connection reset' });
  }
  submit(store, 'r1', 'd', 'uuid-d', 2.5);
  store.jobs.recordJobStatus('uuid-d', 'success', { status: 'success' }, 'poll');
  for (const index of [2, 1]) {
    store.files.recordFile('r1', 'd', {
      index,
      kind: 'image',
      path: `/o/d/${index}.png`,
      bytes: index * 10,
      sha256: 'h',
    });
  }
  store.tasks.markDone('r1', 'd');
}

describe('reportTaskPages', () => {
  it('hands out in-doubt tasks first, then the rest in manifest order, in pages of the size asked', () => {
    const store = ctx.store();
    mixedRun(store);
    const pages = [...store.reportReads.reportTaskPages('r1', { pageSize: 4 })];
    expect(pages.map((p) => p.map((t) => t.taskId))).toEqual([
      ['c', 'e', 'a', 'b'],
      ['d', 'f'],
    ]);
  });

  it.each([
    ['only in doubt', { states: ['in_doubt'] as const }, ['c', 'e']],
    ['failed and pending', { states: ['failed', 'pending'] as const }, ['b', 'f']],
    ['the first three', { limit: 3 }, ['c', 'e', 'a']],
    ['the first three of a page of one', { limit: 3, pageSize: 1 }, ['c', 'e', 'a']],
    ['nothing', { limit: 0 }, []],
  ])('lists %s', (_name, opts, ids) => {
    const store = ctx.store();
    mixedRun(store);
    expect(all(store, opts).map((t) => t.taskId)).toEqual(ids);
  });

  it('gives each task its ledger spend, its files by index and when it was last sent', () => {
    const store = ctx.store();
    mixedRun(store);
    ctx.clock().advance(5_000);
    const attempt = store.submissions.recordSubmitIntent('r1', 'f');
    store.submissions.recordInDoubt('r1', 'f', attempt, { message: 'timeout' });
    const byId = new Map(all(store).map((t) => [t.taskId, t]));
    expect(byId.get('b')?.spend).toEqual({ taskId: 'b', charged: 3, refunded: 3, net: 0, jobs: 1 });
    expect(byId.get('f')?.spend).toEqual({ taskId: 'f', charged: 0, refunded: 0, net: 0, jobs: 0 });
    expect(byId.get('d')?.files.map((f) => [f.index, f.path, f.bytes])).toEqual([
      [1, '/o/d/1.png', 10],
      [2, '/o/d/2.png', 20],
    ]);
    expect(byId.get('d')).toMatchObject({ state: 'done', imgUuid: 'uuid-d', jobStatus: 'success' });
    expect(byId.get('c')?.lastSentAt).toEqual(T0);
    expect(byId.get('f')?.lastSentAt).toEqual(new Date(T0.getTime() + 5_000));
    expect(byId.get('f')?.state).toBe('in_doubt');
  });

  it('counts every job of a task sent again, and its latest submission', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    submit(store, 'r1', 'a', 'uuid-1', 3);
    store.jobs.recordJobStatus('uuid-1', 'failed', { status: 'failed' }, 'poll');
    store.tasks.requeueTasks('r1', ['a'], ['failed']);
    ctx.clock().advance(60_000);
    submit(store, 'r1', 'a', 'uuid-2', 3);
    const [a] = all(store);
    expect(a?.spend).toEqual({ taskId: 'a', charged: 6, refunded: 3, net: 3, jobs: 2 });
    expect(a?.lastSentAt).toEqual(new Date(T0.getTime() + 60_000));
  });

  it.each([
    [
      'a prompt',
      { prompt: 'a mug' },
      { prompt: 'a mug', text: null, lyrics: null, description: null, title: null },
    ],
    [
      'text and lyrics',
      { text: 'hi', lyrics: 'la' },
      { prompt: null, text: 'hi', lyrics: 'la', description: null, title: null },
    ],
    [
      'a prompt that is not a string',
      { prompt: 42 },
      { prompt: null, text: null, lyrics: null, description: null, title: null },
    ],
  ])('reads only the text fields of the request: %s', (_name, body, text) => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [{ ...task('a'), wireBody: JSON.stringify({ model: 'x', ...body }) }]);
    expect(all(store)[0]?.requestText).toEqual(text);
    expect(all(store)[0]).not.toHaveProperty('wireBody');
  });

  it('reads a request body that is not JSON as having no text', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [{ ...task('a'), wireBody: 'not json {' }]);
    expect(all(store)[0]?.requestText).toEqual({
      prompt: null,
      text: null,
      lyrics: null,
      description: null,
      title: null,
    });
  });

  it('lets the database be written between pages', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a'), task('b')]);
    const pages = store.reportReads.reportTaskPages('r1', { pageSize: 1 });
    expect(pages.next().value?.[0]?.taskId).toBe('a');
    submit(store, 'r1', 'b', 'uuid-b', 3);
    expect(pages.next().value?.[0]).toMatchObject({ taskId: 'b', state: 'submitted' });
    expect(pages.next().done).toBe(true);
  });
});

describe('reportModelFigures and runFileTotals', () => {
  it('sums each model: tasks by state, estimates, ledger, exactly priced jobs and the in-doubt maximum', () => {
    const store = ctx.store();
    mixedRun(store);
    store.tasks.upsertTasks('r1', [
      ...['a', 'b', 'c', 'd', 'e', 'f'].map((id) => task(id)),
      { ...task('song'), model: 'song', estimate: estimate(10, { min: 2, max: 10 }) },
    ]);
    submit(store, 'r1', 'song', 'uuid-s', 4);
    const [flat, song] = store.reportReads.reportModelFigures('r1');
    expect(flat).toMatchObject({
      model: 'flat-image',
      byState: { in_doubt: 2, submitted: 1, failed: 1, done: 1, pending: 1 },
      estimated: 18,
      charged: 8.5,
      refunded: 3,
      jobs: 3,
      pricedTasks: 3,
      pricedListPrice: 9,
      pricedCharged: 8.5,
      inDoubtMax: 6,
    });
    expect(song).toMatchObject({
      model: 'song',
      estimated: 10,
      estimatedMin: 2,
      estimatedMax: 10,
      charged: 4,
      jobs: 1,
      pricedTasks: 0,
      pricedListPrice: 0,
    });
    expect(store.reportReads.runFileTotals('r1')).toEqual({ files: 2, bytes: 30 });
  });

  it('is empty for a run without tasks', () => {
    expect(ctx.store().reportReads.reportModelFigures('r1')).toEqual([]);
    expect(ctx.store().reportReads.runFileTotals('r1')).toEqual({ files: 0, bytes: 0 });
  });
});

describe('problemTasks and notOnDiskByState', () => {
  it('reads the most urgent states first, stops at the limit, and sums the paid tasks not on disk', () => {
    const store = ctx.store();
    mixedRun(store);
    store.tasks.upsertTasks('r1', [task('g', {}, 2), task('h', {}, 4)]);
    for (const id of ['g', 'h']) {
      submit(store, 'r1', id, `uuid-${id}`, id === 'g' ? 2 : 4);
      store.jobs.recordJobStatus(`uuid-${id}`, 'success', { status: 'success' }, 'poll');
      store.tasks.moveTask('r1', id, 'unfetched', 'link expired');
    }
    store.tasks.moveTask('r1', 'h', 'lost', 'the service answered 404');
    const ids = (limit: number) =>
      store.reportReads
        .problemTasks('r1', ['unfetched', 'lost', 'in_doubt', 'failed'], limit)
        .map((t) => [t.taskId, t.net]);
    expect(ids(10)).toEqual([
      ['g', 2],
      ['h', 4],
      ['c', 0],
      ['e', 0],
      ['b', 0],
    ]);
    expect(ids(3)).toEqual([
      ['g', 2],
      ['h', 4],
      ['c', 0],
    ]);
    expect(store.reportReads.notOnDiskByState('r1')).toEqual({
      unfetched: { tasks: 1, tokens: 2 },
      stalled: { tasks: 0, tokens: 0 },
      lost: { tasks: 1, tokens: 4 },
    });
    const b = all(store).find((t) => t.taskId === 'b');
    expect(b?.attempts).toEqual({ total: 1, charged: 1 });
    expect(all(store).find((t) => t.taskId === 'c')?.attempts).toEqual({ total: 1, charged: 0 });
  });
});
