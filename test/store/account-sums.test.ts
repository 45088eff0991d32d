// The account's sums kept by triggers (migration 15: estimates per state, money per kind of job) equal
// the same sums read from every row (store.accountSumsByScan) after each operation of random sequences
// (test/torture/account-sums.ts; many more in `npm run torture`), and each kind of job is named as a
// person would name it. On PostgreSQL (postgres.test.ts) one sequence, on a database of its own.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/store/db.js';
import { MIGRATIONS, type MoneyKind, type Store } from '../../src/store/index.js';
import { runAccountSums, taskOf } from '../torture/account-sums.js';
import { FakeClock, onPostgres, rawDatabase, stateFor, useTempDirs } from './helpers.js';

const RUN = 'r1';
const FP = 'fp0000000000';

const temp = useTempDirs();

function newStore(): Store {
  const file = join(temp.dir(), 'mediabatch.db');
  const store = temp.open(file, { now: new FakeClock().now });
  store.runs.createRun({ id: RUN, manifestPath: '/m/shop.yaml', manifestName: 'shop', settings: {} });
  return store;
}

function kept(store: Store) {
  const { estimates, money } = store.accountFacts(RUN);
  return { estimates, money };
}

describe("the account's sums kept by triggers", () => {
  it('equal the sums read from every row after each operation of random sequences', () => {
    const seed = Number(process.env['ACCOUNT_SUMS_SEED'] ?? Date.now() % 2_147_483_647);
    const pg = onPostgres();
    const result = runAccountSums(
      pg ? 1 : 6,
      seed,
      pg ? { state: stateFor, raw: (f) => rawDatabase(f) } : undefined,
    );
    console.log(`account sums: ${result.runs} sequences, seed ${result.seed}`);
    expect(result.failure).toBeUndefined();
  }, 600_000);
});

describe("a new run's many tasks stored at once", () => {
  // On PostgreSQL a new run's rows go in by COPY, 10,000 a statement; the counts and estimates are added
  // once per upsert, not by a trigger per row: both must still equal what the rows say.
  it('are counted and summed as every row says, in one upsert and in chunks stored while it runs', () => {
    const store = newStore();
    const prices = [0.2, 1.5, 0.3333333, 7];
    const specs = Array.from({ length: 12_345 }, (_, i) => taskOf(`t${i}`, prices[i % 4] ?? 1));
    store.tasks.upsertTasks(RUN, specs.slice(0, 10_001));
    for (let at = 10_001; at < specs.length; at += 1_000) {
      store.tasks.upsertTasks(RUN, specs.slice(at, at + 1_000), { allNew: true });
    }
    expect(store.tasks.countTasksByState(RUN).pending).toBe(12_345);
    const { estimates } = kept(store);
    expect(estimates).toEqual(store.accountSumsByScan(RUN).estimates);
    // 3,087 tasks at 0.2 and 3,086 at each of 1.5, 0.3333333 and 7, in micro-tokens.
    expect(estimates.tokens).toBe(3_087 * 200_000 + 3_086 * (1_500_000 + 333_333 + 7_000_000));
    send(store, 't12344', 'a', 2);
    expect(kept(store)).toEqual(store.accountSumsByScan(RUN));
  });
});

// Each case: what happens to one task through the store, and the jobs and net each kind then holds.
const CASES: ReadonlyArray<{
  name: string;
  steps: (s: Store) => void;
  jobs: Partial<Record<MoneyKind, number>>;
  net: Partial<Record<MoneyKind, number>>;
}> = [
  {
    name: 'a failed, refunded job sent again is an automatic retry',
    steps: (s) => {
      send(s, 't0', 'a', 2);
      s.jobs.recordJobStatus('a', 'failed', {}, 'poll');
      s.tasks.requeueTasks(RUN, ['t0'], ['failed']);
      send(s, 't0', 'b', 2);
    },
    jobs: { first: 1, retry: 1 },
    net: { first: 0, retry: 2 },
  },
  {
    name: 'a re-roll is a re-roll, never a retry, and its refund is a re-roll’s',
    steps: (s) => {
      send(s, 't4', 'a', 2);
      s.jobs.recordJobStatus('a', 'success', {}, 'poll');
      s.tasks.markDone(RUN, 't4');
      s.reviews.decide(RUN, 't4', { verdict: 'reroll', by: 'test' });
      send(s, 't4', 'b', 2);
      s.jobs.recordJobStatus('b', 'failed', {}, 'poll');
    },
    jobs: { first: 1, reroll: 1 },
    net: { first: 2, reroll: 0 },
  },
  {
    name: 'a task sent again after an answer in doubt is a retry of doubt',
    steps: (s) => {
      s.submissions.recordInDoubt(RUN, 't0', s.submissions.recordSubmitIntent(RUN, 't0'), {
        message: 'reset',
      });
      s.tasks.requeueTasks(RUN, ['t0'], ['in_doubt']);
      send(s, 't0', 'b', 2);
    },
    jobs: { doubt_retry: 1 },
    net: { doubt_retry: 2 },
  },
  {
    name: 'a job found for an answer in doubt is the first job',
    steps: (s) => {
      s.submissions.recordInDoubt(RUN, 't0', s.submissions.recordSubmitIntent(RUN, 't0'), {
        message: 'reset',
      });
      s.submissions.adoptInDoubt(RUN, 't0', {
        imgUuid: 'a',
        cost: undefined,
        listPrice: 2,
        keyFingerprint: FP,
      });
    },
    jobs: { first: 1 },
    net: { first: 2 },
  },
  {
    name: 'a refusal before the charge leaves the first job first',
    steps: (s) => {
      s.submissions.recordNotCharged(RUN, 't0', s.submissions.recordSubmitIntent(RUN, 't0'), {
        outcome: 'not_charged',
        message: 'busy',
      });
      send(s, 't0', 'b', 2);
    },
    jobs: { first: 1 },
    net: { first: 2 },
  },
  {
    name: 'a done task sent again with a changed request is sent again',
    steps: (s) => {
      send(s, 't0', 'a', 2);
      s.jobs.recordJobStatus('a', 'success', {}, 'poll');
      s.tasks.markDone(RUN, 't0');
      s.tasks.upsertTasks(RUN, [taskOf('t0', 3, 'b')], { acceptChanges: true });
      send(s, 't0', 'b', 3);
    },
    jobs: { first: 1, sent_again: 1 },
    net: { first: 2, sent_again: 3 },
  },
];

function send(s: Store, taskId: string, imgUuid: string, cost: number): void {
  const n = s.submissions.recordSubmitIntent(RUN, taskId);
  s.submissions.recordSubmitted(RUN, taskId, n, { imgUuid, cost, keyFingerprint: FP });
}

describe('each job of the money by kind', () => {
  it.each(CASES)('$name', (c) => {
    const store = newStore();
    store.tasks.upsertTasks(RUN, [taskOf('t0', 2), taskOf('t4', 2)]);
    c.steps(store);
    const { money } = kept(store);
    const jobs = Object.fromEntries(Object.entries(money).map(([k, v]) => [k, v.jobs]));
    expect(jobs).toEqual({ first: 0, retry: 0, reroll: 0, doubt_retry: 0, sent_again: 0, ...c.jobs });
    for (const [kind, net] of Object.entries(c.net)) {
      const m = money[kind as MoneyKind];
      expect((m.charged - m.refunded) / 1e6, kind).toBe(net);
    }
    expect(kept(store)).toEqual(store.accountSumsByScan(RUN));
  });
});

describe('migration 15 on a state written before it', () => {
  it.skipIf(onPostgres())(
    'fills in the sums from the rows already there, equal to the sums read from every row',
    () => {
      const file = join(temp.dir(), 'mediabatch.db');
      const clock = new FakeClock();
      const old = openDatabase(file, clock.now, MIGRATIONS.slice(0, 14));
      const at = clock.now().toISOString();
      const task = (id: string, seq: number, state: string, est: number) =>
        `('r1', '${id}', ${seq}, 'flat-image', '/api/v1/images/generations', '{}', 'h${id}', ${est}, ${est}, ${est * 2},
        'flat', 0, '${state}', '${at}')`;
      const attempt = (id: string, n: number, outcome: string, img: string | null) =>
        `('r1', '${id}', ${n}, '${at}', '${outcome}', ${img === null ? 'NULL' : `'${img}'`})`;
      const ledger = (id: string, img: string, kind: string, tokens: number, reroll = 0) =>
        `('k', '2026-11', 'r1', '${id}', '${img}', '${kind}', ${tokens}, '${at}', ${reroll})`;
      old.exec(`
      INSERT INTO runs (id, manifest_path, manifest_name, state, settings, created_at)
        VALUES ('r1', '/m.yaml', 'm', 'interrupted', '{}', '${at}');
      INSERT INTO tasks (run_id, task_id, seq, model, endpoint, body, body_hash, est_tokens, est_min, est_max,
        est_basis, est_assumed, state, updated_at)
        VALUES ${task('retried', 0, 'done', 0.2)}, ${task('doubted', 1, 'done', 2)},
          ${task('rerolled', 2, 'done', 0.3333333)}, ${task('skipped', 3, 'skipped', 5)},
          ${task('waiting', 4, 'pending', 1.5)}, ${task('lost', 5, 'in_doubt', 0.1)};
      INSERT INTO task_counts (run_id, state, n) VALUES ('r1', 'done', 3), ('r1', 'skipped', 1),
        ('r1', 'pending', 1), ('r1', 'in_doubt', 1);
      INSERT INTO attempts (run_id, task_id, attempt_no, sent_at, outcome, img_uuid)
        VALUES ${attempt('retried', 1, 'submitted', 'a1')}, ${attempt('retried', 2, 'submitted', 'a2')},
          ${attempt('doubted', 1, 'in_doubt', null)}, ${attempt('doubted', 2, 'submitted', 'b2')},
          ${attempt('rerolled', 1, 'submitted', 'c1')}, ${attempt('rerolled', 2, 'submitted', 'c2')},
          ${attempt('lost', 1, 'in_doubt', null)};
      INSERT INTO ledger (key_fingerprint, period, run_id, task_id, img_uuid, kind, tokens, at, reroll)
        VALUES ${ledger('retried', 'a1', 'charge', 0.2)}, ${ledger('retried', 'a1', 'refund', 0.2)},
          ${ledger('retried', 'a2', 'charge', 0.2)}, ${ledger('doubted', 'b2', 'charge', 2)},
          ${ledger('rerolled', 'c1', 'charge', 0.3333333)}, ${ledger('rerolled', 'c2', 'charge', 0.3333333, 1)},
          ${ledger('rerolled', 'c2', 'refund', 0.3333333)};
    `);
      old.close();

      const store = temp.open(file, { now: clock.now });
      const { estimates, money } = kept(store);
      expect({ estimates, money }).toEqual(store.accountSumsByScan(RUN));
      expect(estimates).toEqual({
        tokens: 4_133_333,
        min: 4_133_333,
        max: 8_266_667,
        leftTokens: 1_500_000,
        leftMax: 3_000_000,
        inDoubtMax: 200_000,
      });
      const net = Object.fromEntries(
        Object.entries(money).map(([k, m]) => [k, [m.jobs, m.charged - m.refunded]]),
      );
      expect(net).toEqual({
        first: [2, 333_333],
        retry: [1, 200_000],
        doubt_retry: [1, 2_000_000],
        reroll: [1, 0],
        sent_again: [0, 0],
      });
    },
  );
});
