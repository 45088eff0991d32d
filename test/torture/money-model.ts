// A model of a run's budget and ledger, and random sequences of what several actors do to one state file
// (fast-check's fc.commands): runners submit, answers come back or are lost, jobs fail and are refunded
// and retried, people re-roll one or many results at once, approve, reject, retry what is in doubt; a
// runner is killed -9 between its intent and its commit, and another takes over. Every action runs
// against the real store — a real SQLite file, one connection per actor — and after each one:
//   - the worst cases reserved plus the net spend never pass the budget;
//   - one charge per ask (a first submission, a retry after a refund, a re-roll, a retry of doubt);
//   - no task holds a reservation unless it is being sent, in doubt, or a re-roll not sent yet;
//   - the store's figures equal the model's, to the micro-token.
// Used by test/store/money-model.test.ts (a slice) and `npm run torture` (thousands).

import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { runMoney } from '../../src/money/index.js';
import { type NewTask, OverBudgetError, openStore, type Store } from '../../src/store/index.js';
import { fromMicro } from '../../src/util/money.js';

const RUN = 'r1';
const FP = 'fp0000000000';

type State = 'pending' | 'submitting' | 'submitted' | 'done' | 'failed' | 'in_doubt' | 'rejected';

interface ModelTask {
  id: string;
  price: number;
  review: boolean;
  state: State;
  verdict: 'approved' | 'rejected' | undefined;
  attemptNo: number;
  /** The open reservation: held (asked or sent), doubt (answer lost). */
  open: { state: 'held' | 'doubt'; amount: number } | undefined;
  imgUuid: string | undefined;
  asks: number;
  charges: number;
}

export interface Model {
  budget: number;
  charged: number;
  refunded: number;
  tasks: ModelTask[];
  jobs: number;
}

interface Real {
  file: string;
  backend: Backend;
  /** One connection per actor: runner A, runner B (a second process), the reviewer (page or CLI). */
  conns: Store[];
}

type Cmd = fc.Command<Model, Real>;

/**
 * Where a run's state lives: a SQLite file by default; the PostgreSQL suite passes a database per file and
 * a raw connection to it (test/store/helpers.ts), and whether a raw transaction must take the writer's
 * lock as the store's BEGIN IMMEDIATE does there.
 */
export interface Backend {
  state(file: string): string;
  raw(file: string): Database.Database;
  begin: string;
}

const SQLITE: Backend = {
  state: (file) => file,
  raw: (file) => new Database(file),
  begin: 'BEGIN IMMEDIATE',
};

const micro = (n: number) => Math.round(n * 1_000_000);
const held = (m: Model, state: 'held' | 'doubt') =>
  m.tasks.reduce((n, t) => n + (t.open?.state === state ? t.open.amount : 0), 0);
const committed = (m: Model) => m.charged - m.refunded + held(m, 'held') + held(m, 'doubt');

function taskOf(m: Model, i: number): ModelTask {
  const t = m.tasks[i % m.tasks.length];
  if (t === undefined) throw new Error('no task');
  return t;
}

/** A submission's intent: reserved if the budget holds it (less what a re-roll holds already). */
class Submit implements Cmd {
  constructor(
    readonly conn: number,
    readonly task: number,
  ) {}
  check = (m: Readonly<Model>) => taskOf(m as Model, this.task).state === 'pending';
  run(m: Model, r: Real): void {
    const t = taskOf(m, this.task);
    const has = t.open?.state === 'held' ? t.open.amount : 0;
    const fits = committed(m) - has + Math.max(has, t.price) <= m.budget;
    let refused = false;
    try {
      r.conns[this.conn % r.conns.length]?.submissions.recordSubmitIntent(RUN, t.id);
    } catch (error) {
      if (!(error instanceof OverBudgetError)) throw error;
      refused = true;
    }
    if (refused === fits) throw new Error(`store ${refused ? 'refused' : 'took'} ${t.id}, model ${fits}`);
    if (refused) return;
    if (t.open === undefined) t.asks += t.asks === 0 ? 1 : 0;
    t.open = { state: 'held', amount: Math.max(has, t.price) };
    t.state = 'submitting';
    t.attemptNo++;
  }
  toString = () => `submit(conn ${this.conn}, t${this.task})`;
}

/** The answer: accepted at a cost up to the worst case. */
class Answer implements Cmd {
  constructor(
    readonly conn: number,
    readonly task: number,
    readonly share: number,
  ) {}
  check = (m: Readonly<Model>) => taskOf(m as Model, this.task).state === 'submitting';
  run(m: Model, r: Real): void {
    const t = taskOf(m, this.task);
    const cost = Math.floor((t.price * this.share) / 100);
    const imgUuid = `job-${++m.jobs}`;
    r.conns[this.conn % r.conns.length]?.submissions.recordSubmitted(RUN, t.id, t.attemptNo, {
      imgUuid,
      cost: fromMicro(cost),
      keyFingerprint: FP,
    });
    t.state = 'submitted';
    t.imgUuid = imgUuid;
    t.open = undefined;
    t.charges++;
    m.charged += cost;
  }
  toString = () => `answer(conn ${this.conn}, t${this.task}, ${this.share}% of worst)`;
}

/** Sent, answer lost: in doubt, the worst case kept. */
class Lost implements Cmd {
  constructor(readonly task: number) {}
  check = (m: Readonly<Model>) => taskOf(m as Model, this.task).state === 'submitting';
  run(m: Model, r: Real): void {
    const t = taskOf(m, this.task);
    r.conns[0]?.submissions.recordInDoubt(RUN, t.id, t.attemptNo, { message: 'connection reset' });
    t.state = 'in_doubt';
    if (t.open) t.open.state = 'doubt';
  }
  toString = () => `answer lost(t${this.task})`;
}

/** Known not charged (a 503 before the job, or a 400): released; back to pending or rejected. */
class NotCharged implements Cmd {
  constructor(
    readonly task: number,
    readonly rejected: boolean,
  ) {}
  check = (m: Readonly<Model>) => taskOf(m as Model, this.task).state === 'submitting';
  run(m: Model, r: Real): void {
    const t = taskOf(m, this.task);
    r.conns[0]?.submissions.recordNotCharged(RUN, t.id, t.attemptNo, {
      outcome: this.rejected ? 'rejected' : 'not_charged',
      message: this.rejected ? 'bad prompt' : 'service unavailable',
    });
    t.state = this.rejected ? 'rejected' : 'pending';
    t.open = undefined;
  }
  toString = () => `${this.rejected ? 'rejected' : 'not charged'}(t${this.task})`;
}

/** The job failed and was refunded; the runner asks again (an automatic retry). */
class FailAndRetry implements Cmd {
  constructor(
    readonly task: number,
    readonly retry: boolean,
  ) {}
  check = (m: Readonly<Model>) => taskOf(m as Model, this.task).state === 'submitted';
  run(m: Model, r: Real): void {
    const t = taskOf(m, this.task);
    const store = r.conns[0] as Store;
    const result = store.jobs.recordJobStatus(t.imgUuid ?? '', 'failed', { status: 'failed' }, 'poll');
    if (result.refunded === null) throw new Error(`no refund for ${t.id}`);
    m.refunded += micro(result.refunded);
    t.state = 'failed';
    if (this.retry && store.tasks.requeueTasks(RUN, [t.id], ['failed']).length === 1) {
      t.state = 'pending';
      t.asks++;
    }
  }
  toString = () => `fail+refund(t${this.task}${this.retry ? ', retried' : ''})`;
}

/** The job succeeded and its files are on disk. */
class Complete implements Cmd {
  constructor(readonly task: number) {}
  check = (m: Readonly<Model>) => taskOf(m as Model, this.task).state === 'submitted';
  run(m: Model, r: Real): void {
    const t = taskOf(m, this.task);
    const store = r.conns[1 % r.conns.length] as Store;
    store.jobs.recordJobStatus(t.imgUuid ?? '', 'completed', { status: 'completed' }, 'poll');
    store.tasks.markDone(RUN, t.id);
    t.state = 'done';
  }
  toString = () => `complete(t${this.task})`;
}

/** One ask of re-rolls (one or many at once): all reserved or none. */
class Reroll implements Cmd {
  constructor(
    readonly conn: number,
    readonly picks: number[],
  ) {}
  check = (m: Readonly<Model>) => this.#targets(m as Model).length > 0;
  #targets(m: Model): ModelTask[] {
    const ts = [...new Set(this.picks.map((p) => taskOf(m, p)))];
    return ts.filter((t) => t.review && t.state === 'done');
  }
  run(m: Model, r: Real): void {
    const ts = this.#targets(m);
    const need = ts.reduce((n, t) => n + t.price, 0);
    const fits = committed(m) + need <= m.budget;
    const store = r.conns[this.conn % r.conns.length] as Store;
    const outcomes = store.reviews.decideMany(
      RUN,
      ts.map((t) => ({ taskId: t.id, req: { verdict: 'reroll' as const, by: 'model' } })),
    );
    const ok = outcomes.filter((o) => o.ok).length;
    if (ok !== (fits ? ts.length : 0)) throw new Error(`re-roll: ${ok} recorded, model fits ${fits}`);
    if (!fits) return;
    for (const t of ts) {
      t.state = 'pending';
      t.verdict = undefined;
      t.open = { state: 'held', amount: t.price };
      t.asks++;
    }
  }
  toString = () => `reroll(conn ${this.conn}, [${this.picks.map((p) => `t${p}`).join(', ')}])`;
}

class Decide implements Cmd {
  constructor(
    readonly task: number,
    readonly verdict: 'approve' | 'reject',
  ) {}
  check = (m: Readonly<Model>) => {
    const t = taskOf(m as Model, this.task);
    return t.review && t.state === 'done';
  };
  run(m: Model, r: Real): void {
    const t = taskOf(m, this.task);
    const out = r.conns[2 % r.conns.length]?.reviews.decide(RUN, t.id, {
      verdict: this.verdict,
      by: 'model',
    });
    if (!out?.ok) throw new Error(`${this.verdict} ${t.id} refused`);
    t.verdict = this.verdict === 'approve' ? 'approved' : 'rejected';
  }
  toString = () => `${this.verdict}(t${this.task})`;
}

/** `run --retry-in-doubt`: the user asks again; the doubt is given up. */
class RetryInDoubt implements Cmd {
  constructor(readonly task: number) {}
  check = (m: Readonly<Model>) => taskOf(m as Model, this.task).state === 'in_doubt';
  run(m: Model, r: Real): void {
    const t = taskOf(m, this.task);
    if (r.conns[1 % r.conns.length]?.tasks.requeueTasks(RUN, [t.id], ['in_doubt']).length !== 1) {
      throw new Error(`${t.id} not requeued`);
    }
    t.state = 'pending';
    t.open = undefined;
    t.asks++;
  }
  toString = () => `retry in doubt(t${this.task})`;
}

/** A callback proves a lost answer was accepted: charged at list price, the doubt settled. */
class Adopt implements Cmd {
  constructor(readonly task: number) {}
  check = (m: Readonly<Model>) => taskOf(m as Model, this.task).state === 'in_doubt';
  run(m: Model, r: Real): void {
    const t = taskOf(m, this.task);
    const imgUuid = `job-${++m.jobs}`;
    const ok = r.conns[0]?.submissions.adoptInDoubt(RUN, t.id, {
      imgUuid,
      cost: undefined,
      listPrice: fromMicro(t.price),
      keyFingerprint: FP,
    });
    if (!ok) throw new Error(`${t.id} not adopted`);
    t.state = 'submitted';
    t.imgUuid = imgUuid;
    t.open = undefined;
    t.charges++;
    m.charged += t.price;
  }
  toString = () => `adopt from doubt(t${this.task})`;
}

/**
 * kill -9 of a runner: a connection dies inside its transaction after the intent's writes (nothing of it
 * is kept), then the next runner recovers what earlier processes left submitting (in doubt).
 */
class Kill implements Cmd {
  constructor(readonly task: number) {}
  check = () => true;
  run(m: Model, r: Real): void {
    const t = taskOf(m, this.task);
    const raw = r.backend.raw(r.file);
    raw.pragma('busy_timeout = 5000');
    raw.exec(r.backend.begin);
    raw
      .prepare("UPDATE tasks SET state = 'submitting' WHERE run_id = ? AND task_id = ? AND state = 'pending'")
      .run(RUN, t.id);
    raw.prepare('UPDATE run_money SET budget = budget * 1000 WHERE run_id = ?').run(RUN);
    // Gone without a commit, as a process killed in the middle of its transaction.
    raw.close();
    r.conns[1 % r.conns.length]?.submissions.recoverInterruptedSubmissions(RUN);
    for (const u of m.tasks) {
      if (u.state !== 'submitting') continue;
      u.state = 'in_doubt';
      if (u.open) u.open.state = 'doubt';
    }
  }
  toString = () => `kill -9 mid-transaction (t${this.task}) and a second runner takes over`;
}

function check(m: Model, r: Real): void {
  const store = r.conns[2 % r.conns.length] as Store;
  const f = runMoney(store, RUN);
  const expected = {
    budget: m.budget,
    charged: m.charged,
    refunded: m.refunded,
    held: held(m, 'held'),
    doubt: held(m, 'doubt'),
  };
  const got = { budget: f.budget, charged: f.charged, refunded: f.refunded, held: f.held, doubt: f.doubt };
  if (JSON.stringify(got) !== JSON.stringify(expected)) {
    throw new Error(`store ${JSON.stringify(got)} != model ${JSON.stringify(expected)}`);
  }
  if (f.committed > m.budget) throw new Error(`committed ${f.committed} over the budget ${m.budget}`);
  for (const t of m.tasks) {
    const charges = store.submissions.chargedAttempts(RUN, t.id);
    if (charges !== t.charges || charges > t.asks) {
      throw new Error(`${t.id}: ${charges} charges for ${t.asks} asks (model ${t.charges})`);
    }
    const state = store.tasks.getTask(RUN, t.id)?.state;
    if (state !== t.state && !(t.state === 'submitted' && state === 'running')) {
      throw new Error(`${t.id}: store ${state}, model ${t.state}`);
    }
    const open = store.reservations.heldFor(RUN, t.id);
    const mayHold = t.state === 'submitting' || (t.state === 'pending' && t.open !== undefined);
    if (open > 0 && !mayHold) throw new Error(`${t.id} is ${t.state} and holds ${open}`);
  }
}

/** Wraps each command so the invariants are checked after it. */
function checked(cmd: Cmd): Cmd {
  return {
    check: (m) => cmd.check(m),
    run: (m, r) => {
      cmd.run(m, r);
      check(m, r);
    },
    toString: () => cmd.toString(),
  };
}

const task = fc.nat(7);
const conn = fc.nat(2);
const COMMANDS = [
  fc.tuple(conn, task).map(([c, t]) => checked(new Submit(c, t))),
  fc.tuple(conn, task).map(([c, t]) => checked(new Submit(c, t))),
  fc.tuple(conn, task, fc.integer({ min: 0, max: 100 })).map(([c, t, s]) => checked(new Answer(c, t, s))),
  task.map((t) => checked(new Lost(t))),
  fc.tuple(task, fc.boolean()).map(([t, rej]) => checked(new NotCharged(t, rej))),
  fc.tuple(task, fc.boolean()).map(([t, retry]) => checked(new FailAndRetry(t, retry))),
  task.map((t) => checked(new Complete(t))),
  task.map((t) => checked(new Complete(t))),
  fc.tuple(conn, fc.array(task, { minLength: 1, maxLength: 4 })).map(([c, ts]) => checked(new Reroll(c, ts))),
  fc
    .tuple(task, fc.constantFrom('approve' as const, 'reject' as const))
    .map(([t, v]) => checked(new Decide(t, v))),
  task.map((t) => checked(new RetryInDoubt(t))),
  task.map((t) => checked(new Adopt(t))),
  task.map((t) => checked(new Kill(t))),
];

const setupArb = fc.record({
  // Prices of 0.05 to 0.5 tokens, in micro-tokens; budgets from too small for one task to enough for all.
  prices: fc.array(fc.integer({ min: 1, max: 10 }), { minLength: 8, maxLength: 8 }),
  reviewed: fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }),
  budget: fc.integer({ min: 1, max: 60 }),
});

function newTask(id: string, price: number, review: boolean): NewTask {
  const tokens = fromMicro(price);
  return {
    taskId: id,
    model: 'flat-image',
    endpoint: '/api/v1/images/generations',
    wireBody: JSON.stringify({ model: 'flat-image', prompt: id }),
    estimate: { tokens, min: tokens, max: tokens, basis: 'model', assumedPrice: false },
    review,
    retries: 1,
  };
}

export interface ModelRun {
  runs: number;
  seed: number;
  /** fast-check's report of the shrunk failing sequence, when one failed. */
  failure?: string;
}

/** Runs `runs` random sequences; the seed is printed by the caller, a failure comes back shrunk. */
export function runMoneyModel(runs: number, seed: number, backend: Backend = SQLITE): ModelRun {
  const property = fc.property(setupArb, fc.commands(COMMANDS, { maxCommands: 60 }), (setup, cmds) => {
    // Memory-backed when the machine has it: the store syncs every commit, thousands of them per run.
    const dir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'mb-money-model-'));
    const file = join(dir, 'state.db');
    const state = backend.state(file);
    const conns = [openStore(state), openStore(state), openStore(state)];
    try {
      const first = conns[0] as Store;
      const budget = setup.budget * 50_000;
      first.runs.createRun({
        id: RUN,
        manifestPath: '/m/model.yaml',
        manifestName: 'model',
        settings: { budget: fromMicro(budget) },
      });
      const prices = setup.prices.map((p) => p * 50_000);
      first.tasks.upsertTasks(
        RUN,
        prices.map((p, i) => newTask(`t${i}`, p, setup.reviewed[i] === true)),
      );
      const model: Model = {
        budget,
        charged: 0,
        refunded: 0,
        jobs: 0,
        tasks: prices.map((price, i) => ({
          id: `t${i}`,
          price,
          review: setup.reviewed[i] === true,
          state: 'pending',
          verdict: undefined,
          attemptNo: 0,
          open: undefined,
          imgUuid: undefined,
          asks: 0,
          charges: 0,
        })),
      };
      fc.modelRun(() => ({ model, real: { file, backend, conns } }), cmds);
    } finally {
      for (const c of conns) c.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
  const details = fc.check(property, { numRuns: runs, seed });
  if (!details.failed) return { runs: details.numRuns, seed };
  return { runs: details.numRuns, seed, failure: fc.defaultReportMessage(details) ?? 'failed' };
}
