// Choosing results. A reviewed upstream's downstream is never submitted (nor charged) before the
// result is approved; a rejected one skips it; a re-roll is one more charge per ask, keeps the earlier
// result, and is refused over the budget before anything is sent. Real HTTP to the sandbox, money from its
// /_sandbox/state, a real SQLite file, the CLI in-process.
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { decide, listAwaiting } from '../../src/review/index.js';
import { openStore } from '../../src/store/index.js';
import { CHROMIUM, requireBrowser, SKIP_BROWSER } from '../helpers/browser.js';
import { VARIANTS } from '../helpers/review-chain.js';
import { makeRunEnv, type RunEnv, type TaskDecl, taskStates } from '../helpers/run-env.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** Balance and jobs as the sandbox serves them over HTTP. */
async function sandboxState(
  e: RunEnv,
): Promise<{ balance: number; jobs: Array<{ model: string; img_uuid: string }> }> {
  const answer = await request(`${e.sandbox.baseUrl}/_sandbox/state`);
  return (await answer.body.json()) as { balance: number; jobs: Array<{ model: string; img_uuid: string }> };
}

const lastLine = (stderr: string) => stderr.trim().split('\n').at(-1) ?? '';

describe('review', () => {
  it('sends on only the approved variant, skips the rejected one, and charges nothing downstream before approval', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: VARIANTS, concurrency: 8 });
    const start = (await sandboxState(env)).balance;

    // The plan prices every clip as if its still were approved, and says so.
    const plan = await env.run(['plan', file]);
    expect(plan.code).toBe(0);
    expect(plan.stdout).toMatch(
      /^Review: 4 results must be approved \(the `review` command, or the view\) before anything downstream is submitted\. 4 tasks wait for a reviewed result: priced as if every one is approved \(the worst case, up to [\d.,]+ tokens\); a rejected result's downstreams are skipped and cost nothing\.$/m,
    );
    const planned = JSON.parse((await env.run(['plan', file, '--json'])).stdout) as {
      tasks: Array<{ id: string; review?: boolean }>;
    };
    expect(planned.tasks.filter((t) => t.review).map((t) => t.id)).toEqual([
      'still-mug-1',
      'still-mug-2',
      'still-mug-3',
      'still-mug-4',
    ]);

    const first = await env.run(['run', file, '--yes']);
    expect(first.code).toBe(4);
    expect(lastLine(first.stderr)).toBe(
      `mediabatch: 4 result(s) await review (4 task(s) wait for them): \`mediabatch review batch --state ${env.db}\` lists them to approve, reject or re-roll; then \`mediabatch run batch.yaml --run-id batch --state ${env.db}\` sends what was approved (or \`mediabatch run batch.yaml --run-id batch --state ${env.db} --wait-for-review\` waits for the decisions)`,
    );
    const afterStills = await sandboxState(env);
    expect(afterStills.jobs.map((j) => j.model)).toEqual(Array(4).fill('flat-image'));
    const stillPrice = (start - afterStills.balance) / 4;
    expect(stillPrice).toBeGreaterThan(0);
    expect(Object.values(taskStates(env)).filter((s) => s === 'pending')).toHaveLength(4);

    const listed = await env.run(['review', 'batch', '--json']);
    expect(listed.code).toBe(0);
    const awaiting = JSON.parse(listed.stdout) as { run: string; awaiting: Array<Record<string, unknown>> };
    expect(awaiting.run).toBe('batch');
    expect(awaiting.awaiting.map((a) => [a.taskId, a.attempt, a.downstreams])).toEqual([
      ['still-mug-1', 1, ['clip-mug-1']],
      ['still-mug-2', 1, ['clip-mug-2']],
      ['still-mug-3', 1, ['clip-mug-3']],
      ['still-mug-4', 1, ['clip-mug-4']],
    ]);
    const seen = awaiting.awaiting.find((a) => a.taskId === 'still-mug-2')?.version as number;

    // Running again before any decision sends nothing.
    const idle = await env.run(['run', file, '--yes']);
    expect(idle.code).toBe(4);
    expect((await sandboxState(env)).jobs).toHaveLength(4);
    expect((await env.run(['status', 'batch'])).stdout).toContain(
      `Review: 4 reviewed: 4 awaiting a decision (4 tasks wait for them), 0 approved, 0 rejected; \`mediabatch review batch --state ${env.db}\` lists them`,
    );
    expect(readFileSync(join(env.dir, 'out', 'batch', 'report.md'), 'utf8')).toContain(
      `- 4 results await review: \`mediabatch review batch --state ${env.db}\` lists them; approve, reject or re-roll`,
    );

    const decided = await env.run([
      'review',
      'batch',
      '--approve',
      'still-mug-2',
      '--reject',
      'still-mug-3',
      '--note',
      'blurry handle',
      '--json',
    ]);
    expect(decided.stderr).toBe('');
    expect(decided.code).toBe(0);
    const outcomes = (JSON.parse(decided.stdout) as { outcomes: Array<Record<string, unknown>> }).outcomes;
    expect(outcomes.map((o) => [o.taskId, o.ok, o.verdict])).toEqual([
      ['still-mug-2', true, 'approve'],
      ['still-mug-3', true, 'reject'],
    ]);

    const second = await env.run(['run', file, '--yes']);
    expect(second.code).toBe(4);
    expect(lastLine(second.stderr)).toMatch(
      /^mediabatch: 2 result\(s\) await review \(2 task\(s\) wait for them\)/,
    );
    const afterClip = await sandboxState(env);
    expect(afterClip.jobs.map((j) => j.model)).toEqual([...Array(4).fill('flat-image'), 'studio-2-6']);
    const [clipRow] = env.query<{ img_uuid: string }>(
      "SELECT img_uuid FROM tasks WHERE task_id = 'clip-mug-2'",
    );
    expect(afterClip.jobs[4]?.img_uuid).toBe(clipRow?.img_uuid);
    expect(taskStates(env)).toMatchObject({
      'clip-mug-1': 'pending',
      'clip-mug-2': 'done',
      'clip-mug-3': 'skipped',
      'clip-mug-4': 'pending',
    });
    const [skipped] = env.query<{ error: string }>("SELECT error FROM tasks WHERE task_id = 'clip-mug-3'");
    expect(skipped?.error).toMatch(
      /^waits for still-mug-3, whose result was rejected by .+ \("blurry handle"\): never submitted, nothing charged/,
    );

    // A decision taken on what a person saw before the approval is refused, with what changed.
    const store = openStore(env.db);
    try {
      const [stale] = await decide(store, 'batch', ['still-mug-2'], 'reject', { expectedVersion: seen });
      expect(stale?.ok).toBe(false);
      expect(stale?.ok === false && stale.reason).toMatch(
        new RegExp(
          `^still-mug-2 changed since you looked \\(version ${seen}, now ${seen + 1}\\): approved by .+ at .+; its result \\(attempt 1\\) is approved; look again and decide anew$`,
        ),
      );
      expect(listAwaiting(store, 'batch').map((a) => a.taskId)).toEqual(['still-mug-1', 'still-mug-4']);
    } finally {
      store.close();
    }

    await env.run(['review', 'batch', '--reject', 'still-mug-1,still-mug-4']);
    const last = await env.run(['run', file, '--yes']);
    expect(last.code).toBe(0);
    expect((await sandboxState(env)).jobs).toHaveLength(5);

    // The report, the CSV, the gallery and status carry the decisions.
    const runDir = join(env.dir, 'out', 'batch');
    const report = JSON.parse(readFileSync(join(runDir, 'report.json'), 'utf8')) as {
      review: Record<string, unknown>;
      tasks: Array<{
        id: string;
        status: string;
        review?: { status: string; decisions: Array<Record<string, unknown>> };
      }>;
    };
    expect(report.review).toMatchObject({ reviewed: 4, awaiting: 0, approved: 1, rejected: 3 });
    const byId = new Map(report.tasks.map((t) => [t.id, t]));
    expect(byId.get('still-mug-2')?.review?.status).toBe('approved');
    expect(byId.get('still-mug-3')?.review?.decisions).toEqual([
      expect.objectContaining({ verdict: 'reject', attempt: 1, note: 'blurry handle' }),
    ]);
    expect(byId.get('clip-mug-3')?.status).toBe('skipped');
    expect(byId.get('clip-mug-3')?.review).toBeUndefined();
    const csv = readFileSync(join(runDir, 'report.csv'), 'utf8').split('\r\n');
    expect(csv[0]).toMatch(/,review,attempt$/);
    expect(csv.find((l) => l.startsWith('still-mug-2,'))).toMatch(/,approved,1$/);
    expect(csv.find((l) => l.startsWith('clip-mug-2,'))).toMatch(/,,$/);
    expect(readFileSync(join(runDir, 'report.md'), 'utf8')).toContain(
      '- 4 reviewed tasks: 0 awaiting a decision, 1 approved, 3 rejected.',
    );
    const gallery = readFileSync(join(runDir, 'index.html'), 'utf8');
    expect(gallery).toContain('"rv":{"s":"approved","a":1');
    expect(gallery).toContain('"note":"blurry handle"');
    const status = await env.run(['status', 'batch', '--json']);
    expect(JSON.parse(status.stdout).review).toMatchObject({ reviewed: 4, approved: 1, rejected: 3 });
    expect((await env.run(['status', 'batch'])).stdout).toContain(
      'Review: 4 reviewed: 0 awaiting a decision, 1 approved, 3 rejected',
    );
  });

  it('re-rolls once per ask, keeps the earlier result, and refuses a re-roll over the budget before sending', async () => {
    env = await makeRunEnv();
    const tasks: TaskDecl[] = [
      { id: 'still', model: 'flat-image', review: true, input: { prompt: 'a mug' } },
    ];
    const start = (await sandboxState(env)).balance;
    const file = await env.manifest({ tasks, budget: 100 });
    expect((await env.run(['run', file, '--yes'])).code).toBe(4);
    const price = Math.round((start - (await sandboxState(env)).balance) * 1e6) / 1e6;
    const runDir = join(env.dir, 'out', 'batch');
    const firstFiles = await env.files('out/batch/still');

    const asked = await env.run(['review', 'batch', '--reroll', 'still', '--yes', '--note', 'too dark']);
    expect(asked.stderr).toBe('');
    expect(asked.stdout).toBe(
      `re-rolled still\nThen: \`mediabatch run batch.yaml --run-id batch --state ${env.db}\` sends the 1 pending task(s) (a run going now picks them up itself).\n`,
    );
    // Recorded, not sent: the next run sends it.
    expect((await sandboxState(env)).jobs).toHaveLength(1);
    expect(await env.files('out/batch/still')).toEqual(firstFiles.map((f) => `attempt-1/${f}`));

    expect((await env.run(['run', file, '--yes'])).code).toBe(4);
    const after = await sandboxState(env);
    expect(after.jobs).toHaveLength(2);
    expect(start - after.balance).toBeCloseTo(2 * price, 9);
    expect(existsSync(join(runDir, 'still', 'attempt-1', '1.png'))).toBe(true);
    expect(existsSync(join(runDir, 'still', '1.png'))).toBe(true);
    expect(env.query('SELECT kind, reroll FROM ledger ORDER BY id')).toEqual([
      { kind: 'charge', reroll: 0 },
      { kind: 'charge', reroll: 1 },
    ]);
    const report = JSON.parse(readFileSync(join(runDir, 'report.json'), 'utf8')) as {
      review: { rerolls: Record<string, number> };
      totals: { charged: { tokens: number } };
    };
    expect(report.review.rerolls).toEqual({ asked: 1, jobs: 1, charged: price, refunded: 0, net: price });
    expect(report.totals.charged.tokens).toBeCloseTo(2 * price, 9);
    // Running again charges nothing more: one charge per ask.
    expect((await env.run(['run', file, '--yes'])).code).toBe(4);
    expect((await sandboxState(env)).jobs).toHaveLength(2);

    // Nobody at a terminal, no --yes: not asked, nothing re-rolled.
    const unasked = await env.run(['review', 'batch', '--reroll', 'still']);
    expect(unasked.code).toBe(3);
    // At a terminal: asked with the price and what the budget leaves; no is no.
    let question = '';
    const declined = await env.run(['review', 'batch', '--reroll', 'still'], {
      ask: async (q) => {
        question = q;
        return false;
      },
    });
    expect(declined.code).toBe(3);
    // Its own price, the run's worst case before and after (nothing else pending), what the budget leaves.
    const t = (n: number) => Number(n.toFixed(6));
    expect(question).toBe(
      `Re-roll 1 result(s): up to ${t(price)} tokens for the re-roll; the run's worst case goes from ${t(2 * price)} to ${t(3 * price)} tokens; the budget of 100 tokens leaves ${t(100 - 3 * price)} tokens after it. Re-roll? [y/N] `,
    );
    expect(lastLine(declined.stderr)).toBe('mediabatch: not confirmed; nothing was re-rolled');
    // Over the budget: refused before anything is recorded or sent.
    const tight = await env.manifest({ tasks, budget: 2 * price + price / 2 });
    expect(tight).toBe(file);
    const store = openStore(env.db);
    store.runs.updateRunSettings('batch', {
      ...(store.runs.getRun('batch')?.settings as object),
      budget: 2 * price + price / 2,
    });
    store.close();
    const over = await env.run(['review', 'batch', '--reroll', 'still', '--yes']);
    expect(over.code).toBe(3);
    expect(lastLine(over.stderr)).toBe(
      `mediabatch: re-rolling 1 task(s) may cost up to ${t(price)} tokens and the budget of ${t(2 * price + price / 2)} tokens leaves ${t(price / 2)} tokens: nothing was sent; raise budget in the manifest to re-roll`,
    );
    expect(env.query('SELECT verdict FROM decisions ORDER BY id')).toEqual([{ verdict: 'reroll' }]);
    expect((await sandboxState(env)).jobs).toHaveLength(2);
  });

  it('a running run --wait-for-review picks up a re-roll and approvals without restarting', async () => {
    env = await makeRunEnv();
    const e = env;
    const file = await env.manifest({ tasks: VARIANTS, concurrency: 8 });
    const running = env.run(['run', file, '--yes', '--wait-for-review']);
    const awaitingIs = async (n: number, attempt: number) => {
      for (let i = 0; i < 400; i++) {
        const rows = e.query<{ n: number }>(
          "SELECT count(*) AS n FROM tasks WHERE review = 1 AND state = 'done' AND verdict IS NULL AND attempt <= ?",
          attempt,
        );
        const more = e.query<{ n: number }>(
          "SELECT count(*) AS n FROM tasks WHERE attempt = ? AND state = 'done'",
          attempt,
        );
        if (rows[0]?.n === n && (more[0]?.n ?? 0) >= (attempt > 1 ? 1 : 0)) return;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`never ${n} awaiting review`);
    };
    await awaitingIs(4, 1);
    expect((await sandboxState(env)).jobs).toHaveLength(4);
    // A re-roll asked while the run waits is sent by that run, once; its new result awaits review.
    expect((await env.run(['review', 'batch', '--reroll', 'still-mug-1', '--yes'])).code).toBe(0);
    await awaitingIs(4, 2);
    const rerolled = await sandboxState(env);
    expect(rerolled.jobs.map((j) => j.model)).toEqual(Array(5).fill('flat-image'));
    expect((await env.run(['review', 'batch', '--approve', 'still-mug-1'])).code).toBe(0);
    expect((await env.run(['review', 'batch', '--reject', 'still-mug-[234]'])).code).toBe(0);
    const done = await running;
    expect(done.stderr).toBe('');
    expect(done.code).toBe(0);
    const jobs = (await sandboxState(env)).jobs;
    expect(jobs.map((j) => j.model)).toEqual([...Array(5).fill('flat-image'), 'studio-2-6']);
    // The clip took the re-rolled still (attempt 2), not the first one.
    const [still] = env.query<{ img_uuid: string }>(
      "SELECT img_uuid FROM tasks WHERE task_id = 'still-mug-1'",
    );
    expect(still?.img_uuid).toBe(jobs[4]?.img_uuid);
    const [clip] = env.query<{ body: string }>("SELECT body FROM tasks WHERE task_id = 'clip-mug-1'");
    const sheet = JSON.parse(
      readFileSync(join(env.dir, 'out', 'batch', 'still-mug-1', 'job.json'), 'utf8'),
    ) as { job: { json: Array<{ value: string }> } };
    const link = (url: unknown) => String(url).split('?')[0];
    expect(link(JSON.parse(clip?.body ?? '{}').image_url)).toBe(link(sheet.job.json[0]?.value));
    expect(existsSync(join(env.dir, 'out', 'batch', 'still-mug-1', 'attempt-1', 'job.json'))).toBe(true);
    expect(taskStates(env)['clip-mug-1']).toBe('done');
  });
});

requireBrowser();

describe.skipIf(SKIP_BROWSER)(`the gallery's review badges and filter in ${CHROMIUM}`, () => {
  it('badges each reviewed card with its decision and filters the ones awaiting review', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: VARIANTS, concurrency: 8 });
    expect((await env.run(['run', file, '--yes'])).code).toBe(4);
    await env.run(['review', 'batch', '--approve', 'still-mug-2']);
    await env.run(['review', 'batch', '--reject', 'still-mug-3', '--note', 'blurry handle']);
    expect((await env.run(['report', 'batch'])).code).toBe(0);
    const profile = await mkdtemp(join(tmpdir(), 'mediabatch-chromium-'));
    const browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    try {
      const page = await browser.newPage();
      await page.goto(pathToFileURL(join(env.dir, 'out', 'batch', 'index.html')).href);
      await page.waitForSelector('#grid .card');
      const badge = (id: string) => page.locator(`.card[data-id="${id}"] .badge.rv`);
      expect(await badge('still-mug-1').innerText()).toBe('awaiting review');
      expect(await badge('still-mug-2').innerText()).toBe('approved');
      expect(await badge('still-mug-3').innerText()).toBe('rejected');
      expect(await badge('still-mug-3').getAttribute('title')).toMatch(/^by .+: blurry handle$/);
      expect(await badge('clip-mug-1').count()).toBe(0);
      await page.locator('#f-status .chip[data-status="rv:awaiting"]').click();
      const shown = await page
        .locator('#grid .card')
        .evaluateAll((cards) => cards.map((c) => c.getAttribute('data-id')));
      expect(shown).toEqual(['still-mug-1', 'still-mug-4']);
      // Their downstreams, in the state of their own: a filter of its own.
      const waits = page.locator('#f-status .chip[data-status="awaiting_review"]');
      expect(await waits.innerText()).toMatch(/^waits for review\s*2$/);
      await waits.click();
      const waiting = await page
        .locator('#grid .card')
        .evaluateAll((cards) => cards.map((c) => c.getAttribute('data-id')));
      expect(waiting).toEqual(['clip-mug-1', 'clip-mug-4']);
    } finally {
      await browser.close();
      await rm(profile, { recursive: true, force: true });
    }
  });
});
