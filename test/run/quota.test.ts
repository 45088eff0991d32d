import { describe, expect, it } from 'vitest';
import { quotaStanding } from '../../src/store/quota.js';
import { submit, task, useStoreWithRun } from '../store/helpers.js';

const ctx = useStoreWithRun();
const KEY = 'key-one-0000';
const HOUR = 3600_000;

describe('quotaStanding', () => {
  it('without a state file or key, a configured quota stands with nothing used and nothing else is known', () => {
    const now = new Date('2025-04-02T00:00:00Z');
    expect(quotaStanding(undefined, 100, undefined, now)).toEqual({
      spent: { charged: 0, refunded: 0, net: 0 },
      limit: 100,
      used: 0,
      source: 'limit from configuration; used = this month in the local ledger',
      basis: 'configured',
      learnedAt: null,
    });
    expect(quotaStanding(undefined, undefined, KEY, now)).toMatchObject({
      limit: null,
      used: null,
      basis: null,
    });
  });

  it('a configured quota is used by what the ledger spent with the key this month', () => {
    const store = ctx.store();
    const clock = ctx.clock();
    store.tasks.upsertTasks('r1', [task('a'), task('b')]);
    submit(store, 'r1', 'a', 'uuid-a', 10, KEY); // March (T0 is 2025-03-31T23:00Z)
    clock.advance(2 * HOUR);
    submit(store, 'r1', 'b', 'uuid-b', 7, KEY); // April
    expect(quotaStanding(store, 100, KEY, clock.now())).toMatchObject({
      limit: 100,
      used: 7,
      basis: 'configured',
    });
  });

  it('a code-101 figure counts in its own month only, plus what the ledger spent since it was learned', () => {
    const store = ctx.store();
    const clock = ctx.clock();
    store.tasks.upsertTasks('r1', [task('a'), task('b')]);
    clock.advance(2 * HOUR); // 2025-04-01T01:00Z
    const learnedAt = clock.now();
    store.ledger.recordQuota(KEY, { used: 40, quota: 50, period: '2025-04' });
    clock.advance(HOUR);
    submit(store, 'r1', 'a', 'uuid-a', 3, KEY);
    expect(quotaStanding(store, undefined, KEY, clock.now())).toEqual({
      spent: { charged: 3, refunded: 0, net: 3 },
      limit: 50,
      used: 43,
      source: 'learned from the API on 2025-04-01, plus the ledger since',
      basis: 'learned',
      learnedAt,
    });
    // Configuration wins over what was learned.
    expect(quotaStanding(store, 80, KEY, clock.now())).toMatchObject({
      limit: 80,
      used: 3,
      basis: 'configured',
    });
    // A month later the learned figure no longer says anything.
    expect(quotaStanding(store, undefined, KEY, new Date('2025-05-01T00:00:00Z'))).toMatchObject({
      limit: null,
    });
  });
});
