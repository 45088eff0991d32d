// The longest expected jobs are submitted first, so the slots finish together; the manifest's
// order is kept when asked for (`order: manifest` or `run --order manifest`).
import { afterEach, describe, expect, it } from 'vitest';
import { makeRunEnv, type RunEnv, type TaskDecl } from '../helpers/run-env.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const TASKS: TaskDecl[] = [
  { id: 'still-1', model: 'flat-image', input: { prompt: 'a mug on a table' } },
  { id: 'line-1', model: 'speech-v3', input: { text: 'Hello there.' } },
  { id: 'clip-5s', model: 'studio-2-6', input: { prompt: 'a mug turning', duration: 5, resolution: '720p' } },
  { id: 'still-2', model: 'flat-image', input: { prompt: 'a cap on a table' } },
  {
    id: 'clip-10s',
    model: 'studio-2-6',
    input: { prompt: 'a cap turning', duration: 10, resolution: '720p' },
  },
];
const WRITTEN = ['still-1', 'line-1', 'clip-5s', 'still-2', 'clip-10s'];
const LONGEST = ['clip-10s', 'clip-5s', 'line-1', 'still-1', 'still-2'];

/** Task ids in the order the sandbox received their jobs. */
function submittedOrder(e: RunEnv): string[] {
  const byUuid = new Map(
    e
      .query<{ task_id: string; img_uuid: string }>('SELECT task_id, img_uuid FROM tasks')
      .map((r) => [r.img_uuid, r.task_id]),
  );
  return e.state().jobs.map((j) => byUuid.get(j.img_uuid) ?? j.img_uuid);
}

describe('the order tasks are submitted in', () => {
  it('is the longest expected job first by default: videos (the 10 s one first), then audio, then images', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: TASKS, concurrency: 1 });
    const result = await env.run(['run', file, '--yes']);
    expect(result.code).toBe(0);
    expect(submittedOrder(env)).toEqual(LONGEST);
  });

  it('is the manifest order with `order: manifest`', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: TASKS, concurrency: 1, order: 'manifest' });
    expect((await env.run(['run', file, '--yes'])).code).toBe(0);
    expect(submittedOrder(env)).toEqual(WRITTEN);
  });

  it('is the manifest order with `run --order manifest`, and `--limit 2` prices and submits the two it names', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: TASKS, concurrency: 1 });
    // Tasks left pending by --limit make the run unfinished: exit 4, resumable.
    const first = await env.run(['run', file, '--yes', '--order', 'manifest', '--limit', '2']);
    expect(first.code).toBe(4);
    expect(submittedOrder(env)).toEqual(['still-1', 'line-1']);
    const rest = await env.run(['run', file, '--yes', '--limit', '2']);
    expect(rest.code).toBe(4);
    expect(submittedOrder(env)).toEqual(['still-1', 'line-1', 'clip-10s', 'clip-5s']);
    // The preflight priced the two it then submitted, the two clips (10 s + 5 s at 720p), not the next two written.
    expect(rest.stdout).toMatch(/^ {2}studio-2-6 +2 +31\.5 /m);
    expect(rest.stdout).toContain('To submit: 2 task(s), 31.5 tokens');
  });

  it('refuses an order it does not know, naming the choices', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: TASKS, concurrency: 1 });
    const result = await env.run(['run', file, '--yes', '--order', 'shortest']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("argument 'shortest' is invalid. Allowed choices are longest, manifest.");
    expect(env.state().jobs).toEqual([]);
  });
});
