// The report's arithmetic and ordering on a store driven by hand, where every case can be set up exactly.
import { describe, expect, it } from 'vitest';
import { buildReport, reportSchema, UnknownRunError } from '../../src/report/index.js';
import { estimate, submit, T0, task, useStoreWithRun } from '../store/helpers.js';

const ctx = useStoreWithRun();
const RUN_DIR = '/data/out/r1';
// The person reaches the run through the default state file: its commands need no --state.
const opts = () => ({ now: ctx.clock().now(), runDir: RUN_DIR, reader: { state: 'state/mediabatch.db' } });

describe('buildReport', () => {
  it('lists in-doubt tasks first, says what to do about them, then the rest in manifest order', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a'), task('b'), task('c', {}, 3)]);
    submit(store, 'r1', 'a', 'uuid-a', 3);
    const attempt = store.submissions.recordSubmitIntent('r1', 'c');
    store.submissions.recordInDoubt('r1', 'c', attempt, { message: 'connection reset after sending' });

    const report = buildReport(store, 'r1', opts());
    expect(report.tasks.map((t) => [t.id, t.status])).toEqual([
      ['c', 'in_doubt'],
      ['a', 'submitted'],
      ['b', 'pending'],
    ]);
    expect(report.in_doubt).toEqual([
      {
        id: 'c',
        model: 'flat-image',
        sent_at: T0.toISOString(),
        reason: 'connection reset after sending',
        at_most: 3,
      },
    ]);
    expect(report.advice[0]).toBe(
      '1 task in doubt: sent, but the answer was lost, so the API may have charged up to 3 tokens for it. ' +
        'Check the account (its balance or job list) first; then `mediabatch run /m/spring.yaml --run-id r1 --retry-in-doubt` ' +
        'submits it again (possibly charged twice), or leave it to pay nothing more.',
    );
    expect(report.advice[1]).toBe(
      '2 tasks unfinished: `mediabatch run /m/spring.yaml --run-id r1` continues where it stopped.',
    );
    expect(reportSchema.safeParse(report).error).toBeUndefined();
  });

  it('counts every job of a task sent twice, and sees the discount only where the list price is exact', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [
      task('a', {}, 4),
      { ...task('ranged'), estimate: estimate(10, { min: 2, max: 10, basis: 'length unknown' }) },
    ]);
    submit(store, 'r1', 'a', 'uuid-a1', 3);
    store.jobs.recordJobStatus('uuid-a1', 'failed', { status: 'failed' }, 'poll');
    store.tasks.requeueTasks('r1', ['a'], ['failed']);
    submit(store, 'r1', 'a', 'uuid-a2', 3);
    submit(store, 'r1', 'ranged', 'uuid-r', 5);

    const report = buildReport(store, 'r1', opts());
    const a = report.tasks.find((t) => t.id === 'a');
    expect(a).toMatchObject({ img_uuid: 'uuid-a2', charged: 6, refunded: 3, net: 3, jobs: 2 });
    expect(report.totals).toMatchObject({
      tasks: 2,
      jobs: 3,
      charged: { tokens: 11, usd: 0.22 },
      refunded: { tokens: 3, usd: 0.06 },
      net: { tokens: 8, usd: 0.16 },
      estimated: { tokens: 14, min: 6, max: 14, usd: 0.28 },
      // Two jobs of `a` at a list price of 4 each, charged 3 each; `ranged` has no exact list price.
      list_price_of_charged: 8,
      charge_ratio: 0.75,
      discount: 0.25,
    });
  });

  it.each([
    ['no charge at all', [], null, null, null],
    ['only ranged estimates', ['ranged'], null, null, null],
  ])('leaves the discount unknown with %s', (_name, charged, listPrice, ratio, discount) => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [{ ...task('ranged'), estimate: estimate(10, { min: 2, max: 10 }) }]);
    for (const id of charged) submit(store, 'r1', id, `uuid-${id}`, 5);
    expect(buildReport(store, 'r1', opts()).totals).toMatchObject({
      list_price_of_charged: listPrice,
      charge_ratio: ratio,
      discount,
    });
  });

  it('gives file paths relative to the run folder and their sizes', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a')]);
    submit(store, 'r1', 'a', 'uuid-a', 3);
    store.jobs.recordJobStatus('uuid-a', 'success', { status: 'success', duration: 7.5 }, 'poll');
    store.files.recordFile('r1', 'a', {
      index: 1,
      kind: 'image',
      path: `${RUN_DIR}/a/1.png`,
      bytes: 10,
      sha256: 'x',
    });
    store.files.recordFile('r1', 'a', {
      index: 2,
      kind: 'image',
      path: `${RUN_DIR}/a/2.png`,
      bytes: 32,
      sha256: 'y',
    });
    ctx.clock().advance(12_000);
    store.tasks.markDone('r1', 'a');

    const a = buildReport(store, 'r1', opts()).tasks[0];
    expect(a).toMatchObject({
      status: 'done',
      job_status: 'success',
      job_duration_s: 7.5,
      elapsed_s: 12,
      bytes: 42,
      files: [
        { path: 'a/1.png', kind: 'image', bytes: 10, sha256: 'x' },
        { path: 'a/2.png', kind: 'image', bytes: 32, sha256: 'y' },
      ],
    });
  });

  it.each([
    [
      'from configuration',
      { quota: 100 },
      { limit: 100, used: 3, source: 'limit from configuration; used = this month in the local ledger' },
    ],
    [
      'learned from a code-101 answer, plus the ledger since',
      {},
      // 40 used when learned; since then `b` was charged 3 and refunded 3.
      { limit: 50, used: 40, source: 'learned from the API on 2025-03-31, plus the ledger since' },
    ],
  ])('reports the quota %s', (_name, extra, expected) => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a'), task('b')]);
    submit(store, 'r1', 'a', 'uuid-a', 3, 'key-one-0000');
    ctx.clock().advance(1_000);
    store.ledger.recordQuota('key-one-0000', { used: 40, quota: 50, period: 'monthly' });
    ctx.clock().advance(60_000);
    submit(store, 'r1', 'b', 'uuid-b', 3, 'key-one-0000');
    store.jobs.recordJobStatus('uuid-b', 'failed', { status: 'failed' }, 'poll');
    ctx.clock().advance(60_000);

    const report = buildReport(store, 'r1', { ...opts(), ...extra });
    expect(report.quota).toEqual({
      period: '2025-03',
      keys: [
        {
          key_fingerprint: 'key-one-0000',
          charged: 6,
          refunded: 3,
          net: 3,
          ...expected,
        },
      ],
    });
  });

  it('keeps the balance before and after and their difference', () => {
    const store = ctx.store();
    store.runs.setRunBalance('r1', { before: 100.5, after: 90.25 });
    expect(buildReport(store, 'r1', opts()).balance).toEqual({ before: 100.5, after: 90.25, change: 10.25 });
  });

  it('refuses a run the store does not know', () => {
    expect(() => buildReport(ctx.store(), 'nope', opts())).toThrow(UnknownRunError);
  });
});
