// Workers of a new run whose plan is still being stored (PostgreSQL): the run's first worker records its
// whole plan's digest before its first task, so a worker joining compares its own at once and claims while
// the rest is stored; a worker killed while it stores leaves the rest to the workers that remain. A worker
// interrupted while it opens the run gives the opening lease back, so the next one starts at once. Real
// `mediabatch run` processes, one sandbox, a real PostgreSQL. The plan is stored for real, four rows per
// transaction (MEDIABATCH_STORE_FIRST also sets the chunk), which takes seconds; the first worker is then
// paused (SIGSTOP) half-way through storing, so that it stays half-way whatever the machine's speed, as a
// worker slowed down would, until it is let go on (SIGCONT) or killed.

import { resolve } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { planRun } from '../../src/plan/build.js';
import { type OpenRunOptions, openRunSession } from '../../src/run/session.js';
import { keyFingerprint, openStore, type Store } from '../../src/store/index.js';
import type { Child } from '../helpers/child.js';
import { spawnWorker } from '../helpers/fleet.js';
import { type Postgres, startPostgres, until } from '../helpers/postgres.js';
import { images, makeRunEnv, type RunEnv, SANDBOX_KEY } from '../helpers/run-env.js';

// Worker processes start in seconds each on a loaded 2-core machine.
vi.setConfig({ testTimeout: 180_000 });

const pg: Postgres = await startPostgres();
afterAll(() => pg.stop());

let env: RunEnv;
let url: string;
let store: Store | undefined;
const children: Child[] = [];
beforeEach(() => {
  url = pg.freshDatabase();
});
afterEach(async () => {
  for (const child of children.splice(0)) if (child.proc.exitCode === null) child.proc.kill('SIGKILL');
  store?.close();
  store = undefined;
  await env?.close();
});

function worker(file: string, extra: Record<string, string> = {}): Child {
  const child = spawnWorker(env, url, file, extra);
  children.push(child);
  return child;
}

const TASKS = 240;
/** Four rows first, then four per transaction: storing 240 tasks takes a second or so. */
const SLOW_STORING = { MEDIABATCH_STORE_FIRST: '4' };

/** The run's tasks stored so far (a plan is stored in its order, so these are its first ones). */
function stored(s: Store, runId: string): number {
  return Object.values(s.tasks.countTasksByState(runId)).reduce((n, c) => n + c, 0);
}

/** Each prompt's POSTs at the sandbox: every task's prompt is its own. */
function postsPerPrompt(): Map<string, number> {
  const per = new Map<string, number>();
  for (const job of env.state().jobs) {
    const prompt = String((job.request as { prompt?: unknown }).prompt);
    per.set(prompt, (per.get(prompt) ?? 0) + 1);
  }
  return per;
}

/** The sandbox's books for the run: what it charged less what it refunded. */
function sandboxNet(): number {
  return env.state().jobs.reduce((n, j) => n + j.cost - j.refunded, 0);
}

/** The first worker of a new run of TASKS images, paused half-way through storing once it works. */
async function firstWorker(name: string) {
  env = await makeRunEnv({ balance: 10_000, speed: 0, latencyMs: 5 });
  const file = await env.manifest({ name, concurrency: 8, budget: 5_000, tasks: images(TASKS) });
  const first = worker(file, SLOW_STORING);
  const s = openStore(url);
  store = s;
  // Working (its worker row, its opening lease given back), with stored tasks it has not claimed for a joiner.
  await until(
    () =>
      s.workers.list(name).length > 0 &&
      s.leases.getLease(`run:${name}`) === undefined &&
      s.tasks.countTasksByState(name).pending >= 40,
    'the first worker to start working',
  );
  first.proc.kill('SIGSTOP');
  // A chunk whose COMMIT was on its way as the worker stopped still lands: what is stored then settles.
  let storedThen = stored(s, name);
  for (let again = -1; again !== storedThen; ) {
    await new Promise((r) => setTimeout(r, 300));
    [again, storedThen] = [storedThen, stored(s, name)];
  }
  expect(storedThen, 'the first worker was paused before it stored the whole plan').toBeLessThan(TASKS);
  expect(s.runs.getRun(name)).toMatchObject({ planTasks: TASKS, planStoring: true });
  return { file, first, s, storedThen };
}

/** The run of `file` opened in this process, on the test's state and sandbox. */
async function openHere(s: Store, file: string, extra: Partial<OpenRunOptions>) {
  return openRunSession({
    store: s,
    plan: await planRun(file, { cwd: env.dir, now: new Date() }),
    manifestPath: resolve(env.dir, file),
    stateFile: url,
    api: { baseUrl: env.sandbox.baseUrl, keyFingerprint: keyFingerprint(SANDBOX_KEY) },
    settingsToKeep: {},
    ...extra,
  });
}

/**
 * Every task of the plan stored, and done or in doubt (a worker stopped or killed while sending leaves its
 * task in doubt, never sent again): the last worker's exit says which (2 with tasks in doubt, else 0), no
 * prompt was POSTed twice, and the ledger plus the sandbox's charges for the tasks in doubt are its books.
 */
function expectEachOnce(s: Store, runId: string, code: number | string, stderr: string): void {
  expect(stored(s, runId)).toBe(TASKS);
  const counts = s.tasks.countTasksByState(runId);
  expect(code, stderr).toBe(counts.in_doubt > 0 ? 2 : 0);
  expect(counts.done + counts.in_doubt).toBe(TASKS);
  expect([...postsPerPrompt().values()].every((n) => n === 1)).toBe(true);
  expect(env.state().requests.submit).toBe(postsPerPrompt().size);
  expect(env.state().requests.submit).toBeGreaterThanOrEqual(TASKS - counts.in_doubt);
  const doubtful = new Set(
    s.tasks.tasksByState(runId, ['in_doubt']).map((t) => `img number ${t.taskId.slice('img-'.length)}`),
  );
  const inDoubtNet = env
    .state()
    .jobs.filter((j) => doubtful.has(String((j.request as { prompt?: unknown }).prompt)))
    .reduce((n, j) => n + j.cost - j.refunded, 0);
  expect(s.ledger.runSpent(runId).net + inDoubtNet).toBeCloseTo(sandboxNet(), 9);
  expect(s.runs.getRun(runId)?.planStoring).toBe(false);
}

describe('a worker joining a new run whose plan is still being stored', () => {
  it('claims and submits before the last task is stored; every task is sent once, the money is the sandbox’s', async () => {
    const { file, first, s, storedThen } = await firstWorker('joinstart');
    const second = worker(file);
    // The joiner's first POSTs, while the first worker has not stored the plan's last task.
    await until(
      () => s.workers.list('joinstart').some((w) => w.pid === second.proc.pid && w.submitted > 0),
      'the joiner to submit',
    );
    // Nobody stored a task meanwhile: the paused worker holds the storing lease, and is alive.
    expect(stored(s, 'joinstart')).toBe(storedThen);
    expect(s.runs.getRun('joinstart')?.planStoring).toBe(true);
    expect(second.stdout()).toMatch(/^Joined run joinstart as a worker/m);
    first.proc.kill('SIGCONT');

    const [firstCode, secondCode] = await Promise.all([first.exited, second.exited]);
    // Paused inside a transaction for longer than the server's idle_in_transaction_session_timeout (10 s,
    // a loaded machine), the first worker's session was ended by the server: it says so and stops (exit 4),
    // and the joiner stores and runs the rest.
    if (firstCode !== 0) expect(first.stderr()).toMatch(/went away/);
    expect([0, 4]).toContain(firstCode);
    expectEachOnce(s, 'joinstart', secondCode, second.stderr());
    if (firstCode === 0 && secondCode === 0) {
      expect(s.tasks.countTasksByState('joinstart').done).toBe(TASKS);
      expect(s.runs.getRun('joinstart')?.state).toBe('finished');
      const workers = s.workers.list('joinstart');
      expect(workers.reduce((n, w) => n + w.submitted, 0)).toBe(TASKS);
    }
  });

  it('takes storing over when the worker storing the plan is killed (kill -9): every task stored and run, none twice', async () => {
    const { file, first, s } = await firstWorker('killstore');
    const second = worker(file);
    await until(
      () => s.workers.list('killstore').some((w) => w.pid === second.proc.pid && w.submitted > 0),
      'the joiner to submit',
    );
    first.proc.kill('SIGKILL');
    expect(await first.exited).toBe('SIGKILL');

    expectEachOnce(s, 'killstore', await second.exited, second.stderr());
    expect(s.runs.getRun('killstore')).toMatchObject({ planStoring: false });
  });
});

describe('the only worker of a run whose plan is still being stored', () => {
  it('stopped (SIGINT): exit 4, the run interrupted with its plan marked unfinished; the next worker stores the rest and runs it, none twice', async () => {
    const { file, first, s } = await firstWorker('alone');
    first.proc.kill('SIGCONT');
    first.proc.kill('SIGINT');
    expect(await first.exited, first.stderr()).toBe(4);
    const atStop = stored(s, 'alone');
    expect(atStop, 'stopped before the plan was stored').toBeLessThan(TASKS);
    // The last one out: the tasks not stored keep the run unfinished, not finished.
    expect(s.runs.getRun('alone')).toMatchObject({ state: 'interrupted', planStoring: true });

    const next = worker(file);
    expect(await next.exited, next.stderr()).toBe(0);
    expect(stored(s, 'alone')).toBe(TASKS);
    expect(s.tasks.countTasksByState('alone').done).toBe(TASKS);
    expect(env.state().requests.submit).toBe(TASKS);
    expect([...postsPerPrompt().values()].every((n) => n === 1)).toBe(true);
    expect(s.runs.getRun('alone')).toMatchObject({ state: 'finished', planStoring: false });
  });
});

describe('a run whose every worker stopped before its plan was stored, opened again (in one process)', () => {
  it('with the same plan stores the rest while it works, the preflight counting it; with another, stores it at once', async () => {
    env = await makeRunEnv({ balance: 1000 });
    const file = await env.manifest({ name: 'again', tasks: images(40) });
    const s = openStore(url);
    store = s;
    const open = () => openHere(s, file, { storeFirst: 4 });
    const first = await open();
    first.startWorking();
    // Stopped before it stored a chunk after its first rows: the run's only worker leaves.
    first.storing?.stop();
    await first.storing?.finished;
    first.close();
    expect(stored(s, 'again')).toBe(4);
    expect(s.runs.getRun('again')).toMatchObject({ planTasks: 40, planStoring: true });

    const next = await open();
    expect(next.fleet?.joined).toBe(false);
    // Nothing stored in the opening: the rest goes in while it works, and the preflight counts it.
    expect(stored(s, 'again')).toBe(4);
    expect(next.storing?.ended).toBe(false);
    expect(next.storing?.unstored).toBe(36);
    expect(next.plannedPending).toMatchObject([{ model: 'flat-image', tasks: 40 }]);
    next.startWorking();
    await next.storing?.finished;
    expect(stored(s, 'again')).toBe(40);
    expect(s.runs.getRun('again')?.planStoring).toBe(false);
    next.close();

    // Left half-stored again, then opened with an edited plan: compared task by task and stored at once.
    s.runs.setPlan('again', { tasks: 40, digest: s.runs.getRun('again')?.planDigest ?? null, storing: true });
    const edited40 = images(40).map((t) => ({ ...t, input: { prompt: `${t.id}, in red` } }));
    await env.manifest({ name: 'again', tasks: edited40 }, file);
    const edited = await open();
    expect(edited.storing).toBeUndefined();
    expect(edited.upsert.updated).toHaveLength(40);
    expect(s.runs.getRun('again')?.planStoring).toBe(false);
    edited.close();
  });
});

describe('a worker interrupted while it opens a run', () => {
  it('SIGINT during its preflight: exit 4 and one line, the opening lease given back; the next worker opens the run and runs it', async () => {
    // The preflight's balance request is answered after a minute: the worker is in its opening meanwhile.
    env = await makeRunEnv({ balance: 1000, speed: 0, latencyMs: 60_000 });
    const file = await env.manifest({ name: 'opening', tasks: images(6) });
    const first = worker(file);
    const s = openStore(url);
    store = s;
    await until(
      () =>
        s.leases.getLease('run:opening') !== undefined &&
        s.runs.getRun('opening') !== undefined &&
        stored(s, 'opening') === 6,
      'the first worker to open the run',
    );
    first.proc.kill('SIGINT');
    expect(await first.exited).toBe(4);
    expect(first.stderr().trim().split('\n').at(-1)).toBe(
      'mediabatch: interrupted (SIGINT): nothing was submitted; run the same command again',
    );
    // Given back, not left to run out (a worker on another machine would wait for it for up to its minute).
    expect(s.leases.getLease('run:opening')).toBeUndefined();
    expect(s.workers.list('opening')).toEqual([]);

    env.sandbox.configure({ latencyMs: 5 });
    const next = worker(file);
    expect(await next.exited, next.stderr()).toBe(0);
    expect(next.stdout()).not.toContain('Joined run');
    expect(env.state().requests.submit).toBe(6);
    expect(s.runs.getRun('opening')?.state).toBe('finished');
  });

  it('gives the lease back as its signal aborts, so another opening (a live holder, here the same process) does not wait it out', async () => {
    env = await makeRunEnv({ balance: 1000 });
    const file = await env.manifest({ name: 'aborted', tasks: images(4) });
    const s = openStore(url);
    store = s;
    const open = (o: { signal?: AbortSignal; waitMs: number }) =>
      openHere(s, file, { openingWaitMs: o.waitMs, ...(o.signal ? { signal: o.signal } : {}) });
    const busy = /^run aborted is being driven by another mediabatch/;
    // Without a signal nothing is given back: another opening waits, then says the run is busy.
    const kept = await open({ waitMs: 30_000 });
    await expect(open({ waitMs: 300 })).rejects.toThrow(busy);
    kept.close();

    const first = new AbortController();
    const opened = await open({ signal: first.signal, waitMs: 30_000 });
    expect(s.leases.getLease('run:aborted')?.holder).toBe(opened.holder);
    first.abort();
    expect(s.leases.getLease('run:aborted')).toBeUndefined();
    const next = await open({ waitMs: 300 });
    expect(next.fleet?.joined).toBe(false);

    // An opening that waits for another's lease ends when its signal aborts, with its own line.
    const waiting = new AbortController();
    const waited = open({ signal: waiting.signal, waitMs: 30_000 });
    setTimeout(() => waiting.abort(), 200);
    await expect(waited).rejects.toThrow(
      'interrupted while opening run aborted: nothing was submitted; run the same command again',
    );
    expect(s.leases.getLease('run:aborted')?.holder).toBe(next.holder);
    next.close();
    opened.close();
  });
});
