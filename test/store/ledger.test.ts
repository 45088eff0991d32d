import { describe, expect, it } from 'vitest';
import { periodOf } from '../../src/store/index.js';
import { submit, T0, task, useStoreWithRun } from './helpers.js';

const ctx = useStoreWithRun();

describe('the ledger', () => {
  it('sums charges and refunds per key and month, a refund counting in its charge month', () => {
    const store = ctx.store();
    const clock = ctx.clock();
    store.tasks.upsertTasks('r1', [task('a'), task('b'), task('c'), task('d')]);
    // T0 is 2025-03-31T23:00Z: two charges in March, then two in April.
    submit(store, 'r1', 'a', 'uuid-a', 10, 'key-one-0000');
    submit(store, 'r1', 'b', 'uuid-b', 5, 'key-one-0000');
    clock.advance(2 * 3600_000);
    submit(store, 'r1', 'c', 'uuid-c', 7, 'key-one-0000');
    submit(store, 'r1', 'd', 'uuid-d', 1, 'key-two-0000');
    store.jobs.recordJobStatus('uuid-b', 'failed', { status: 'failed' }, 'poll');

    expect(periodOf(T0)).toBe('2025-03');
    expect(store.ledger.ledgerSpent('key-one-0000', '2025-03')).toEqual({
      charged: 15,
      refunded: 5,
      net: 10,
    });
    expect(store.ledger.ledgerSpent('key-one-0000', '2025-04')).toEqual({ charged: 7, refunded: 0, net: 7 });
    expect(store.ledger.ledgerSpent('key-two-0000', '2025-03')).toEqual({ charged: 0, refunded: 0, net: 0 });
    expect(store.ledger.spendByPeriod()).toEqual([
      { keyFingerprint: 'key-one-0000', period: '2025-04', charged: 7, refunded: 0, net: 7 },
      { keyFingerprint: 'key-two-0000', period: '2025-04', charged: 1, refunded: 0, net: 1 },
      { keyFingerprint: 'key-one-0000', period: '2025-03', charged: 15, refunded: 5, net: 10 },
    ]);
    expect(store.ledger.ledgerSpentSince('key-one-0000', new Date(T0.getTime() + 3600_000))).toEqual({
      charged: 7,
      refunded: 0,
      net: 7,
    });
    expect(store.ledger.runSpent('r1')).toEqual({ charged: 23, refunded: 5, net: 18 });
  });

  it('totals a run per model: estimates from the tasks, money from the ledger', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [
      task('a', {}, 3),
      task('b', {}, 3),
      {
        ...task('s'),
        model: 'speech-v3',
        endpoint: '/api/v1/audio/generations',
        estimate: {
          tokens: 2,
          min: 1,
          max: 4,
          basis: 'per 200 characters',
          assumedPrice: false,
        },
      },
    ]);
    submit(store, 'r1', 'a', 'uuid-a', 2.4);
    submit(store, 'r1', 's', 'uuid-s', 2);
    store.jobs.recordJobStatus('uuid-s', 'failed', { status: 'failed' }, 'poll');
    expect(store.ledger.modelTotals('r1')).toEqual([
      {
        model: 'flat-image',
        tasks: 2,
        estimated: 6,
        estimatedMin: 6,
        estimatedMax: 6,
        charged: 2.4,
        refunded: 0,
        net: 2.4,
      },
      {
        model: 'speech-v3',
        tasks: 1,
        estimated: 2,
        estimatedMin: 1,
        estimatedMax: 4,
        charged: 2,
        refunded: 2,
        net: 0,
      },
    ]);
  });

  it("sums every run of one manifest in a period, for a schedule's budget", () => {
    const store = ctx.store();
    store.runs.createRun({ id: 'r2', manifestPath: '/m/spring.yaml', manifestName: 'spring', settings: {} });
    store.runs.createRun({ id: 'other', manifestPath: '/m/other.yaml', manifestName: 'other', settings: {} });
    store.tasks.upsertTasks('r1', [task('a')]);
    store.tasks.upsertTasks('r2', [task('a')]);
    store.tasks.upsertTasks('other', [task('a')]);
    submit(store, 'r1', 'a', 'uuid-1', 4);
    submit(store, 'r2', 'a', 'uuid-2', 6);
    submit(store, 'other', 'a', 'uuid-3', 100);
    expect(store.ledger.manifestSpent('/m/spring.yaml', '2025-03')).toEqual({
      charged: 10,
      refunded: 0,
      net: 10,
    });
  });

  it('remembers the quota figures of the last code-101 answer per key', () => {
    const store = ctx.store();
    expect(store.ledger.getQuota('key-one-0000')).toBeUndefined();
    store.ledger.recordQuota('key-one-0000', { used: 4990, quota: 5000, period: 'monthly' });
    ctx.clock().advance(1000);
    store.ledger.recordQuota('key-one-0000', { used: 5000, quota: 5000, period: 'monthly' });
    expect(store.ledger.getQuota('key-one-0000')).toEqual({
      keyFingerprint: 'key-one-0000',
      used: 5000,
      quota: 5000,
      period: 'monthly',
      learnedAt: ctx.clock().now(),
    });
  });
});
