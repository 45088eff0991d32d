// The account's arithmetic on plain facts (accountOf is pure), and its committed JSON Schema.
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { RUN_ACCOUNT_SCHEMA_FILE, runAccountSchemaText } from '../../scripts/write-schemas.js';
import { accountOf, runAccountSchema, sumAccounts } from '../../src/account/index.js';
import { emptyAccountSums } from '../../src/store/account-reads.js';
import type { AccountFacts, RunRecord } from '../../src/store/index.js';
import { emptyTaskCounts } from '../../src/store/index.js';

const RUN: RunRecord = {
  id: 'r1',
  manifestPath: 'shop.yaml',
  manifestName: 'shop',
  state: 'finished',
  exitCode: 0,
  settings: {},
  callbackToken: null,
  balanceBefore: null,
  balanceAfter: null,
  createdAt: new Date(0),
  startedAt: null,
  finishedAt: null,
  firstStartedAt: null,
  activeMs: 0,
  api: null,
  planDigest: null,
  planTasks: null,
  planStoring: false,
};

type Money = AccountFacts['money'];

/** Money in micro-tokens per kind, as the store keeps it; kinds not named hold nothing. */
function money(over: Partial<Money> = {}): Money {
  return { ...emptyAccountSums().money, ...over };
}

function facts(over: Partial<AccountFacts> = {}): AccountFacts {
  return {
    counts: { ...emptyTaskCounts(), done: 1 },
    review: { reviewed: 0, awaiting: 0, approved: 0, rejected: 0, waiting: 0, rerollsAsked: 0 },
    estimates: { tokens: 1e6, min: 1e6, max: 1e6, leftTokens: 0, leftMax: 0, inDoubtMax: 0 },
    money: money(),
    notOnDisk: {
      unfetched: { tasks: 0, tokens: 0 },
      stalled: { tasks: 0, tokens: 0 },
      lost: { tasks: 0, tokens: 0 },
    },
    ids: { inDoubt: [], awaiting: [], unfinished: [] },
    ...over,
  };
}

// Which kind each job is, and the sums per kind, are the store's (test/store/account-sums.test.ts).
describe('the money of a run by kind', () => {
  it('adds the kinds up to the totals, in tokens to the micro-token, a re-roll never a retry', () => {
    const account = accountOf(
      RUN,
      facts({
        counts: { ...emptyTaskCounts(), done: 1000 },
        money: money({
          first: { jobs: 1000, tasks: 1000, charged: 200_000_000, refunded: 100_000 },
          reroll: { jobs: 2, tasks: 1, charged: 400_000, refunded: 0 },
          retry: { jobs: 1, tasks: 1, charged: 100_000, refunded: 0 },
        }),
      }),
    );
    expect(account.money.by_kind.first).toEqual({
      jobs: 1000,
      tasks: 1000,
      charged: 200,
      refunded: 0.1,
      net: 199.9,
    });
    expect(account.money.by_kind.reroll).toEqual({ jobs: 2, tasks: 1, charged: 0.4, refunded: 0, net: 0.4 });
    expect(account.money).toMatchObject({ jobs: 1003, charged: 200.5, refunded: 0.1, net: 200.4 });
    expect(account.next).toEqual([{ action: 'none', tasks: 0, task_ids: [], command: null }]);
    expect(runAccountSchema.parse(account)).toEqual(account);
  });
});

describe('the counts and the next steps', () => {
  it('counts a result rejected in review as rejected, and names what each next step is about', () => {
    const account = accountOf(
      RUN,
      facts({
        counts: { ...emptyTaskCounts(), done: 3, skipped: 1, in_doubt: 1, pending: 2, awaiting_review: 1 },
        review: { reviewed: 3, awaiting: 1, approved: 1, rejected: 1, waiting: 1, rerollsAsked: 0 },
        money: money({ first: { jobs: 4, tasks: 4, charged: 4e6, refunded: 0 } }),
        ids: { inDoubt: ['d'], awaiting: ['s2'], unfinished: ['p1', 'p2', 'c3'] },
      }),
    );
    expect(account.by_state).toMatchObject({ done: 2, rejected: 1, skipped: 1, awaiting_review: 1 });
    expect(account.rejected).toEqual({ by_api: 0, in_review: 1 });
    expect(account.tasks).toBe(8);
    expect(account.unfinished).toBe(3);
    expect(account.next.map((s) => [s.action, s.tasks, s.command])).toEqual([
      ['retry-in-doubt', 1, 'mediabatch run shop.yaml --run-id r1 --retry-in-doubt'],
      ['review', 1, 'mediabatch review r1'],
      ['continue', 2, 'mediabatch run shop.yaml --run-id r1'],
    ]);
  });

  it('sums the accounts of shards to the micro-token, a merge step first while a shard is missing', () => {
    const one = accountOf(
      RUN,
      facts({ money: money({ first: { jobs: 1, tasks: 1, charged: 1e5, refunded: 0 } }) }),
    );
    const two = accountOf(
      RUN,
      facts({ money: money({ first: { jobs: 1, tasks: 1, charged: 2e5, refunded: 0 } }) }),
    );
    const sum = sumAccounts([one, two], { ...one.run, id: 'r' }, [3]);
    expect(sum.money.charged).toBe(0.3);
    expect(sum.tasks).toBe(2);
    expect(sum.next[0]).toMatchObject({ action: 'merge', shards: [3] });
    expect(runAccountSchema.parse(sum)).toEqual(sum);
  });
});

describe('schemas/run-account.schema.json', () => {
  it('is the committed file (run `npx tsx scripts/write-schemas.ts` after changing src/account/schema.ts)', async () => {
    expect(await readFile(RUN_ACCOUNT_SCHEMA_FILE, 'utf8')).toBe(runAccountSchemaText());
  });
});
