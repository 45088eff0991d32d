// `plan` of a manifest whose run is in the state file: done and charged tasks are not priced again, and
// what is left to pay is compared with the balance, the quota and the budget (exit 3 when it does not fit).
import { existsSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeRunEnv, type RunEnv, type TaskDecl } from '../helpers/run-env.js';
import { lines } from './helpers.js';

// flow22_spicy at 720p costs 10 tokens a task.
const clips = (n: number): TaskDecl[] =>
  Array.from({ length: n }, (_, i) => ({
    id: `clip-${i + 1}`,
    model: 'flow22_spicy',
    input: { prompt: `sunrise ${i + 1}`, resolution: '720p' },
  }));

let env: RunEnv;
beforeEach(async () => {
  env = await makeRunEnv({ balance: 45 });
  // Three clips done and charged (30 tokens): the balance is now 15.
  const file = await env.manifest({ name: 'clips', budget: 60, tasks: clips(3) });
  const first = await env.run(['run', file, '--yes']);
  expect(first.code).toBe(0);
});
afterEach(async () => {
  await env.close();
});

describe('plan of a manifest whose run exists', () => {
  it('shows what is done and charged, and compares only the rest with the limits', async () => {
    const file = await env.manifest({ name: 'clips', budget: 60, tasks: clips(4) });
    const r = await env.run(['plan', file]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const out = lines(r.stdout);
    expect(out).toContain('Run clips exists (finished): 3 done; 30 tokens charged so far.');
    expect(out).toContain('Left to pay: 1 task, 10 tokens ($0.20).');
    expect(out).toContain('Budget: 60 tokens, 30 tokens charged so far; the rest fits, leaving 20 tokens.');
    // Before, the 30 tokens already paid were priced again: "NOT ENOUGH: the plan can cost 25 more".
    expect(out).toContain('Balance: 15 tokens; 5 tokens left after the run at most.');
  });

  it('names the run `run` would resume: an unfinished run started with --run-id, in its own words', async () => {
    const file = await env.manifest({ name: 'clips', budget: 60, tasks: clips(2) });
    const older = await env.run(['run', file, '--yes', '--run-id', 'clips-older', '--limit', '1']);
    expect(older.code).toBe(4);
    const r = await env.run(['plan', file]);
    const out = lines(r.stdout);
    expect(out[0]).toBe('Plan for run clips-older (batch.yaml): 2 tasks');
    expect(out).toContain(
      'Run clips-older exists (interrupted): 1 pending, 1 done; 10 tokens charged so far.',
    );
    // What the plan names is what a run goes on with (here refused by the balance the plan warned of).
    const resumed = await env.run(['run', file, '--yes']);
    expect(resumed.stdout).toMatch(/^Resuming run clips-older /m);
  });

  it('carries the run, the rest and fits in --json', async () => {
    const file = await env.manifest({ name: 'clips', budget: 60, tasks: clips(4) });
    const r = await env.run(['plan', file, '--json']);
    expect(r.code).toBe(0);
    const plan = JSON.parse(r.stdout);
    expect(plan.existingRun).toEqual({ id: 'clips', state: 'finished', counts: { done: 3 }, charged: 30 });
    expect(plan.remaining).toEqual({ tasks: 1, tokens: 10, min: 10, max: 10 });
    expect(plan.tasks.map((t: { id: string; toPay: boolean }) => [t.id, t.toPay])).toEqual([
      ['clip-1', false],
      ['clip-2', false],
      ['clip-3', false],
      ['clip-4', true],
    ]);
    expect(plan.leftAfterRun).toBe(5);
    expect(plan.fits).toEqual({ balance: true, quota: null, budget: true });
    expect(env.state().jobs).toHaveLength(3);
  });

  it('exits 3 with one line when the rest does not fit the balance', async () => {
    const file = await env.manifest({ name: 'clips', budget: 60, tasks: clips(5) });
    const r = await env.run(['plan', file, '--json']);
    expect(r.code).toBe(3);
    expect(r.stderr).toBe(
      'mediabatch: what is left of the run does not fit: the run can cost up to 20 tokens but the balance is 15 tokens\n',
    );
    expect(JSON.parse(r.stdout).fits).toEqual({ balance: false, quota: null, budget: true });
  });

  it('names the quota and the budget when the rest exceeds both', async () => {
    const file = await env.manifest({ name: 'clips', budget: 45, tasks: clips(5) });
    env.sandbox.configure({ balance: 1000 });
    const r = await env.run(['plan', file, '--json'], { env: { MEDIABATCH_QUOTA: '45' } });
    expect(r.code).toBe(3);
    expect(lines(r.stderr)).toEqual([
      'mediabatch: what is left of the run does not fit: the run can cost up to 20 tokens but only 15 tokens of the quota (45 tokens, configured) are left this period; the run can cost up to 20 tokens but the budget of 45 tokens leaves 15 tokens (30 tokens charged already)',
    ]);
    expect(JSON.parse(r.stdout).fits).toEqual({ balance: true, quota: false, budget: false });
  });

  it('leaves a state file alone when there is none', async () => {
    const file = await env.manifest({ name: 'other', tasks: clips(1) });
    const r = await env.run(['--state', 'none.db', 'plan', file, '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).existingRun).toBeUndefined();
    expect(existsSync(`${env.dir}/none.db`)).toBe(false);
  });
});
