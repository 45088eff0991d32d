import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { describeRun } from '../../src/account/index.js';
import { periodOf } from '../../src/store/index.js';
import { rawDatabase, submit, T0, task, useStoreWithRun } from './helpers.js';

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

/**
 * Amounts whose micro-tokens are an exact tie as doubles (0.0000025 × 1e6 is 2.5), beside plain ones whose
 * doubles add up with an error (0.1 + 0.2): the sums below differ between the backends when the doubles
 * are added, and by a whole micro-token at a tie when a sum of them is rounded.
 */
const TIES = [0.0000005, 0.0000025, 0.0000125, 0.2000005, 0.6000005, 1.0000005, 0.1, 0.2, 0.3];

/** What SQLite's own round() makes of each amount in micro-tokens: the integers both backends must give. */
function sqliteMicro(amounts: readonly number[]): number[] {
  const db = new Database(':memory:');
  try {
    const round = db.prepare<[number], number>('SELECT CAST(round(? * 1000000) AS INTEGER)').pluck();
    return amounts.map((amount) => round.get(amount) as number);
  } finally {
    db.close();
  }
}

const sum = (ns: readonly number[]): number => ns.reduce((n, x) => n + x, 0);

describe('token amounts at half-micro ties', () => {
  it("are rounded to micro-tokens as SQLite's round() rounds them: ties away from zero, below zero too", () => {
    ctx.store();
    const db = rawDatabase(ctx.file());
    try {
      const round = db.prepare('SELECT CAST(round(? * 1000000) AS INTEGER)').pluck();
      const amounts = [...TIES, ...TIES.map((t) => -t), -1.5000005, 2.5, -2.5];
      expect(amounts.map((a) => Number(round.get(a)))).toEqual(sqliteMicro(amounts));
      // Written out, so that the reference itself is the rule this test means.
      expect(sqliteMicro([0.0000005, 0.0000025, -0.0000005, -0.0000025])).toEqual([1, 3, -1, -3]);
    } finally {
      db.close();
    }
  });

  it("add up to SQLite's whole micro-tokens on either backend, in every read of the ledger and the estimates", () => {
    const store = ctx.store();
    const ids = TIES.map((_, i) => `t${i}`);
    store.tasks.upsertTasks('r1', [
      ...TIES.map((amount, i) => task(ids[i] ?? '', {}, amount)),
      ...TIES.map((amount, i) => task(`p${i}`, {}, amount)),
    ]);
    TIES.forEach((amount, i) => {
      submit(store, 'r1', ids[i] ?? '', `uuid-${i}`, amount);
    });
    // Every other job failed: its charge comes back as a refund of the same amount.
    const refundedAt = TIES.map((_, i) => i).filter((i) => i % 2 === 0);
    for (const i of refundedAt)
      store.jobs.recordJobStatus(`uuid-${i}`, 'failed', { status: 'failed' }, 'poll');

    const micro = sqliteMicro(TIES);
    const charged = sum(micro) / 1e6;
    const refunded = sum(refundedAt.map((i) => micro[i] ?? 0)) / 1e6;
    const net = (sum(micro) - sum(refundedAt.map((i) => micro[i] ?? 0))) / 1e6;
    const sums = { charged, refunded, net };
    // The figures are what they are meant to be, not only alike on the two backends.
    expect(sums).toEqual({ charged: 2.40002, refunded: 1.000015, net: 1.400005 });

    const period = periodOf(T0);
    expect(store.ledger.runSpent('r1')).toEqual(sums);
    expect(store.ledger.ledgerSpent('fp0000000000', period)).toEqual(sums);
    expect(store.ledger.manifestSpent('/m/spring.yaml', period)).toEqual(sums);
    expect(store.ledger.spendByPeriod()).toEqual([{ keyFingerprint: 'fp0000000000', period, ...sums }]);
    const estimated = (2 * sum(micro)) / 1e6;
    expect(store.ledger.modelTotals('r1')).toEqual([
      {
        model: 'flat-image',
        tasks: 2 * TIES.length,
        estimated,
        estimatedMin: estimated,
        estimatedMax: estimated,
        ...sums,
      },
    ]);
    expect(store.reportReads.runTotals('r1')).toEqual({ estimated, ...sums });
    const figures = store.reportReads.reportModelFigures('r1')[0];
    expect(figures).toMatchObject({ estimated, charged, refunded, pricedCharged: charged });
    expect(figures?.pricedListPrice).toBe(charged);
    expect(store.tasks.pendingByModel('r1')).toEqual([
      { model: 'flat-image', tasks: TIES.length, tokens: charged, min: charged, max: charged },
    ]);
    const perTask = store.spend.taskSpend('r1');
    expect(sum(perTask.map((t) => Math.round(t.net * 1e6))) / 1e6).toBe(net);
    for (const t of perTask) expect(t.charged).toBe((micro[Number(t.taskId.slice(1))] ?? 0) / 1e6);
    // The account's kept sums (triggers, micro() on PostgreSQL) say the same as every read above.
    const account = describeRun(store, 'r1').money;
    expect({ charged: account.charged, refunded: account.refunded, net: account.net }).toEqual(sums);
  });
});
