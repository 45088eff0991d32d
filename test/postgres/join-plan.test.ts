// A worker joining a run on a PostgreSQL state with a manifest edited since the run's first worker
// stored it: refused in one line before it claims or sends anything (the sandbox's POSTs and the run's
// workers say so), while the run goes on with its own plan. A run made before runs kept their plan's
// digest is joined as before. Real `mediabatch run` processes, one sandbox, a real PostgreSQL.

import { resolve } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { planRun } from '../../src/plan/build.js';
import { openRunSession } from '../../src/run/session.js';
import { keyFingerprint, openStore, type Store } from '../../src/store/index.js';
import { PgDb } from '../../src/store/pg/db.js';
import type { Child } from '../helpers/child.js';
import { spawnWorker } from '../helpers/fleet.js';
import { type Postgres, startPostgres, until, withStoreAt } from '../helpers/postgres.js';
import { images, makeRunEnv, type RunEnv, SANDBOX_KEY } from '../helpers/run-env.js';

// Worker processes start in seconds each on a loaded 2-core machine.
vi.setConfig({ testTimeout: 180_000 });

const pg: Postgres = await startPostgres();
afterAll(() => pg.stop());

let env: RunEnv;
let url: string;
const children: Child[] = [];
beforeEach(() => {
  url = pg.freshDatabase();
});
afterEach(async () => {
  for (const child of children.splice(0)) if (child.proc.exitCode === null) child.proc.kill('SIGKILL');
  await env?.close();
});

function worker(file: string, extra: Record<string, string> = {}): Child {
  const child = spawnWorker(env, url, file, extra);
  children.push(child);
  return child;
}

const withStore = <T>(read: (store: Store) => T): T => withStoreAt(url, read);

const TASKS = 16;
const EDITED = 'img number 16, in red';

/** The run's tasks, and the same with the last one's prompt edited. */
function tasks(edited: boolean) {
  const list = images(TASKS);
  const last = list.at(-1);
  if (edited && last) last.input = { ...last.input, prompt: EDITED };
  return list;
}

/** Starts the first worker of `name` and waits until it works (its plan stored, its worker row). */
async function firstWorker(
  name: string,
  o: { storeFirst?: string; budget?: number; speed?: number } = {},
): Promise<{ file: string; first: Child }> {
  const { storeFirst, budget } = o;
  env = await makeRunEnv({ balance: 1000, speed: o.speed ?? 0.15, latencyMs: 40 });
  const file = await env.manifest({
    name,
    concurrency: 2,
    ...(budget ? { budget } : {}),
    tasks: tasks(false),
  });
  const first = worker(file, storeFirst ? { MEDIABATCH_STORE_FIRST: storeFirst } : {});
  await until(
    () => withStore((store) => store.workers.list(name).length > 0),
    'the first worker to start working',
  );
  return { file, first };
}

describe('a worker joining a run with an edited manifest', () => {
  it('is refused in one line before it claims or sends anything, as is one with another budget; the run goes on with its own plan', async () => {
    // The first worker stores its tasks while it works (4 first): a worker joining meanwhile waits for them.
    // Its jobs are slow enough that it still works while two workers start and are refused, one after the other.
    const { file, first } = await firstWorker('edited', { storeFirst: '4', budget: 100, speed: 0.25 });
    await env.manifest({ name: 'edited', concurrency: 2, budget: 100, tasks: tasks(true) }, file);
    const submitsBefore = env.state().requests.submit;
    const second = worker(file);
    const code = await second.exited;
    expect(first.proc.exitCode, 'the first worker was still working').toBeNull();
    expect(code, second.stderr()).toBe(1);
    expect(second.stderr()).toBe(
      `mediabatch: ${file} is not the plan run edited is running (its tasks, requests or prices were edited since the run's first worker stored them): give every worker of the run the same manifest, or stop the run's workers and run again to run the edited one\n`,
    );
    expect(second.stdout()).not.toContain('Joined run');

    // The same tasks under another budget: refused too. Joined, it would have set the run's budget to its
    // own for every worker (the first worker's preflight checked 100).
    await env.manifest({ name: 'edited', concurrency: 2, budget: 5, tasks: tasks(false) }, file);
    const third = worker(file);
    expect(await third.exited, third.stderr()).toBe(1);
    expect(first.proc.exitCode, 'the first worker was still working').toBeNull();
    expect(third.stderr()).toBe(
      "mediabatch: run edited runs under a budget of 100 tokens, and this worker has a budget of 5 tokens (its manifest's budget, or --budget): give every worker of the run the same budget, or stop the run's workers and run again with the new one\n",
    );
    const raw = new PgDb(url);
    const budget = raw.prepare(`SELECT budget FROM run_money WHERE run_id = 'edited'`).pluck().get();
    raw.close();
    expect(budget).toBe(100_000_000);
    // Neither became a worker of the run, so neither held a task.
    withStore((store) => expect(store.workers.list('edited')).toHaveLength(1));

    expect(await first.exited, first.stderr()).toBe(0);
    // Every POST is the first worker's plan: one per task, the edited prompt never sent.
    const jobs = env.state().jobs;
    expect(env.state().requests.submit).toBe(TASKS);
    expect(submitsBefore).toBeLessThan(TASKS);
    expect(jobs.map((j) => String((j.request as { prompt?: unknown }).prompt))).not.toContain(EDITED);
    withStore((store) => {
      expect(store.runs.getRun('edited')?.state).toBe('finished');
      expect(store.workers.list('edited').map((w) => w.submitted)).toEqual([TASKS]);
    });
  });

  it('with the same manifest joins, and a run from before the digest (none kept) is joined as before', async () => {
    const { file, first } = await firstWorker('old');
    const same = worker(file);
    expect(await same.waitFor('Joined run old as a worker'), same.stderr()).toBe(true);
    // As a run made before migration 29 is: no digest to compare with.
    const raw = new PgDb(url);
    raw.prepare(`UPDATE runs SET plan_digest = NULL, plan_tasks = NULL WHERE id = 'old'`).run();
    raw.close();
    await env.manifest({ name: 'old', concurrency: 2, tasks: tasks(true) }, file);
    const edited = worker(file);
    const codes = await Promise.all([first.exited, same.exited, edited.exited]);
    expect(codes, `${first.stderr()}${same.stderr()}${edited.stderr()}`).toEqual([0, 0, 0]);
    expect(edited.stdout()).toMatch(/^Joined run old as a worker/m);
    // Joined as today: it ran the stored plan, not its own edit.
    expect(env.state().requests.submit).toBe(TASKS);
    const prompts = env.state().jobs.map((j) => String((j.request as { prompt?: unknown }).prompt));
    expect(prompts).not.toContain(EDITED);
  });

  it('waits for the digest of a plan its first worker still stores, then compares (in one process)', async () => {
    env = await makeRunEnv({ balance: 1000 });
    const file = await env.manifest({ name: 'big', tasks: images(TASKS) });
    const store = openStore(url);
    const open = async (o: { storeFirst?: number; waitMs?: number } = {}) =>
      openRunSession({
        store,
        plan: await planRun(file, { cwd: env.dir, now: new Date() }),
        manifestPath: resolve(env.dir, file),
        stateFile: url,
        api: { baseUrl: env.sandbox.baseUrl, keyFingerprint: keyFingerprint(SANDBOX_KEY) },
        settingsToKeep: {},
        openingWaitMs: o.waitMs ?? 30_000,
        ...(o.storeFirst !== undefined ? { storeFirst: o.storeFirst } : {}),
      });
    const first = await open({ storeFirst: 2 });
    try {
      first.startWorking();
      // The plan's count and its whole digest are kept as the run opens, marked: the rest is still stored.
      expect(store.runs.getRun('big')).toMatchObject({ planTasks: TASKS, planStoring: true });
      const digest = store.runs.getRun('big')?.planDigest ?? '';
      expect(digest).toMatch(/^[0-9a-f]{64}$/);
      await first.storing?.finished;
      expect(store.runs.getRun('big')).toMatchObject({ planDigest: digest, planStoring: false });

      // As while the first worker of an older mediabatch still stores: the count only.
      const storing = () => store.runs.setPlan('big', { tasks: TASKS, digest: null });
      const stored = () => store.runs.setPlan('big', { tasks: TASKS, digest });
      storing();
      // Another count is another plan, said at once.
      await env.manifest({ name: 'big', tasks: images(TASKS + 1) }, file);
      await expect(open()).rejects.toThrow(`${file} is not the plan run big is running`);
      // The same count: the worker waits for the digest, then compares.
      await env.manifest({ name: 'big', tasks: tasks(true) }, file);
      let storedAt = 0;
      setTimeout(() => {
        stored();
        storedAt = Date.now();
      }, 700);
      await expect(open()).rejects.toThrow(`${file} is not the plan run big is running`);
      expect(storedAt).toBeGreaterThan(0);
      await env.manifest({ name: 'big', tasks: tasks(false) }, file);
      storing();
      setTimeout(stored, 700);
      const same = await open();
      expect(same.fleet?.joined).toBe(true);
      same.close();
      // A digest that never comes (its first worker stopped storing): the opening's wait, then a line.
      storing();
      await expect(open({ waitMs: 600 })).rejects.toThrow(
        "run big's plan of 16 tasks is not all stored yet (its first worker stores it while it works), and this worker compares its own plan with it before it joins: run it again in a while",
      );
    } finally {
      first.close();
      store.close();
    }
  });
});
