// A run's account is read in one statement (src/store/account-reads.ts): every figure from one
// snapshot, and on PostgreSQL one round trip, where the dozen statements it replaced cost a round trip
// each. Its figures equal what the rows say, counted here plainly; test/store/postgres.test.ts runs the
// same on PostgreSQL, so both backends answer alike. The counts by state (each progress frame's) likewise.
import { describe, expect, it } from 'vitest';
import { ACCOUNT_ID_LIMIT } from '../../src/store/account-reads.js';
import type { Store } from '../../src/store/index.js';
import { onLibpqCalls, waits as waitsForServer } from '../helpers/libpq-calls.js';
import { onPostgres, rawDatabase, submit, task, useStoreWithRun } from './helpers.js';

/** Calls into libpq that wait for the server, counted from before any store of this file opens. */
const waits = { n: 0 };
onLibpqCalls((method) => {
  if (waitsForServer(method)) waits.n += 1;
});

const ctx = useStoreWithRun();
const RUN = 'r1';

/** Sets tasks' stored states as another writer would (the kept counts follow by triggers). */
function setStates(file: string, moves: Record<string, string[]>): void {
  const raw = rawDatabase(file);
  const statements = Object.entries(moves).flatMap(([state, ids]) =>
    ids.map((id) => `UPDATE tasks SET state = '${state}' WHERE run_id = '${RUN}' AND task_id = '${id}';`),
  );
  raw.exec(`BEGIN; ${statements.join('\n')} COMMIT;`);
  raw.close();
}

/** A run with tasks in every state the account names, more than ACCOUNT_ID_LIMIT in some. */
function runInEveryState(store: Store, file: string): void {
  const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
  store.tasks.upsertTasks(RUN, [
    ...ids('p', 30).map((id) => task(id)),
    { ...task('up-open'), review: true },
    { ...task('down-open'), upstreams: [{ name: '', taskId: 'up-open' }] },
    { ...task('up-ok'), review: true },
    { ...task('up-no'), review: true },
    ...ids('q', 30).map((id) => task(id)),
  ]);
  // Charged, then without a result: their net is what the account owes as not on disk.
  submit(store, RUN, 'q0', 'job-q0', 1.25);
  submit(store, RUN, 'q1', 'job-q1', 2.5);
  submit(store, RUN, 'q2', 'job-q2', 0.333333);
  submit(store, RUN, 'q3', 'job-q3', 4);
  setStates(file, {
    unfetched: ['q0', 'q1'],
    stalled: ['q2'],
    lost: ['q3'],
    // More in doubt than the limit, and unfinished ones in several states, interleaved by seq.
    in_doubt: ids('q', 30).slice(4, 29),
    submitted: ['p3', 'p9'],
    running: ['p5'],
    downloading: ['p20'],
    done: ['up-open', 'up-ok', 'up-no', 'p1', 'p2'],
    failed: ['p4'],
  });
  const raw = rawDatabase(file);
  raw.exec(`UPDATE tasks SET verdict = 'approved' WHERE run_id = '${RUN}' AND task_id = 'up-ok';
    UPDATE tasks SET verdict = 'rejected' WHERE run_id = '${RUN}' AND task_id = 'up-no';
    INSERT INTO decisions (run_id, task_id, attempt, verdict, note, decided_by, decided_at, version)
      VALUES ('${RUN}', 'up-no', 1, 'reroll', NULL, 'test', '2025-04-01T00:00:00.000Z', 1);`);
  raw.close();
}

/** The account's ids and states as the rows say them, read plainly (every row, ordered here). */
function plainly(file: string) {
  const raw = rawDatabase(file, { readonly: true });
  const rows = raw
    .prepare('SELECT task_id, state, seq FROM tasks WHERE run_id = ? ORDER BY seq')
    .all(RUN) as { task_id: string; state: string; seq: number }[];
  raw.close();
  const first = (states: string[]) =>
    rows
      .filter((r) => states.includes(r.state))
      .slice(0, ACCOUNT_ID_LIMIT)
      .map((r) => r.task_id);
  return {
    inDoubt: first(['in_doubt']),
    unfinished: first([
      'pending',
      'submitting',
      'submitted',
      'running',
      'stalled',
      'downloading',
      'unfetched',
    ]),
  };
}

describe("a run's account read in one statement", () => {
  it('states what the rows say: counts, reviews, money not on disk, and the first ids of each next step', () => {
    const store = ctx.store();
    runInEveryState(store, ctx.file());
    const facts = store.accountFacts(RUN);

    expect(facts.counts).toMatchObject({
      pending: 24,
      awaiting_review: 1,
      in_doubt: 25,
      submitted: 2,
      running: 1,
      downloading: 1,
      done: 5,
      failed: 1,
      unfetched: 2,
      stalled: 1,
      lost: 1,
    });
    expect(facts.review).toEqual({
      reviewed: 3,
      awaiting: 1,
      approved: 1,
      rejected: 1,
      waiting: 1,
      rerollsAsked: 1,
    });
    expect(facts.notOnDisk).toEqual({
      unfetched: { tasks: 2, tokens: 3.75 },
      stalled: { tasks: 1, tokens: 0.333333 },
      lost: { tasks: 1, tokens: 4 },
    });
    const expected = plainly(ctx.file());
    expect(facts.ids).toEqual({ ...expected, awaiting: ['up-open'] });
    expect(facts.ids.inDoubt).toHaveLength(ACCOUNT_ID_LIMIT);
    // Merged across states by seq: the pending ones first, then p3 (submitted), p5 (running), …
    expect(facts.ids.unfinished.slice(0, 6)).toEqual(['p0', 'p3', 'p5', 'p6', 'p7', 'p8']);
    // The sums kept by triggers, as every row says them.
    expect({ estimates: facts.estimates, money: facts.money }).toEqual(store.accountSumsByScan(RUN));
  });

  it('of a run with nothing in it: zeros and empty lists', () => {
    const store = ctx.store();
    const facts = store.accountFacts(RUN);
    expect(Object.values(facts.counts).every((n) => n === 0)).toBe(true);
    expect(facts.review).toEqual({
      reviewed: 0,
      awaiting: 0,
      approved: 0,
      rejected: 0,
      waiting: 0,
      rerollsAsked: 0,
    });
    expect(facts.ids).toEqual({ inDoubt: [], awaiting: [], unfinished: [] });
    expect(facts.notOnDisk.unfetched).toEqual({ tasks: 0, tokens: 0 });
  });

  it('costs one round trip to a PostgreSQL server, and none of its own on SQLite', () => {
    const store = ctx.store();
    runInEveryState(store, ctx.file());
    store.accountFacts(RUN);
    const before = waits.n;
    store.accountFacts(RUN);
    expect(waits.n - before).toBe(onPostgres() ? 1 : 0);
  });
});

describe("a run's counts by state (the progress line's, status')", () => {
  it('are read in one statement, awaiting_review included: one round trip to a PostgreSQL server', () => {
    const store = ctx.store();
    runInEveryState(store, ctx.file());
    const counts = store.tasks.countTasksByState(RUN);
    expect(counts).toEqual(store.accountFacts(RUN).counts);
    expect(counts.awaiting_review).toBe(1);
    const before = waits.n;
    store.tasks.countTasksByState(RUN);
    expect(waits.n - before).toBe(onPostgres() ? 1 : 0);
  });
});
