// `status` says why a run stopped, from what the run recorded where it stopped: its budget, the balance,
// a signal, or nothing at all because its process was killed. The same reason is in `status --json`, in
// the run's account in report.json and in report.md; a run that goes on and finishes has none.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { startView } from '../../src/view/server.js';
import { images, makeRunEnv, type RunEnv } from '../helpers/run-env.js';
import { raw } from '../view/helpers.js';

let env: RunEnv;
afterEach(async () => {
  await env?.close();
});

async function submissionsSeen(e: RunEnv, n: number): Promise<void> {
  while (e.state().requests.submit < n) await new Promise((r) => setTimeout(r, 2));
}

async function stoppedOf(e: RunEnv, run = 'batch') {
  const json = await e.run(['status', run, '--json']);
  expect(json.code).toBe(0);
  return (
    JSON.parse(json.stdout) as {
      stopped: { reason: string; label: string; message: string; at: string | null } | null;
    }
  ).stopped;
}

async function statusLine(e: RunEnv, run = 'batch'): Promise<string | undefined> {
  const text = await e.run(['status', run]);
  return text.stdout.split('\n').find((l) => l.startsWith('  Stopped'));
}

describe('status: why a run stopped', () => {
  it("names the run's budget, with the line the run ended on; the report says it too; a finished resume clears it", async () => {
    env = await makeRunEnv({ balance: 1000 });
    const file = await env.manifest({ tasks: images(5), budget: 0.5, concurrency: 1 });
    const first = await env.run(['run', file, '--yes', '--allow-partial']);
    expect(first.code).toBe(4);
    const line =
      '3 task(s) did not fit under the budget of 0.5 tokens (0.1 tokens left; they need up to 0.6 tokens): raise budget and run again to continue';
    expect(await stoppedOf(env)).toEqual({
      reason: 'budget',
      label: "the run's budget",
      message: line,
      at: expect.any(String),
    });
    expect(await statusLine(env)).toMatch(
      new RegExp(
        `^ {2}Stopped \\(the run's budget\\) at \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC: ${line.replace(/[.()]/g, '\\$&')}$`,
      ),
    );
    const report = JSON.parse(readFileSync(join(env.dir, 'out', 'batch', 'report.json'), 'utf8'));
    expect(report.account.run.stopped).toMatchObject({ reason: 'budget', message: line });
    expect(readFileSync(join(env.dir, 'out', 'batch', 'report.md'), 'utf8')).toContain(
      `Stopped (the run's budget): ${line}`,
    );
    // The view's run page reads the same.
    const view = await startView({ stateFile: env.db, cwd: env.dir });
    try {
      const answer = await raw(view.port, '/api/runs/batch', { authorization: `Bearer ${view.token}` });
      // The page says it in the same words as status and the report.
      expect(JSON.parse(answer.text).run.stopped).toMatchObject({
        reason: 'budget',
        label: "the run's budget",
        message: line,
      });
    } finally {
      await view.close();
    }
    const list = await env.run(['status']);
    expect(list.stdout).toMatch(/^batch .* interrupted \(budget\) /m);

    const done = await env.run(['run', file, '--yes', '--budget', '5']);
    expect(done.code).toBe(0);
    expect(await stoppedOf(env)).toBeNull();
    expect(await statusLine(env)).toBeUndefined();
  });

  it('names the balance that ran out mid-run', async () => {
    env = await makeRunEnv({ balance: 0.35 });
    const file = await env.manifest({ tasks: images(6), concurrency: 1 });
    const r = await env.run(['run', file, '--yes', '--allow-partial']);
    expect(r.code).toBe(4);
    expect(await stoppedOf(env)).toMatchObject({
      reason: 'insufficient-tokens',
      message: 'the balance ran out (code 100): top up, then run again to continue',
    });
    expect(await statusLine(env)).toContain('  Stopped (the balance) at ');
  });

  it('names a refusal of the preflight, with its line', async () => {
    env = await makeRunEnv({ balance: 0.5 });
    const file = await env.manifest({ tasks: images(6) });
    const r = await env.run(['run', file, '--yes']);
    expect(r.code).toBe(3);
    const stopped = await stoppedOf(env);
    expect(stopped?.reason).toBe('refused');
    // The line the run was refused with, as the terminal showed it.
    expect(r.stderr).toContain(stopped?.message);
    expect(stopped?.message).toMatch(/^refused: .*balance.*Nothing was submitted/);
    expect(await statusLine(env)).toContain('  Stopped (the preflight refused it) at ');
    expect(env.state().jobs).toHaveLength(0);
  });

  it('names a signal', async () => {
    env = await makeRunEnv({ latencyMs: 20 });
    const file = await env.manifest({ tasks: images(12), concurrency: 2 });
    const run = env.run(['run', file, '--yes']);
    await submissionsSeen(env, 2);
    env.signals.emit('SIGTERM');
    expect((await run).code).toBe(4);
    expect(await stoppedOf(env)).toMatchObject({
      reason: 'interrupted',
      message: 'interrupted: stopped submitting; run again to continue',
    });
  });

  it('says a run whose process died without a word (kill -9) was lost', async () => {
    env = await makeRunEnv();
    await env.manifest({ tasks: images(1) });
    // What a killed process leaves: the run recorded as running, and nobody holding it.
    const store = openStore(env.db);
    store.runs.createRun({
      id: 'batch',
      manifestPath: join(env.dir, 'batch.yaml'),
      manifestName: 'batch',
      settings: {},
    });
    store.close();
    expect(await stoppedOf(env)).toMatchObject({ reason: 'lost', at: null });
    expect(await statusLine(env)).toBe(
      '  Stopped (its process or workers lost): the process driving it (or every worker of it) ended without closing it: killed, crashed, or its PostgreSQL state went away; run it again to continue',
    );
  });
});
