// A new run of many tasks starts submitting once its first rows are stored; the rest are stored
// while it runs. The order stays longest first over every task (stored or not), a stop leaves a run whose
// missing rows the next run stores, and nothing is charged twice. MEDIABATCH_STORE_FIRST (test-only)
// makes a small manifest behave like a large one.
import { resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createApiClient } from '../../src/api/client.js';
import { planRun } from '../../src/plan/build.js';
import { executeRun, preflightRun } from '../../src/run/lifecycle.js';
import { openRunSession } from '../../src/run/session.js';
import { scaledRunPolicy } from '../../src/run/settings.js';
import { keyFingerprint, openStore, planDigestOf } from '../../src/store/index.js';
import { createLogger } from '../../src/util/log.js';
import {
  images,
  makeRunEnv,
  type RunEnv,
  SANDBOX_KEY,
  type TaskDecl,
  taskStates,
} from '../helpers/run-env.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

// Forty images, then two clips: the clips are the longest jobs, and the last rows to be stored.
const TASKS: TaskDecl[] = [
  ...images(40),
  { id: 'clip-1', model: 'studio-2-6', input: { prompt: 'a mug turning', duration: 5, resolution: '720p' } },
  { id: 'clip-2', model: 'studio-2-6', input: { prompt: 'a cap turning', duration: 5, resolution: '720p' } },
];

function submittedOrder(e: RunEnv): string[] {
  const byUuid = new Map(
    e
      .query<{ task_id: string; img_uuid: string }>('SELECT task_id, img_uuid FROM tasks')
      .map((r) => [r.img_uuid, r.task_id]),
  );
  return e.state().jobs.map((j) => byUuid.get(j.img_uuid) ?? j.img_uuid);
}

/** The library's steps as the CLI takes them, with `storeFirst` set. */
async function openSession(e: RunEnv, file: string, storeFirst: number) {
  const now = new Date();
  const plan = await planRun(file, { cwd: e.dir, now });
  const store = openStore(e.db);
  const client = createApiClient({ baseUrl: e.sandbox.baseUrl, apiKey: SANDBOX_KEY });
  const fingerprint = keyFingerprint(SANDBOX_KEY);
  const session = await openRunSession({
    store,
    plan,
    manifestPath: resolve(e.dir, file),
    stateFile: e.db,
    api: { baseUrl: client.baseUrl, keyFingerprint: fingerprint },
    settingsToKeep: plan.settings,
    storeFirst,
  });
  return { plan, store, client, fingerprint, session, now };
}

describe('a new run whose tasks are stored while it runs', () => {
  it('opens with its first rows stored, previews every task, and stores the rest in manifest order', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: TASKS });
    const { store, client, fingerprint, session, now } = await openSession(env, file, 4);
    try {
      expect(store.tasks.countTasksByState('batch').pending).toBe(4);
      expect(session.storing?.ended).toBe(false);
      // The run keeps its plan's count at once, its digest once every task is stored (a joining worker's).
      expect(store.runs.getRun('batch')).toMatchObject({ planTasks: 42, planDigest: null });
      const preflight = await preflightRun(session, {
        client,
        keyFingerprint: fingerprint,
        configQuota: undefined,
        budget: undefined,
        allowPartial: false,
        now,
      });
      // The plan's figures, not the four stored rows': 40 images at 0.2, two 5 s 720p clips at 2.1/s.
      expect(preflight.pendingCount).toBe(42);
      expect(preflight.counts.pending).toBe(42);
      expect(preflight.pending.map((m) => [m.model, m.tasks, m.max])).toEqual([
        ['flat-image', 40, 8],
        ['studio-2-6', 2, 21],
      ]);
      await session.storing?.finished;
      const again = await planRun(file, { cwd: env.dir, now });
      expect(store.runs.getRun('batch')?.planDigest).toBe(
        planDigestOf(again.rows({ withoutCallback: true })),
      );
      const rows = env.query<{ task_id: string; seq: number }>('SELECT task_id, seq FROM tasks ORDER BY seq');
      expect(rows.map((r) => r.task_id)).toEqual(TASKS.map((t) => t.id));
      expect(rows.map((r) => r.seq)).toEqual(TASKS.map((_, i) => i));
      expect(store.tasks.countTasksByState('batch').pending).toBe(42);
    } finally {
      session.close();
      store.close();
      await client.close();
    }
  });

  it('submits the longest jobs first even when they are stored last, and ends with every task done once', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: TASKS, concurrency: 1 });
    const result = await env.run(['run', file, '--yes'], { env: { MEDIABATCH_STORE_FIRST: '4' } });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('To submit: 42 task(s)');
    const order = submittedOrder(env);
    expect(order.slice(0, 2)).toEqual(['clip-1', 'clip-2']);
    expect(order.slice(2)).toEqual(TASKS.slice(0, 40).map((t) => t.id));
    const jobs = env.state().jobs;
    expect(jobs).toHaveLength(42);
    expect(Object.values(taskStates(env)).every((s) => s === 'done')).toBe(true);
    // Charged once each: 40 x 0.2 + 2 x 10.5.
    expect(jobs.reduce((n, j) => n + j.cost, 0)).toBeCloseTo(29, 6);
  });

  it('keeps the manifest order with `order: manifest` while rows are still being stored', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: TASKS, concurrency: 1, order: 'manifest' });
    const result = await env.run(['run', file, '--yes'], { env: { MEDIABATCH_STORE_FIRST: '3' } });
    expect(result.code, result.stderr).toBe(0);
    expect(submittedOrder(env)).toEqual(TASKS.map((t) => t.id));
  });

  it('stopped before the rest is stored: exit 4 with the unstored tasks pending; the next run stores and submits them, none twice', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(30), concurrency: 2 });
    const { store, client, fingerprint, session } = await openSession(env, file, 10);
    let exitCode: number;
    let pending: number;
    try {
      // A stop before the first chunk: ten rows stored, twenty never.
      session.storing?.stop();
      const outcome = await executeRun(session, {
        client,
        keyFingerprint: fingerprint,
        logger: createLogger({ level: 'silent' }),
        policy: scaledRunPolicy(0.01),
        concurrency: 2,
        taskIds: [],
        stop: new AbortController().signal,
      });
      exitCode = outcome.exitCode;
      pending = outcome.result.counts.pending;
      expect(outcome.state).toBe('interrupted');
    } finally {
      session.close();
      store.close();
      await client.close();
    }
    expect(exitCode).toBe(4);
    expect(pending).toBe(20);
    expect(env.query('SELECT task_id FROM tasks')).toHaveLength(10);
    expect(env.state().jobs).toHaveLength(10);

    const again = await env.run(['run', file, '--yes']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain('To submit: 20 task(s)');
    const states = taskStates(env);
    expect(Object.keys(states)).toEqual(images(30).map((t) => t.id));
    expect(Object.values(states).every((s) => s === 'done')).toBe(true);
    const prompts = env.state().jobs.map((j) => JSON.stringify(j.request));
    expect(prompts).toHaveLength(30);
    expect(new Set(prompts).size).toBe(30);
  });

  it('stores every task first for --limit and --only, which need them all to choose', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: TASKS, concurrency: 1 });
    const limited = await env.run(['run', file, '--yes', '--limit', '1'], {
      env: { MEDIABATCH_STORE_FIRST: '2' },
    });
    expect(limited.code).toBe(4);
    expect(submittedOrder(env)).toEqual(['clip-1']);
    expect(env.query('SELECT task_id FROM tasks')).toHaveLength(42);
  });
});
