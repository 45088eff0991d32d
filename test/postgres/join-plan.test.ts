// A worker joining a run on a PostgreSQL state with a manifest edited since the run's first worker
// stored it: refused in one line before it claims or sends anything (the sandbox's POSTs and the run's
// workers say so), while the run goes on with its own plan. A run made before runs kept their plan's
// digest is joined as before. Real `mediabatch run` processes, one sandbox, a real PostgreSQL.

import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { openStore, type Store } from '../../src/store/index.js';
import { PgDb } from '../../src/store/pg/db.js';
import { type Child, spawnCli } from '../helpers/child.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';
import { FAST_POLLS, images, makeRunEnv, type RunEnv, SANDBOX_KEY } from '../helpers/run-env.js';

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
  const child = spawnCli(['--state', url, 'run', file, '--yes', '--allow-local-output'], {
    cwd: env.dir,
    env: {
      MEDIABATCH_API_KEY: SANDBOX_KEY,
      MEDIABATCH_BASE_URL: env.sandbox.baseUrl,
      MEDIABATCH_POLL_SCALE: FAST_POLLS,
      ...extra,
    },
  });
  children.push(child);
  return child;
}

function withStore<T>(read: (store: Store) => T): T {
  const store = openStore(url);
  try {
    return read(store);
  } finally {
    store.close();
  }
}

async function until(check: () => boolean, what: string, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

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
  o: { storeFirst?: string; budget?: number } = {},
): Promise<{ file: string; first: Child }> {
  const { storeFirst, budget } = o;
  env = await makeRunEnv({ balance: 1000, speed: 0.15, latencyMs: 40 });
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
  it('is refused in one line before it claims or sends anything; the run goes on with its own plan', async () => {
    const { file, first } = await firstWorker('edited', { storeFirst: '4' });
    // The first worker stores its tasks while it works (4 first): the digest is the run's once all are in.
    await until(
      () => withStore((store) => store.runs.getRun('edited')?.planDigest !== null),
      'the run to keep its plan digest',
    );
    await env.manifest({ name: 'edited', concurrency: 2, tasks: tasks(true) }, file);
    const submitsBefore = env.state().requests.submit;
    const second = worker(file);
    const code = await second.exited;
    expect(first.proc.exitCode, 'the first worker was still working').toBeNull();
    expect(code, second.stderr()).toBe(1);
    expect(second.stderr()).toBe(
      `mediabatch: ${file} is not the plan run edited is running (its tasks, requests or prices were edited since the run's first worker stored them): give every worker of the run the same manifest, or stop the run's workers and run again to run the edited one\n`,
    );
    expect(second.stdout()).not.toContain('Joined run');
    // It never became a worker of the run, so it held no task.
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
    raw.prepare(`UPDATE runs SET plan_digest = NULL WHERE id = 'old'`).run();
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

  it('with another budget is refused too: the run keeps the budget its first worker checked', async () => {
    const { file, first } = await firstWorker('budget', { budget: 100 });
    await env.manifest({ name: 'budget', concurrency: 2, budget: 5, tasks: tasks(false) }, file);
    const second = worker(file);
    expect(await second.exited, second.stderr()).toBe(1);
    expect(first.proc.exitCode, 'the first worker was still working').toBeNull();
    expect(second.stderr()).toBe(
      "mediabatch: run budget runs under a budget of 100 tokens, and this worker has a budget of 5 tokens (its manifest's budget, or --budget): give every worker of the run the same budget, or stop the run's workers and run again with the new one\n",
    );
    // Without the refusal it would have set the run's budget to its own, for every worker.
    const raw = new PgDb(url);
    const budget = raw.prepare(`SELECT budget FROM run_money WHERE run_id = 'budget'`).pluck().get();
    raw.close();
    expect(budget).toBe(100_000_000);
    expect(await first.exited, first.stderr()).toBe(0);
    expect(env.state().requests.submit).toBe(TASKS);
    withStore((store) => expect(store.workers.list('budget')).toHaveLength(1));
  });
});
