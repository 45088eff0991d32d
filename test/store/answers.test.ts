// Answers the store must survive: the same img_uuid for two tasks (in one process, and in two workers
// at once), a cost the API did not state, a lost answer proved accepted by a callback, and a failed job
// submitted again.
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { type Child, REPO } from '../helpers/child.js';
import { onPostgres, rawDatabase, stateFor, submit, task, useStoreWithRun } from './helpers.js';

const ctx = useStoreWithRun();

describe('answers to a submission', () => {
  it('a second task answered with an img_uuid another task has is in doubt, not a crash; nothing is booked twice', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a'), task('b')]);
    submit(store, 'r1', 'a', 'uuid-1', 3);
    const attempt = store.submissions.recordSubmitIntent('r1', 'b');
    const recorded = store.submissions.recordSubmitted('r1', 'b', attempt, {
      imgUuid: 'uuid-1',
      cost: 3,
      keyFingerprint: 'fp',
    });
    expect(recorded).toEqual({
      state: 'in_doubt',
      message:
        'the API answered with job uuid-1, which task a of run r1 already has: this submission may or may not have been charged',
    });
    expect(store.tasks.getTask('r1', 'b')).toMatchObject({ state: 'in_doubt', imgUuid: null });
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({ state: 'submitted', imgUuid: 'uuid-1' });
    expect(store.ledger.runSpent('r1')).toEqual({ charged: 3, refunded: 0, net: 3 });
  });

  it('a cost the API did not state is booked at the list price and marked as assumed', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a', {}, 2.5)]);
    const attempt = store.submissions.recordSubmitIntent('r1', 'a');
    store.submissions.recordSubmitted('r1', 'a', attempt, {
      imgUuid: 'uuid-a',
      cost: undefined,
      listPrice: 2.5,
      keyFingerprint: 'fp',
    });
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({
      state: 'submitted',
      cost: 2.5,
      costAssumed: true,
    });
    expect(store.ledger.runSpent('r1')).toEqual({ charged: 2.5, refunded: 0, net: 2.5 });
  });

  it('a task in doubt adopts the job a callback proved, once; its attempt says it was recovered', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a', {}, 2)]);
    const attempt = store.submissions.recordSubmitIntent('r1', 'a');
    store.submissions.recordInDoubt('r1', 'a', attempt, { message: 'connection reset after sending' });
    const answer = { imgUuid: 'uuid-a', cost: undefined, listPrice: 2, keyFingerprint: 'fp' };
    expect(store.submissions.adoptInDoubt('r1', 'a', answer)).toBe(true);
    expect(store.submissions.adoptInDoubt('r1', 'a', answer)).toBe(false);
    expect(store.tasks.getTask('r1', 'a')).toMatchObject({
      state: 'submitted',
      imgUuid: 'uuid-a',
      recovered: true,
      costAssumed: true,
    });
    expect(store.submissions.attemptsOf('r1', 'a')).toMatchObject([
      {
        attemptNo: 1,
        outcome: 'submitted',
        imgUuid: 'uuid-a',
        message: expect.stringMatching(/^recovered from doubt/),
      },
    ]);
    expect(store.ledger.runSpent('r1').charged).toBe(2);
  });

  it('a failed job goes back to pending as a new attempt; each job keeps its charge and refund', () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a', {}, 2)]);
    submit(store, 'r1', 'a', 'uuid-1', 2);
    store.jobs.recordJobStatus('uuid-1', 'failed', { status: 'failed' }, 'poll');
    expect(store.submissions.chargedAttempts('r1', 'a')).toBe(1);
    expect(store.tasks.requeueTasks('r1', ['a'], ['failed'])).toEqual(['a']);
    submit(store, 'r1', 'a', 'uuid-2', 2);
    expect(store.submissions.chargedAttempts('r1', 'a')).toBe(2);
    expect(store.submissions.attemptsOf('r1', 'a').map((a) => [a.attemptNo, a.imgUuid])).toEqual([
      [1, 'uuid-1'],
      [2, 'uuid-2'],
    ]);
    expect(store.ledger.runSpent('r1')).toEqual({ charged: 4, refunded: 2, net: 2 });
  });

  it('two workers answered with one job at the same moment: one task keeps it, the other is in doubt, one charge', async () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a'), task('b')]);
    const a = store.submissions.recordSubmitIntent('r1', 'a');
    const b = store.submissions.recordSubmitIntent('r1', 'b');
    const answers = await race(ctx.file(), [
      ['a', 'answer', a],
      ['b', 'answer', b],
    ]);
    const winner = answers.findIndex((answer) => (answer as { state: string }).state === 'submitted');
    const [kept, doubted] = winner === 0 ? (['a', 'b'] as const) : (['b', 'a'] as const);
    const message = `the API answered with job uuid-1, which task ${kept} of run r1 already has: this submission may or may not have been charged`;
    expect(answers[1 - winner]).toEqual({ state: 'in_doubt', message });
    expect(store.tasks.getTask('r1', kept)).toMatchObject({ state: 'submitted', imgUuid: 'uuid-1', cost: 3 });
    expect(store.tasks.getTask('r1', doubted)).toMatchObject({
      state: 'in_doubt',
      imgUuid: null,
      error: message,
    });
    expect(store.submissions.attemptsOf('r1', doubted)).toMatchObject([
      { outcome: 'in_doubt', imgUuid: null, message },
    ]);
    expect(store.ledger.runSpent('r1')).toEqual({ charged: 3, refunded: 0, net: 3 });
    expect(store.reservations.figures('r1')).toMatchObject({ charged: 3_000_000, doubt: 3_000_000, held: 0 });
  });

  it('a callback adopting a job another worker records at the same moment: one task has it, one charge', async () => {
    const store = ctx.store();
    store.tasks.upsertTasks('r1', [task('a'), task('b')]);
    const a = store.submissions.recordSubmitIntent('r1', 'a');
    const b = store.submissions.recordSubmitIntent('r1', 'b');
    store.submissions.recordInDoubt('r1', 'b', b, { message: 'connection reset after sending' });
    const [answered, adopted] = await race(ctx.file(), [
      ['a', 'answer', a],
      ['b', 'adopt', b],
    ]);
    // Whichever wrote first has the job; the other ends in doubt, its charge unknown, not booked.
    const [kept, doubted] = adopted === true ? (['b', 'a'] as const) : (['a', 'b'] as const);
    expect(answered).toEqual(
      adopted === true
        ? { state: 'in_doubt', message: expect.stringContaining('which task b of run r1') }
        : { state: 'submitted' },
    );
    expect(store.tasks.getTask('r1', kept)).toMatchObject({ state: 'submitted', imgUuid: 'uuid-1' });
    expect(store.tasks.getTask('r1', doubted)).toMatchObject({ state: 'in_doubt', imgUuid: null });
    expect(store.ledger.runSpent('r1')).toEqual({ charged: 3, refunded: 0, net: 3 });
  });
});

/**
 * Starts one answer-child.ts per entry (task, what it records, its attempt) for the job `uuid-1`, and lets
 * them record at the same moment: both wait behind a third writer first. On PostgreSQL, the first to
 * write the job holds its index entry uncommitted while it waits for the ledger, and the second reads no
 * owner and then waits for the first on that index; a SQLite file takes one writer at a time. Returns
 * what each printed.
 */
async function race(file: string, entries: [string, 'answer' | 'adopt', number][]): Promise<unknown[]> {
  const state = stateFor(file);
  const children = entries.map(([taskId, how, attemptNo]) => answerChild(state, taskId, how, attemptNo));
  try {
    const opened = await Promise.all(children.map((child) => child.waitFor('open\n')));
    expect(opened, children.map((c) => c.stderr()).join('')).toEqual(children.map(() => true));
    const holder = rawDatabase(file);
    try {
      holder.exec(onPostgres() ? 'BEGIN; LOCK TABLE ledger IN SHARE MODE' : 'BEGIN IMMEDIATE');
      for (const [i, child] of children.entries()) {
        child.proc.stdin?.write('go\n');
        await waitingOn(file, i + 1);
      }
      holder.exec('COMMIT');
    } finally {
      holder.close();
    }
    const codes = await Promise.all(children.map((child) => child.exited));
    expect(codes, children.map((c) => c.stderr()).join('')).toEqual(children.map(() => 0));
  } finally {
    for (const child of children) if (child.proc.exitCode === null) child.proc.kill();
  }
  return children.map((child) => JSON.parse(child.stdout().split('\n')[1] ?? '') as unknown);
}

const ANSWER_CHILD = fileURLToPath(new URL('./answer-child.ts', import.meta.url));
const TSX = pathToFileURL(`${REPO}node_modules/tsx/dist/loader.mjs`).href;

/** A worker that records the job `uuid-1` for its task when told to (answer-child.ts). */
function answerChild(state: string, taskId: string, how: string, attemptNo: number): Child {
  const proc = spawn(
    process.execPath,
    ['--import', TSX, ANSWER_CHILD, state, 'r1', taskId, how, String(attemptNo), 'uuid-1'],
    { cwd: REPO, stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  proc.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString('utf8');
  });
  proc.stderr.on('data', (chunk: Buffer) => {
    err += chunk.toString('utf8');
  });
  const exited = new Promise<number | string>((resolve) => {
    proc.on('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'));
  });
  const waitFor = async (text: string): Promise<boolean> => {
    while (!out.includes(text)) {
      if (proc.exitCode !== null) return false;
      await sleep(20);
    }
    return true;
  };
  return { proc, stdout: () => out, stderr: () => err, exited, waitFor };
}

/**
 * Until `count` sessions of the database wait for a lock (PostgreSQL shows them); a SQLite writer waiting
 * for the file shows nowhere, so it is given a moment to get there.
 */
async function waitingOn(file: string, count: number): Promise<void> {
  if (!onPostgres()) {
    await sleep(300);
    return;
  }
  // Its own connection: a session in a transaction reads pg_stat_activity as it was when it began.
  const db = rawDatabase(file);
  const waiting = db.prepare(
    `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
     WHERE NOT l.granted AND s.datname = current_database()`,
  );
  try {
    for (let i = 0; i < 1500 && Number(waiting.pluck().get()) < count; i++) await sleep(20);
    expect(Number(waiting.pluck().get())).toBe(count);
  } finally {
    db.close();
  }
}
