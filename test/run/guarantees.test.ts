// Preflight refusals, the budget as a hard cap, interrupts, leases, manifest edits and finished runs:
// the CLI in-process against the sandbox, with a real SQLite file.
import { afterEach, describe, expect, it } from 'vitest';
import { hintIn, images, makeRunEnv, type RunEnv, reason, taskStates } from '../helpers/run-env.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** Resolves once the sandbox has seen `n` submissions (the run is under way). */
async function submissionsSeen(e: RunEnv, n: number): Promise<void> {
  while (e.state().requests.submit < n) await new Promise((r) => setTimeout(r, 2));
}

const REFUSED_TAIL =
  '. Nothing was submitted; raise the limit, shrink the manifest, or run with --allow-partial to stop cleanly when money runs out';

describe('run: preflight refusals (exit 3, nothing submitted)', () => {
  it.each([
    [
      'over balance',
      { balance: 0.9 },
      {},
      {},
      'refused: the run can cost up to 1 token but the balance is 0 tokens',
    ],
    [
      'over quota (MEDIABATCH_QUOTA)',
      {},
      { MEDIABATCH_QUOTA: '0.5' },
      {},
      'refused: the run can cost up to 1 token but only 0.5 tokens of the quota (0.5 tokens, limit from configuration; used = this month in the local ledger) are left this period',
    ],
    [
      'over budget',
      {},
      {},
      { budget: 0.5 },
      'refused: the run can cost up to 1 token but the budget of 0.5 tokens leaves 0.5 tokens (0 tokens charged already)',
    ],
  ])('%s', async (_name, sandbox, runEnv, manifest, message) => {
    env = await makeRunEnv(sandbox);
    const file = await env.manifest({ tasks: images(5), ...manifest });
    const result = await env.run(['run', file, '--yes'], { env: runEnv });
    expect(result.code).toBe(3);
    expect(result.stderr).toBe(`mediabatch: ${message}${REFUSED_TAIL}\n`);
    expect(env.state().requests.submit).toBe(0);
  });

  it('budget is a hard cap with --allow-partial: charged never exceeds it, the run stops resumable', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(5), budget: 0.5, concurrency: 4 });
    const result = await env.run(['run', file, '--yes', '--allow-partial']);
    expect(result.code).toBe(4);
    expect(reason(result)).toBe(
      `the budget of 0.5 tokens cannot cover the next task (img-3, up to 0.2 tokens): raise budget and run again to continue: \`mediabatch run batch.yaml --run-id batch --state ${env.db} --allow-partial\``,
    );
    const spent = env.state().jobs.reduce((n, j) => n + j.cost, 0);
    expect(spent).toBeLessThanOrEqual(0.5);
    expect(env.state().jobs).toHaveLength(2);
  });

  it('a task in doubt keeps its worst case under the budget (it may have been charged)', async () => {
    // Seed 1: the first answer is dropped after the charge; then the fault is switched off.
    env = await makeRunEnv({ chargeThenErrorRate: 1, seed: 1 });
    const file = await env.manifest({ tasks: images(3), budget: 0.4, concurrency: 1 });
    const run = env.run(['run', file, '--yes', '--allow-partial']);
    await submissionsSeen(env, 1);
    env.sandbox.configure({ chargeThenErrorRate: 0 });
    const result = await run;
    expect(taskStates(env)).toEqual({ 'img-1': 'in_doubt', 'img-2': 'done', 'img-3': 'pending' });
    expect(env.state().jobs.reduce((n, j) => n + j.cost, 0)).toBeLessThanOrEqual(0.4);
    expect(result.code).toBe(4);
  });
});

describe('run: interruptions', () => {
  it.each(['SIGINT', 'SIGTERM'])(
    '%s once: stops submitting, exit 4; the same command completes without charging twice',
    async (signal) => {
      env = await makeRunEnv({ latencyMs: 20 });
      const file = await env.manifest({ tasks: images(12), concurrency: 2 });
      const run = env.run(['run', file, '--yes']);
      await submissionsSeen(env, 2);
      env.signals.emit(signal);
      const first = await run;
      expect(first.code).toBe(4);
      expect(reason(first)).toBe(
        `interrupted: stopped submitting; run again to continue: \`mediabatch run batch.yaml --run-id batch --state ${env.db}\``,
      );
      const sent = env.state().jobs.length;
      expect(sent).toBeLessThan(12);
      expect(Object.values(taskStates(env))).not.toContain('submitting');

      // Typed as printed (a person confirms at the terminal): the same run goes on.
      const second = await env.type(hintIn(reason(first)));
      expect(second.code).toBe(0);
      expect(env.state().jobs).toHaveLength(12);
      expect(env.state().requests.submit).toBe(12);
    },
  );

  it('a second run of the same run id is refused while the first holds the lease', async () => {
    env = await makeRunEnv({ latencyMs: 20 });
    const file = await env.manifest({ tasks: images(6), concurrency: 2 });
    const first = env.run(['run', file, '--yes']);
    await submissionsSeen(env, 1);
    const second = await env.run(['run', file, '--yes']);
    expect(second.code).toBe(4);
    expect(reason(second)).toMatch(
      /^run batch is being driven by another mediabatch \(\d+@.+#[0-9a-f]{8}\) since \S+Z until at least \S+Z: wait for it to finish, then run again$/,
    );
    expect((await first).code).toBe(0);
    expect(env.state().requests.submit).toBe(6);
  });

  it('a finished run, run again without a terminal: "already complete", exit 0, nothing submitted', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(3) });
    expect((await env.run(['run', file, '--yes'])).code).toBe(0);
    const again = await env.run(['run', file]);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe(
      'Run batch is already complete: 3 done. Files are in out/batch.\n' +
        '  Report: out/batch/report.md · gallery: out/batch/index.html\n',
    );
    expect(env.state().requests.submit).toBe(3);
  });
});

describe('run: resume after a manifest edit', () => {
  it('unchanged tasks are never resubmitted; a changed sent task needs --accept-changes; an unsent one just changes', async () => {
    env = await makeRunEnv();
    const tasks = images(4);
    const file = await env.manifest({ tasks, budget: 0.4, concurrency: 1 });
    expect((await env.run(['run', file, '--yes', '--allow-partial'])).code).toBe(4);
    expect(Object.values(taskStates(env))).toEqual(['done', 'done', 'pending', 'pending']);

    const edited = tasks.map((t) =>
      t.id === 'img-1' || t.id === 'img-4' ? { ...t, input: { prompt: `${t.input.prompt} (edited)` } } : t,
    );
    await env.manifest({ tasks: edited, budget: 10, concurrency: 1 });
    const refused = await env.run(['run', file, '--yes']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(
      '  img-1 (done): the request in batch.yaml changed since it was sent\n' +
        'mediabatch: 1 task was already sent with a different request; run again with --accept-changes to submit it anew (charged again), or restore the manifest\n',
    );
    expect(env.state().requests.submit).toBe(2);

    const accepted = await env.run(['run', file, '--yes', '--accept-changes']);
    expect(accepted.code).toBe(0);
    expect(accepted.stdout).toContain('Resubmitting 1 changed task(s): img-1');
    // img-2 was never sent again; img-1 anew; img-3 and img-4 for the first time.
    expect(env.state().jobs).toHaveLength(5);
    const attempts = env.query<{ task_id: string; n: number }>(
      'SELECT task_id, count(*) AS n FROM attempts GROUP BY task_id ORDER BY task_id',
    );
    expect(attempts).toEqual([
      { task_id: 'img-1', n: 2 },
      { task_id: 'img-2', n: 1 },
      { task_id: 'img-3', n: 1 },
      { task_id: 'img-4', n: 1 },
    ]);
    const [img4] = env.query<{ body: string }>("SELECT body FROM tasks WHERE task_id = 'img-4'");
    expect(JSON.parse(img4?.body ?? '{}').prompt).toBe('img number 4 (edited)');
  });
});
