// Choosing results from code: the library exports the review functions and run() takes waitForReview. A run()
// that waits for review is decided on from the same program through openState/listAwaiting/decide, and
// submits the approved still's clip without restarting. Real sandbox over HTTP, money from its state.
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import {
  decide,
  listAwaiting,
  openState,
  rerollPrice,
  reviewFacts,
  reviewSummary,
  run,
} from '../../src/index.js';
import { makeRunEnv, type RunEnv, SANDBOX_KEY, type TaskDecl, taskStates } from '../helpers/run-env.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const CHAIN: TaskDecl[] = [
  { id: 'still', model: 'flat-image', review: true, input: { prompt: 'a mug' } },
  {
    id: 'clip',
    model: 'studio-2-6',
    after: 'still',
    input: { prompt: 'turn', image_url: '{{after.image}}', duration: 5, resolution: '720p' },
  },
];

async function jobModels(e: RunEnv): Promise<string[]> {
  const answer = await request(`${e.sandbox.baseUrl}/_sandbox/state`);
  return ((await answer.body.json()) as { jobs: Array<{ model: string }> }).jobs.map((j) => j.model);
}

describe('the library and review', () => {
  it('run({ waitForReview }) keeps going until decide() approves, then sends the downstream', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: CHAIN, budget: 100 });
    const options = {
      cwd: env.dir,
      stateFile: env.db,
      baseUrl: env.sandbox.baseUrl,
      apiKey: SANDBOX_KEY,
      timeScale: 0.01,
    };
    const running = run(file, { ...options, waitForReview: true });
    const state = openState(env.db);
    try {
      // The run is created by run() in a moment: until then the state does not know it.
      const look = () => (state.runs.getRun('batch') === undefined ? [] : listAwaiting(state, 'batch'));
      let awaiting = look();
      for (let i = 0; awaiting.length === 0 && i < 400; i++) {
        await new Promise((r) => setTimeout(r, 25));
        awaiting = look();
      }
      expect(awaiting.map((a) => [a.taskId, a.attempt, a.downstreams])).toEqual([['still', 1, ['clip']]]);
      // Nothing downstream sent before the approval.
      expect(await jobModels(env)).toEqual(['flat-image']);
      expect(rerollPrice(state, 'batch', ['still']).fits).toBe(true);
      const [first] = awaiting;
      const outcomes = await decide(state, 'batch', ['still'], 'approve', {
        by: 'ana',
        note: 'good',
        ...(first ? { expectedVersion: first.version } : {}),
      });
      expect(outcomes).toMatchObject([{ taskId: 'still', ok: true, verdict: 'approve' }]);
      const outcome = await running;
      expect(outcome.exitCode).toBe(0);
      expect(await jobModels(env)).toEqual(['flat-image', 'studio-2-6']);
      expect(taskStates(env)).toEqual({ still: 'done', clip: 'done' });
      expect(reviewSummary(state, 'batch')).toMatchObject({ reviewed: 1, awaiting: 0, approved: 1 });
      expect(reviewFacts(state, 'batch').get('still')?.decisions).toMatchObject([
        { verdict: 'approve', by: 'ana', note: 'good' },
      ]);
    } finally {
      state.close();
    }
    // Without waitForReview the same run() ends at once with exit 4 while a result awaits review.
    const other = await env.manifest({ tasks: CHAIN, budget: 100, name: 'other' }, 'other.yaml');
    const ended = await run(other, options);
    expect(ended.exitCode).toBe(4);
  });
});
