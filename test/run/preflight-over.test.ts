// A run let in over its limits (--allow-partial), or refused because a limit is already past: every line of
// the preflight says what is over and by how much, in words, never a negative figure "left".
import { afterEach, describe, expect, it } from 'vitest';
import { images, makeRunEnv, type RunEnv } from '../helpers/run-env.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** The preflight's lines of a run's output (those that name a limit), without the run's own progress. */
function limitLines(stdout: string): string[] {
  return stdout.split('\n').filter((l) => /^ {2}(Balance|Quota|Budget|--allow-partial):/.test(l));
}

describe('the preflight over a limit', () => {
  it('--allow-partial over balance, quota and budget: each line says by how much the run can go over', async () => {
    env = await makeRunEnv({ balance: 1 });
    // Six images at 0.2: the run can cost 1.2, against a balance of 1, a quota of 1.1 and a budget of 0.9.
    const file = await env.manifest({ tasks: images(6), concurrency: 1, budget: 0.9 });
    const r = await env.run(['run', file, '--yes', '--allow-partial'], { env: { MEDIABATCH_QUOTA: '1.1' } });
    expect(limitLines(r.stdout)).toEqual([
      '  Balance: 1 token, the run can cost up to 0.2 tokens more than the balance',
      '  Quota: 0 of 1.1 tokens used this period (limit from configuration; used = this month in the local ledger), the run can cost up to 0.1 tokens more than the quota leaves this period',
      '  Budget: 0.9 tokens, 0 tokens charged so far, the run can cost up to 0.3 tokens more than the budget leaves',
      '  --allow-partial: the run can cost up to 1.2 tokens but the balance is 1 token; the run can cost up to 1.2 tokens but only 1.1 tokens of the quota (1.1 tokens, limit from configuration; used = this month in the local ledger) are left this period; the run can cost up to 1.2 tokens but the budget of 0.9 tokens leaves 0.9 tokens (0 tokens charged already); the run stops cleanly when money runs out',
    ]);
    expect(r.stdout).not.toMatch(/-\d[\d.,]* left/);
    // The budget stopped it where it said: four images fit under 0.9.
    expect(r.code).toBe(4);
    expect(env.state().requests.submit).toBe(4);
  });

  it('`balance` says one token in the singular', async () => {
    env = await makeRunEnv({ balance: 1 });
    const r = await env.run(['balance']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^Balance: 1 token \(\$0\.02\)/m);
  });

  it('a limit already past before the run (budget lowered, quota used up) is named as over, not as a negative left', async () => {
    env = await makeRunEnv();
    const first = await env.manifest({ tasks: images(3), concurrency: 1, budget: 1 });
    expect((await env.run(['run', first, '--yes'])).code).toBe(0);
    // 0.6 charged; the user lowers the budget to 0.4 and adds two images, with a quota of 0.5 this period.
    const file = await env.manifest({ tasks: images(5), concurrency: 1, budget: 0.4 });
    const r = await env.run(['run', file, '--yes'], { env: { MEDIABATCH_QUOTA: '0.5' } });
    expect(r.code).toBe(3);
    expect(r.stderr + r.stdout).toContain(
      'the run can cost up to 0.4 tokens but the quota (0.5 tokens, limit from configuration; used = this month in the local ledger) is already 0.1 tokens over this period',
    );
    expect(r.stderr + r.stdout).toContain(
      'the run can cost up to 0.4 tokens but the budget of 0.4 tokens is already 0.2 tokens over (0.6 tokens charged already)',
    );
    expect(limitLines(r.stdout)).toEqual([
      '  Balance: 999 tokens, 998.6 tokens left after the run at most',
      '  Quota: 0.6 of 0.5 tokens used this period (limit from configuration; used = this month in the local ledger), the run can cost up to 0.5 tokens more than the quota leaves this period',
      '  Budget: 0.4 tokens, 0.6 tokens charged so far, the run can cost up to 0.6 tokens more than the budget leaves',
    ]);
    expect(r.stdout + r.stderr).not.toMatch(/-\d[\d.,]*( left|\b.*are left)/);
    expect(env.state().requests.submit).toBe(3);

    const balance = await env.run(['balance'], { env: { MEDIABATCH_QUOTA: '0.5' } });
    expect(balance.code).toBe(0);
    expect(balance.stdout).toMatch(
      /\nQuota: 0\.6 of 0\.5 tokens used in \d{4}-\d\d, 0\.1 tokens over it \(limit from configuration; used = this month in the local ledger\)\n/,
    );
  });
});
