// The digest of a run's plan, which a worker joining the run compares with its own (test/postgres/
// join-plan.test.ts): what changes it (anything the store keeps of a task that decides what is sent and
// what it costs), what does not (the wording of a price's basis, the expected job time), and that the run
// keeps the digest of the plan its tasks are stored from, after a resume that stores an edit too.
import { resolve } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { planRun } from '../../src/plan/build.js';
import { openRunSession } from '../../src/run/session.js';
import { keyFingerprint, type NewTask, openStore, planDigestOf } from '../../src/store/index.js';
import { images, makeRunEnv, type RunEnv, SANDBOX_KEY } from '../helpers/run-env.js';

const TASK: NewTask = {
  taskId: 'a',
  model: 'flat-image',
  endpoint: '/v1/images',
  wireBody: '{"prompt":"a mug"}',
  estimate: { tokens: 0.2, min: 0.2, max: 0.2, basis: '0.2 tokens an image', assumedPrice: false },
  retries: 1,
  review: false,
  expectedMs: 4000,
};
const OTHER: NewTask = { ...TASK, taskId: 'b', wireBody: '{"prompt":"a cap"}' };

describe("a plan's digest", () => {
  const base = planDigestOf([TASK, OTHER]);

  it.each<[string, NewTask[]]>([
    ['a request', [{ ...TASK, wireBody: '{"prompt":"a red mug"}' }, OTHER]],
    ['a price', [{ ...TASK, estimate: { ...TASK.estimate, tokens: 0.3 } }, OTHER]],
    ['a worst case', [{ ...TASK, estimate: { ...TASK.estimate, max: 0.4 } }, OTHER]],
    ['a price assumed', [{ ...TASK, estimate: { ...TASK.estimate, assumedPrice: true } }, OTHER]],
    ['the retries', [{ ...TASK, retries: 0 }, OTHER]],
    ['a review', [{ ...TASK, review: true }, OTHER]],
    ['a file name', [{ ...TASK, fileName: 'mug' }, OTHER]],
    ['an upstream', [TASK, { ...OTHER, upstreams: [{ name: '', taskId: 'a' }] }]],
    ['a task id', [{ ...TASK, taskId: 'c' }, OTHER]],
    ['the order', [OTHER, TASK]],
    ['a task fewer', [TASK]],
    [
      'text moved between tasks',
      [
        { ...TASK, wireBody: '{"prompt":"a mug"}{' },
        { ...OTHER, wireBody: '"prompt":"a cap"}' },
      ],
    ],
  ])('changes with %s', (_, tasks) => {
    expect(planDigestOf(tasks)).not.toBe(base);
  });

  it("does not change with the price's wording or the expected job time, which builds may differ on", () => {
    const reworded = {
      ...TASK,
      estimate: { ...TASK.estimate, basis: '1 image × 0.2 tokens' },
      expectedMs: 9,
    };
    expect(planDigestOf([reworded, OTHER])).toBe(base);
    expect(base).toMatch(/^[0-9a-f]{64}$/);
  });
});

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** Opens (and closes) a session of the manifest as `run` does; returns the run's digest after. */
async function open(e: RunEnv, file: string): Promise<{ kept: string | null; planned: string }> {
  const plan = await planRun(file, { cwd: e.dir, now: new Date() });
  const planned = planDigestOf(plan.rows({ withoutCallback: true }));
  const store = openStore(e.db);
  try {
    const session = await openRunSession({
      store,
      plan,
      manifestPath: resolve(e.dir, file),
      stateFile: e.db,
      api: { baseUrl: e.sandbox.baseUrl, keyFingerprint: keyFingerprint(SANDBOX_KEY) },
      settingsToKeep: plan.settings,
    });
    session.close();
  } finally {
    store.close();
  }
  const kept = openStore(e.db);
  try {
    return { kept: kept.runs.getRun('batch')?.planDigest ?? null, planned };
  } finally {
    kept.close();
  }
}

describe("the run's digest", () => {
  it('is the plan its tasks are stored from: a resume that stores an edit keeps the edit’s; a refused one keeps the old', async () => {
    env = await makeRunEnv();
    const tasks = images(3);
    const file = await env.manifest({ tasks });
    const first = await open(env, file);
    expect(first.kept).toBe(first.planned);

    // A pending task's prompt edited: a resume stores the new request, and its plan is the run's now.
    const edited = images(3);
    const third = edited[2];
    if (third) third.input = { ...third.input, prompt: 'img number 3, in red' };
    await env.manifest({ tasks: edited }, file);
    const second = await open(env, file);
    expect(second.planned).not.toBe(first.planned);
    expect(second.kept).toBe(second.planned);

    // A sent task's prompt edited: the resume is refused, and the run's plan is still the one stored.
    const db = new Database(env.db);
    db.prepare(`UPDATE tasks SET state = 'submitted', img_uuid = 'u1' WHERE task_id = 'img-1'`).run();
    db.close();
    const sentEdited = edited.map((t) =>
      t.id === 'img-1' ? { ...t, input: { prompt: 'img one, in blue' } } : t,
    );
    await env.manifest({ tasks: sentEdited }, file);
    await expect(open(env, file)).rejects.toThrow(/1 task was already sent with a different request/);
    const store = openStore(env.db);
    expect(store.runs.getRun('batch')?.planDigest).toBe(second.planned);
    store.close();
  });
});
