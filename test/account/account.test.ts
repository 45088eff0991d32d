// The account's arithmetic on plain facts (accountOf is pure), and its committed JSON Schema.
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { RUN_ACCOUNT_SCHEMA_FILE, runAccountSchemaText } from '../../scripts/write-schemas.js';
import { accountOf, runAccountSchema, sumAccounts } from '../../src/account/index.js';
import type { AccountFacts, AccountLedgerRow, RunRecord } from '../../src/store/index.js';
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
};

function facts(over: Partial<AccountFacts> & { ledger: AccountFacts['ledger'] }): AccountFacts {
  return {
    counts: { ...emptyTaskCounts(), done: 1 },
    review: { reviewed: 0, awaiting: 0, approved: 0, rejected: 0, waiting: 0, rerollsAsked: 0 },
    estimates: { tokens: 1, min: 1, max: 1, leftTokens: 0, leftMax: 0, inDoubtMax: 0 },
    detail: { ledger: [], attempts: [] },
    notOnDisk: {
      unfetched: { tasks: 0, tokens: 0 },
      stalled: { tasks: 0, tokens: 0 },
      lost: { tasks: 0, tokens: 0 },
    },
    ids: { inDoubt: [], awaiting: [], unfinished: [] },
    ...over,
  };
}

const charge = (img: string, tokens: number, reroll = false): AccountLedgerRow => ({
  taskId: 't',
  imgUuid: img,
  kind: 'charge',
  tokens,
  reroll,
});
const refund = (img: string, tokens: number): AccountLedgerRow => ({
  ...charge(img, tokens),
  kind: 'refund',
});
const attempt = (n: number, outcome: 'submitted' | 'in_doubt' | 'not_charged', img: string | null) => ({
  taskId: 't',
  attemptNo: n,
  outcome,
  imgUuid: img,
});

// Each case: one task's ledger rows and attempts, and the jobs each kind must hold.
const CASES = [
  {
    name: 'a failed, refunded job sent again is a retry',
    ledger: [charge('a', 2), refund('a', 2), charge('b', 2)],
    attempts: [attempt(1, 'submitted', 'a'), attempt(2, 'submitted', 'b')],
    jobs: { first: 1, retry: 1, reroll: 0, doubt_retry: 0, sent_again: 0 },
    net: { first: 0, retry: 2 },
  },
  {
    name: 'a re-roll is a re-roll, never a retry',
    ledger: [charge('a', 2), charge('b', 2, true)],
    attempts: [attempt(1, 'submitted', 'a'), attempt(2, 'submitted', 'b')],
    jobs: { first: 1, retry: 0, reroll: 1, doubt_retry: 0, sent_again: 0 },
    net: { first: 2, reroll: 2 },
  },
  {
    name: 'a re-roll whose job failed is refunded as a re-roll',
    ledger: [charge('a', 2), charge('b', 2, true), refund('b', 2)],
    attempts: [attempt(1, 'submitted', 'a'), attempt(2, 'submitted', 'b')],
    jobs: { first: 1, retry: 0, reroll: 1, doubt_retry: 0, sent_again: 0 },
    net: { first: 2, reroll: 0 },
  },
  {
    name: 'a task sent again after an answer in doubt is a retry of doubt',
    ledger: [charge('b', 2)],
    attempts: [attempt(1, 'in_doubt', null), attempt(2, 'submitted', 'b')],
    jobs: { first: 0, retry: 0, reroll: 0, doubt_retry: 1, sent_again: 0 },
    net: { doubt_retry: 2 },
  },
  {
    name: 'a refusal before the charge leaves the first job first',
    ledger: [charge('b', 2)],
    attempts: [attempt(1, 'not_charged', null), attempt(2, 'submitted', 'b')],
    jobs: { first: 1, retry: 0, reroll: 0, doubt_retry: 0, sent_again: 0 },
    net: { first: 2 },
  },
  {
    name: 'a done task sent again with a changed request is sent again',
    ledger: [charge('a', 2), charge('b', 3)],
    attempts: [attempt(1, 'submitted', 'a'), attempt(2, 'submitted', 'b')],
    jobs: { first: 1, retry: 0, reroll: 0, doubt_retry: 0, sent_again: 1 },
    net: { first: 2, sent_again: 3 },
  },
] as const;

describe('the money of a run by kind', () => {
  it.each(CASES)('$name', (c) => {
    const charged = c.ledger.filter((r) => r.kind === 'charge');
    const refunded = c.ledger.filter((r) => r.kind === 'refund');
    const sum = (rows: readonly AccountLedgerRow[]) => rows.reduce((n, r) => n + r.tokens, 0);
    const account = accountOf(
      RUN,
      facts({
        ledger: { charged: sum(charged), refunded: sum(refunded), charges: charged.length },
        detail: { ledger: [...c.ledger], attempts: [...c.attempts] },
      }),
    );
    const jobs = Object.fromEntries(Object.entries(account.money.by_kind).map(([k, v]) => [k, v.jobs]));
    expect(jobs).toEqual(c.jobs);
    for (const [kind, net] of Object.entries(c.net)) {
      expect(account.money.by_kind[kind as keyof typeof c.jobs].net).toBe(net);
    }
    const kinds = Object.values(account.money.by_kind);
    expect(kinds.reduce((n, k) => n + k.charged, 0)).toBe(account.money.charged);
    expect(kinds.reduce((n, k) => n + k.refunded, 0)).toBe(account.money.refunded);
    expect(runAccountSchema.parse(account)).toEqual(account);
  });

  it('counts the tasks with one ledger row as first jobs without reading them one by one', () => {
    const account = accountOf(
      RUN,
      facts({
        counts: { ...emptyTaskCounts(), done: 1000 },
        ledger: { charged: 200, refunded: 0, charges: 1000 },
      }),
    );
    expect(account.money.by_kind.first).toEqual({
      jobs: 1000,
      tasks: 1000,
      charged: 200,
      refunded: 0,
      net: 200,
    });
    expect(account.next).toEqual([{ action: 'none', tasks: 0, task_ids: [], command: null }]);
  });
});

describe('the counts and the next steps', () => {
  it('counts a result rejected in review as rejected, and names what each next step is about', () => {
    const account = accountOf(
      RUN,
      facts({
        counts: { ...emptyTaskCounts(), done: 3, skipped: 1, in_doubt: 1, pending: 2, awaiting_review: 1 },
        review: { reviewed: 3, awaiting: 1, approved: 1, rejected: 1, waiting: 1, rerollsAsked: 0 },
        ledger: { charged: 4, refunded: 0, charges: 4 },
        ids: { inDoubt: ['d'], awaiting: ['s2'], unfinished: ['p1', 'p2', 'c3'] },
      }),
    );
    expect(account.by_state).toMatchObject({ done: 2, rejected: 1, skipped: 1, awaiting_review: 1 });
    expect(account.rejected).toEqual({ by_api: 0, in_review: 1 });
    expect(account.tasks).toBe(8);
    expect(account.unfinished).toBe(3);
    expect(account.next.map((s) => [s.action, s.tasks, s.command])).toEqual([
      ['retry-in-doubt', 1, 'mediabatch run shop.yaml --retry-in-doubt'],
      ['review', 1, 'mediabatch review r1'],
      ['continue', 2, 'mediabatch run shop.yaml'],
    ]);
  });

  it('sums the accounts of shards to the micro-token, a merge step first while a shard is missing', () => {
    const one = accountOf(RUN, facts({ ledger: { charged: 0.1, refunded: 0, charges: 1 } }));
    const two = accountOf(RUN, facts({ ledger: { charged: 0.2, refunded: 0, charges: 1 } }));
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
