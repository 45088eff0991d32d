// One account of a run, every surface: for each scenario (retries after failures, re-rolls and
// rejections with skipped chains, tasks in doubt and their retry, a run stopped mid-way, three shards
// merged) the progress line's last frame, `status --json`, `report --json`, report.md, report.csv, the
// gallery, the view's `GET /api/runs/:run`, `review --json` and the merged report state the same counts
// and money, and those equal the sandbox's /_sandbox/state. Real HTTP to the sandbox, real SQLite files,
// the CLI in-process.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunAccount } from '../../src/account/index.js';
import type { Report } from '../../src/report/schema.js';
import type { SandboxOptions } from '../../src/sandbox/options.js';
import { VARIANTS } from '../helpers/review-chain.js';
import { images, makeRunEnv, type RunEnv } from '../helpers/run-env.js';
import {
  accountOf,
  expectEverySurface,
  expectFrame,
  expectOutcomeLines,
  expectSandbox,
  expectTotals,
  lastFrame,
  sandboxSeen,
  sandboxState,
} from './surfaces.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

async function start(options: SandboxOptions = {}): Promise<RunEnv> {
  env = await makeRunEnv(options);
  return env;
}

/** `run` to its end; the account it ended on, checked against its progress line's last frame. */
async function run(e: RunEnv, args: string[], codes: number[]): Promise<RunAccount> {
  const out = await e.run(['run', ...args]);
  expect(codes, out.stderr).toContain(out.code);
  const a = await accountOf(e, 'batch');
  expectFrame(lastFrame(out.stdout), a);
  expectOutcomeLines(out.stdout, a);
  return a;
}

describe('one account of a run on every surface', () => {
  it('retries after failed, refunded jobs: counted as retries, their money apart', async () => {
    const e = await start({ failRate: 0.3, seed: 11 });
    const file = await e.manifest({ tasks: images(10) });
    const a = await run(e, [file, '--yes', '--retries', '3'], [0, 2]);
    expect(a.money.by_kind.retry.jobs).toBeGreaterThan(0);
    expect(a.money.by_kind.reroll.jobs).toBe(0);
    expect(a.money.refunded).toBeGreaterThan(0);
    await expectEverySurface(e, 'batch', a);
  });

  it('re-rolls and rejections with skipped chains: a re-roll is no retry, the estimate follows the decisions', async () => {
    const e = await start();
    const file = await e.manifest({ tasks: VARIANTS, concurrency: 8 });
    const first = await run(e, [file, '--yes'], [4]);
    expect(first.review?.awaiting).toBe(4);
    expect(first.next.map((s) => s.action)).toEqual(['review']);
    await expectEverySurface(e, 'batch', first, { review: true });

    for (const [flag, ids] of [
      ['--approve', 'still-mug-1'],
      ['--reroll', 'still-mug-2'],
      ['--reject', 'still-mug-3,still-mug-4'],
    ] as const) {
      const decided = await e.run(['review', 'batch', flag, ids, '--yes']);
      expect(decided.code, decided.stderr).toBe(0);
    }
    const decided = await accountOf(e, 'batch');
    expect(decided.by_state.skipped).toBe(2);
    expect(decided.rejected.in_review).toBe(2);
    const clip = first.estimate.tokens - decided.estimate.tokens;
    // Two clips skipped left the estimate; the approved and the re-rolled stayed.
    expect(clip).toBeGreaterThan(0);
    await expectEverySurface(e, 'batch', decided, { review: true });

    const second = await run(e, [file, '--yes'], [4]);
    expect(second.money.by_kind.reroll.jobs).toBe(1);
    expect(second.estimate.tokens).toBe(decided.estimate.tokens);
    const approve = await e.run(['review', 'batch', '--approve', 'still-mug-2']);
    expect(approve.code, approve.stderr).toBe(0);
    const last = await run(e, [file, '--yes'], [0]);
    expect(last.money.by_kind.retry.jobs).toBe(0);
    expect(last.money.by_kind.reroll).toMatchObject({ jobs: 1, tasks: 1 });
    expect(last.by_state).toMatchObject({ done: 4, rejected: 2, skipped: 2 });
    expect(last.next).toEqual([{ action: 'none', tasks: 0, task_ids: [], command: null }]);
    await expectEverySurface(e, 'batch', last, { review: true });
  });

  it('tasks in doubt: at most their worst case unseen, then sent again as retries of doubt', async () => {
    const e = await start({ chargeThenErrorRate: 0.3, seed: 5 });
    const file = await e.manifest({ tasks: images(10) });
    const a = await run(e, [file, '--yes', '--retries', '0'], [2]);
    expect(a.in_doubt.tasks).toBeGreaterThan(0);
    expect(a.next[0]).toMatchObject({ action: 'retry-in-doubt', tasks: a.in_doubt.tasks });
    expect(sandboxSeen(await sandboxState(e)).hidden).toBeGreaterThan(0);
    await expectEverySurface(e, 'batch', a);

    e.sandbox.configure({ chargeThenErrorRate: 0 });
    const again = await run(e, [file, '--yes', '--retry-in-doubt'], [0]);
    expect(again.money.by_kind.doubt_retry.jobs).toBe(a.in_doubt.tasks);
    expect(again.money.by_kind.retry.jobs).toBe(0);
    await expectEverySurface(e, 'batch', again);
  });

  it('a run stopped mid-way: the unfinished tasks, and the command that continues', async () => {
    const e = await start();
    const file = await e.manifest({ tasks: images(10) });
    const a = await run(e, [file, '--yes', '--limit', '3'], [4]);
    expect(a.by_state.done).toBe(3);
    expect(a.unfinished).toBe(7);
    expect(a.worst_case_left.tasks).toBe(7);
    const step = a.next[0];
    expect(a.next).toHaveLength(1);
    expect(step).toMatchObject({
      action: 'continue',
      tasks: 7,
      command: `mediabatch run ${file} --run-id batch --state ${e.db}`,
    });
    expect(step?.task_ids).toEqual(['img-4', 'img-5', 'img-6', 'img-7', 'img-8', 'img-9', 'img-10']);
    await expectEverySurface(e, 'batch', a);

    // The command, as the account gives it (the state file is the environment's), continues this run
    // and submits the seven tasks it promised, no more.
    const [program, ...args] = (step?.command ?? '').split(' ');
    expect(program).toBe('mediabatch');
    const jobsBefore = (await sandboxState(e)).jobs.length;
    const done = await run(e, [...args.slice(1), '--yes'], [0]);
    expect((await sandboxState(e)).jobs.length - jobsBefore).toBe(7);
    expect(done).toMatchObject({ tasks: 10, unfinished: 0 });
    expect(done.money.jobs).toBe(10);
  });

  it('three shards merged: the merged report is the sum of the shards’ accounts, and the sandbox’s books', async () => {
    const e = await start({ failRate: 0.2, seed: 3 });
    const file = await e.manifest({ tasks: images(12) });
    const accounts: RunAccount[] = [];
    for (const i of [1, 2, 3]) {
      const state = join(e.dir, `shard-${i}.db`);
      const out = await e.run([
        '--state',
        state,
        'run',
        file,
        '--yes',
        '--retries',
        '2',
        '--shard',
        `${i}/3`,
      ]);
      expect([0, 2], out.stderr).toContain(out.code);
      const runId = `batch.shard-${i}-of-3`;
      const a = await accountOf(e, runId, state);
      expectFrame(lastFrame(out.stdout), a);
      expectOutcomeLines(out.stdout, a);
      accounts.push(a);
    }
    const merge = await e.run(['report', '--merge', 'out/batch']);
    expect(merge.code, merge.stderr).toBe(0);
    const merged = JSON.parse(readFileSync(join(e.dir, 'out', 'batch', 'report.json'), 'utf8')) as Report;
    const sum = merged.account as RunAccount;
    expect(sum.tasks).toBe(12);
    expect(sum.by_state).toEqual(
      Object.fromEntries(
        Object.keys(sum.by_state).map((s) => [
          s,
          accounts.reduce((n, a) => n + a.by_state[s as keyof RunAccount['by_state']], 0),
        ]),
      ),
    );
    expect(sum.money.jobs).toBe(accounts.reduce((n, a) => n + a.money.jobs, 0));
    expectTotals(merged, sum);
    await expectSandbox(e, sum);
  });
});
