// Random sequences of the store's operations against one run (fast-check), after each of which the
// account's sums kept by triggers (migration 15: estimates per state, money per kind of job) must equal
// the same sums read from every row (store.accountSumsByScan): the store's own paths (plan, send,
// answers lost and found, jobs failing and retried, reviews and re-rolls) and another writer's raw
// updates. Every sequence starts by spending money of every kind, so the comparison is never vacuous.
// Used by test/store/account-sums.test.ts (a slice, also on PostgreSQL) and `npm run torture` (many).
import { deepStrictEqual } from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { MediabatchError } from '../../src/errors.js';
import { MONEY_KINDS, openStore, type Store } from '../../src/store/index.js';
import { FakeClock, task } from '../store/helpers.js';

const RUN = 'r1';
const FP = 'fp0000000000';
const IDS = ['t0', 't1', 't4'] as const;
// Prices whose float sums drift, and one that is no whole number of micro-tokens.
const PRICES = [0.2, 2, 0.1, 0.3333333, 1.0000004] as const;

export const taskOf = (id: string, price: number, body = 'a', review = id === 't4' || id === 't5') => ({
  ...task(id, { variant: body }, price),
  review,
});

type Action =
  | { op: 'plan'; id: number; price: number; body: string }
  | { op: 'send'; id: number; job: number; price: number }
  | { op: 'notCharged' | 'inDoubt' | 'adopt'; id: number; job: number }
  | { op: 'job'; id: number; status: 'failed' | 'success' }
  | { op: 'failThenRequeue' | 'succeedThenDone'; id: number }
  | { op: 'requeue' | 'done' | 'reroll' | 'approve' | 'reject'; id: number }
  | { op: 'rawState'; id: number; state: string }
  | { op: 'rawEstimate'; id: number; price: number };

const id = fc.nat(IDS.length - 1);
const price = fc.constantFrom(...PRICES);
const job = fc.nat(1_000);
// Sending, and a job's end with what a runner does next, weigh more: they reach every kind of job.
const action: fc.Arbitrary<Action> = fc.oneof(
  fc.record({ op: fc.constant('plan' as const), id, price, body: fc.constantFrom('a', 'b') }),
  { arbitrary: fc.record({ op: fc.constant('send' as const), id, job, price }), weight: 4 },
  {
    arbitrary: fc.record({ op: fc.constantFrom('failThenRequeue' as const, 'succeedThenDone' as const), id }),
    weight: 3,
  },
  fc.record({ op: fc.constantFrom('notCharged' as const, 'inDoubt' as const, 'adopt' as const), id, job }),
  fc.record({
    op: fc.constant('job' as const),
    id,
    status: fc.constantFrom('failed' as const, 'success' as const),
  }),
  fc.record({
    op: fc.constantFrom(
      'requeue' as const,
      'done' as const,
      'reroll' as const,
      'reroll' as const,
      'approve' as const,
      'reject' as const,
    ),
    id,
  }),
  fc.record({
    op: fc.constant('rawState' as const),
    id,
    // Not into doubt: a job found for an answer in doubt rewrites that answer, which the store does only
    // for the task's last attempt (a task is in doubt through its last one); a raw move there would make
    // an earlier answer the one rewritten, a history no run has.
    state: fc.constantFrom('pending', 'skipped', 'done', 'failed', 'submitting'),
  }),
  fc.record({ op: fc.constant('rawEstimate' as const), id, price }),
);

// Every kind of job once, so the random actions after it meet money of every kind: t4 (reviewed) sent,
// done and re-rolled, then sent again; t0 failed, refunded and retried; t1 in doubt, retried.
const EVERY_KIND: Action[] = [
  { op: 'send', id: 2, job: 1, price: 2 },
  { op: 'succeedThenDone', id: 2 },
  { op: 'reroll', id: 2 },
  { op: 'send', id: 2, job: 2, price: 2 },
  { op: 'send', id: 0, job: 3, price: 0.2 },
  { op: 'failThenRequeue', id: 0 },
  { op: 'send', id: 0, job: 4, price: 0.2 },
  { op: 'inDoubt', id: 1, job: 0 },
  { op: 'requeue', id: 1 },
  { op: 'send', id: 1, job: 5, price: 0.1 },
  { op: 'succeedThenDone', id: 1 },
  { op: 'plan', id: 1, price: 0.3333333, body: 'b' },
  { op: 'send', id: 1, job: 6, price: 0.3333333 },
];

/** Runs one action; a move the store refuses (the task is not in the state it needs) changes nothing. */
function apply(store: Store, raw: () => Database.Database, a: Action, step: number): void {
  const taskId = IDS[a.id] ?? 't0';
  const img = (n: number) => `job-${step}-${n}`;
  const task = store.tasks.getTask(RUN, taskId);
  switch (a.op) {
    case 'plan':
      store.tasks.upsertTasks(RUN, [taskOf(taskId, a.price, a.body)], { acceptChanges: true });
      return;
    case 'send': {
      const n = store.submissions.recordSubmitIntent(RUN, taskId);
      store.submissions.recordSubmitted(RUN, taskId, n, {
        imgUuid: img(a.job),
        cost: a.price,
        keyFingerprint: FP,
      });
      return;
    }
    case 'notCharged':
      store.submissions.recordNotCharged(RUN, taskId, store.submissions.recordSubmitIntent(RUN, taskId), {
        outcome: 'not_charged',
        message: 'busy',
      });
      return;
    case 'inDoubt':
      store.submissions.recordInDoubt(RUN, taskId, store.submissions.recordSubmitIntent(RUN, taskId), {
        message: 'connection reset',
      });
      return;
    case 'adopt':
      store.submissions.adoptInDoubt(RUN, taskId, {
        imgUuid: img(a.job),
        cost: undefined,
        listPrice: task?.estimate.max ?? 1,
        keyFingerprint: FP,
      });
      return;
    case 'job':
      if (task?.imgUuid) store.jobs.recordJobStatus(task.imgUuid, a.status, { status: a.status }, 'poll');
      return;
    case 'failThenRequeue':
      if (task?.imgUuid) store.jobs.recordJobStatus(task.imgUuid, 'failed', { status: 'failed' }, 'poll');
      store.tasks.requeueTasks(RUN, [taskId], ['failed']);
      return;
    case 'succeedThenDone':
      if (task?.imgUuid) store.jobs.recordJobStatus(task.imgUuid, 'success', { status: 'success' }, 'poll');
      store.tasks.markDone(RUN, taskId);
      return;
    case 'requeue':
      store.tasks.requeueTasks(RUN, [taskId], ['failed', 'in_doubt']);
      return;
    case 'done':
      store.tasks.markDone(RUN, taskId);
      return;
    case 'reroll':
    case 'approve':
    case 'reject':
      store.reviews.decide(RUN, taskId, { verdict: a.op, by: 'test' });
      return;
    case 'rawState':
    case 'rawEstimate': {
      const db = raw();
      try {
        if (a.op === 'rawState') {
          db.prepare('UPDATE tasks SET state = ? WHERE run_id = ? AND task_id = ?').run(a.state, RUN, taskId);
        } else {
          db.prepare('UPDATE tasks SET est_tokens = ?, est_max = ? WHERE run_id = ? AND task_id = ?').run(
            a.price,
            a.price * 2,
            RUN,
            taskId,
          );
        }
      } finally {
        db.close();
      }
      return;
    }
  }
}

/** A refusal of the store is part of the sequence; a broken constraint (a sum below 0) is a failure. */
function tolerated(error: unknown): boolean {
  return error instanceof MediabatchError && !/constraint/i.test(error.message);
}

function kept(store: Store) {
  const { estimates, money } = store.accountFacts(RUN);
  return { estimates, money };
}

/** Where each sequence's state lives: a SQLite file by default; the PostgreSQL suite passes its own. */
export interface SumsBackend {
  state(file: string): string;
  raw(file: string): Database.Database;
}

export interface AccountSumsResult {
  runs: number;
  seed: number;
  /** The shrunk sequence and the sums that differed, when they did. */
  failure?: string;
}

/** Runs `runs` random sequences from `seed`; each in a folder of its own, removed after it. */
export function runAccountSums(
  runs: number,
  seed: number,
  backend: SumsBackend = { state: (f) => f, raw: (f) => new Database(f) },
): AccountSumsResult {
  const result = fc.check(
    fc.property(fc.array(action, { minLength: 10, maxLength: 50, size: 'max' }), (actions) => {
      const dir = mkdtempSync(join(tmpdir(), 'mediabatch-sums-'));
      const file = join(dir, 'mediabatch.db');
      try {
        sequence(backend, file, actions);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }),
    { numRuns: runs, seed },
  );
  const failure = result.failed
    ? `${fc.defaultReportMessage(result) ?? ''}\n(ACCOUNT_SUMS_SEED=${seed} replays it)`
    : undefined;
  return { runs, seed, ...(failure === undefined ? {} : { failure }) };
}

function sequence(backend: SumsBackend, file: string, actions: readonly Action[]): void {
  const store = openStore(backend.state(file), { now: new FakeClock().now });
  try {
    store.runs.createRun({ id: RUN, manifestPath: '/m/shop.yaml', manifestName: 'shop', settings: {} });
    store.tasks.upsertTasks(
      RUN,
      IDS.map((t, i) => taskOf(t, PRICES[i % PRICES.length] ?? 1)),
    );
    [...EVERY_KIND, ...actions].forEach((a, step) => {
      try {
        apply(store, () => backend.raw(file), a, step);
      } catch (error) {
        if (!tolerated(error)) throw error;
      }
      deepStrictEqual(kept(store), store.accountSumsByScan(RUN), `after ${step + 1}: ${JSON.stringify(a)}`);
      if (step === EVERY_KIND.length - 1) {
        const { money } = kept(store);
        const reached = MONEY_KINDS.filter((k) => money[k].jobs > 0);
        deepStrictEqual(reached, [...MONEY_KINDS], 'the first actions spend money of every kind');
      }
    });
  } finally {
    store.close();
  }
  // Reopened, the sums are what was committed.
  const again = openStore(backend.state(file));
  try {
    deepStrictEqual(kept(again), again.accountSumsByScan(RUN), 'after a reopen');
  } finally {
    again.close();
  }
}
