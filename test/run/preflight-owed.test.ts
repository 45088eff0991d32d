// The preflight's spend so far is what the run may still owe, not only what the ledger says it paid: a task
// in doubt may have been charged (its worst case stays reserved in the store), so the next `run` counts it
// against the budget, and says so, where it used to promise room the store would then refuse.
import { afterEach, describe, expect, it } from 'vitest';
import { images, makeRunEnv, type RunEnv, taskStates } from '../helpers/run-env.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

describe('the preflight counts what a run may still owe', () => {
  it('a task in doubt keeps its worst case in the budget at the next run', async () => {
    // Every POST is charged, then its answer is lost: the first task sent is in doubt.
    env = await makeRunEnv({ chargeThenErrorRate: 1, seed: 1 });
    const file = await env.manifest({ tasks: images(3), concurrency: 1, budget: 0.5 });
    const first = await env.run(['run', file, '--yes', '--limit', '1']);
    expect(first.code).toBe(4);
    expect(taskStates(env)).toEqual({ 'img-1': 'in_doubt', 'img-2': 'pending', 'img-3': 'pending' });
    // The sandbox did charge it: 0.2 of the balance is gone, though no answer said so.
    expect(env.sandbox.state().jobs).toHaveLength(1);
    env.sandbox.configure({ chargeThenErrorRate: 0 });

    // 0.2 in doubt + 0.4 to send > 0.5: refused before anything is sent, the doubt named.
    const refused = await env.run(['run', file, '--yes']);
    expect(refused.code).toBe(3);
    expect(refused.stderr + refused.stdout).toContain(
      'the run can cost up to 0.4 tokens but the budget of 0.5 tokens leaves 0.3 tokens (0 tokens charged already, 0.2 tokens reserved for tasks in doubt or in flight)',
    );
    expect(env.state().requests.submit).toBe(1);

    // With --allow-partial the run goes on: the preflight's figure and the store agree, one image fits.
    const partial = await env.run(['run', file, '--yes', '--allow-partial']);
    expect(partial.stdout).toContain(
      'Budget: 0.5 tokens, 0 tokens charged so far, 0.2 tokens reserved for tasks in doubt or in flight, the run can cost up to 0.1 tokens more than the budget leaves',
    );
    expect(env.state().requests.submit).toBe(2);
    expect(taskStates(env)).toEqual({ 'img-1': 'in_doubt', 'img-2': 'done', 'img-3': 'pending' });
  });
});
