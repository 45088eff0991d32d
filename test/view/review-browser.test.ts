// Choosing results in Debian's chromium with the keyboard (approve, reject, re-roll). `run --view --wait-for-review` goes
// in its own process against a sandbox in a third; four reviewed variants each feed one clip. In the page:
// j/k move, a approves one, r rejects one, shift+R re-rolls one after its price and what the budget leaves
// are shown; only the approved variant's clip is submitted and charged (money from /_sandbox/state); the
// counters and the spend chart move; a second tab that had not caught up is refused with the reason;
// `review <run> --json` lists what the page's "awaiting review" filter shows; the run ends once all is decided.
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { type Browser, chromium, type Page } from 'playwright-core';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, requireBrowser, SKIP_BROWSER, screenshotPath } from '../helpers/browser.js';
import { type Child, spawnCli, spawnSandbox } from '../helpers/child.js';

requireBrowser();

declare const document: {
  querySelector(s: string): { textContent: string | null } | null;
  activeElement: { blur(): void } | null;
};

interface HTMLElement {
  dataset: Record<string, string | undefined>;
}

/** Keys go to the page, not to the filter just used. */
const blur = (p: Page) => p.evaluate(() => document.activeElement?.blur());

const KEY = 'view-review-key';
const SCREENSHOT = screenshotPath('view-review.png');
const MANIFEST = `version: 1
name: batch
concurrency: 4
budget: 400
output: out
tasks:
  - id: "still-{{product}}-{{index}}"
    model: flat-image
    matrix: { product: [mug] }
    repeat: 4
    review: true
    input: { prompt: "A {{product}}, variant {{index}}", ratio: "1:1" }
  - id: "clip-{{product}}-{{index}}"
    model: studio-2-6
    matrix: { product: [mug] }
    repeat: 4
    after: "still-{{product}}-{{index}}"
    input: { prompt: "turn", image_url: "{{after.image}}", duration: 5, resolution: 720p }
`;

let dir: string;
let db: string;
let sandbox: { child: Child; baseUrl: string };
let runner: Child;
let browser: Browser;
let page: Page;
let start: number;

interface SandboxState {
  balance: number;
  jobs: Array<{ model: string }>;
}

async function sandboxState(): Promise<SandboxState> {
  return (await (await request(`${sandbox.baseUrl}/_sandbox/state`)).body.json()) as SandboxState;
}

function rows<T>(sql: string): T[] {
  const conn = new Database(db, { readonly: true });
  try {
    return conn.prepare(sql).all() as T[];
  } finally {
    conn.close();
  }
}

const stateOf = (task: string) =>
  rows<{ state: string }>(`SELECT state FROM tasks WHERE task_id = '${task}'`)[0]?.state;

/** The number a review counter shows. */
function reviewCounter(p: Page, name: string): Promise<number> {
  return p.$eval(`#review-counters [data-review="${name}"] .n`, (el) => Number(el.textContent));
}

async function waitUntil(check: () => Promise<boolean> | boolean, what: string, ms = 20_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const statusText = (p: Page) => p.locator('#review-status').textContent();
/** The cards in the order the grid shows them. */
const order = (p: Page) =>
  p.$$eval('#grid .card', (els) => els.map((e) => (e as HTMLElement).dataset.task ?? ''));
const currentTask = (p: Page) => p.locator('#grid .card.current').getAttribute('data-task');

/** j or k until this card is the current one (the grid's order is whatever the server gave). */
async function moveTo(p: Page, task: string): Promise<void> {
  const ids = await order(p);
  const target = ids.indexOf(task);
  expect(target, task).toBeGreaterThanOrEqual(0);
  const current = (await p.locator('#grid .card.current').count()) > 0 ? await currentTask(p) : null;
  // With no current card yet, the first j lands on the first card.
  const from = current === null ? -1 : ids.indexOf(current);
  const key = target > from ? 'j' : 'k';
  for (let i = 0; i < Math.abs(target - from); i++) await p.keyboard.press(key);
  await expect.poll(() => currentTask(p), { timeout: 10_000 }).toBe(task);
}

/**
 * After a decision has been read back (its counter moved): the cards are where they were, the decided
 * one is still the current one and kept its place.
 */
async function expectInPlace(p: Page, before: string[], task: string): Promise<void> {
  expect(await order(p)).toEqual(before);
  expect(await currentTask(p)).toBe(task);
}
const awaitingIds = (p: Page) =>
  p.$$eval('#grid .card', (els) =>
    els.map((e) => `${(e as HTMLElement).dataset.task}@${(e as HTMLElement).dataset.version}`),
  );

describe.skipIf(SKIP_BROWSER)('choosing results in chromium, with the keyboard', () => {
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mb-view-review-'));
    db = join(dir, 'state.db');
    await writeFile(join(dir, 'batch.yaml'), MANIFEST);
    sandbox = await spawnSandbox(['--api-key', KEY, '--speed', '0.2']);
    start = (await sandboxState()).balance;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    page.on('pageerror', (e) => {
      throw e;
    });
  }, 60_000);

  afterAll(async () => {
    runner?.proc.kill('SIGKILL');
    sandbox?.child.proc.kill('SIGKILL');
    await browser?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('approves, rejects and re-rolls with keys; only the approved variant goes on and is charged', async () => {
    runner = spawnCli(
      ['--state', db, 'run', 'batch.yaml', '--yes', '--view', '--wait-for-review', '--retries', '0'],
      {
        cwd: dir,
        env: { MEDIABATCH_API_KEY: KEY, MEDIABATCH_BASE_URL: sandbox.baseUrl, MEDIABATCH_POLL_SCALE: '0.2' },
      },
    );
    expect(await runner.waitFor('\n')).toBe(true);
    const url = /^View: (\S+)$/m.exec(runner.stdout())?.[1] ?? '';
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=/);
    await page.goto(url);
    await page.waitForSelector('main[data-ready="run"]');
    await page.waitForFunction(
      () => document.querySelector('#review-counters [data-review="awaiting"] .n')?.textContent === '4',
      undefined,
      { timeout: 30_000 },
    );
    // Nothing downstream is submitted nor charged before a decision.
    const stills = await sandboxState();
    expect(stills.jobs.map((j) => j.model)).toEqual(Array(4).fill('flat-image'));
    const spendBefore = await page.$eval('#spend-chart', (el) => Number((el as HTMLElement).dataset.last));

    await page.selectOption('#filters select[name="review"]', 'awaiting');
    await page.selectOption('#filters select[name="order"]', 'id');
    await waitUntil(async () => (await awaitingIds(page)).length === 4, 'four awaiting cards');

    // `review <run> --json` lists exactly what the page's filter shows, versions included.
    const cli = spawnCli(['--state', db, 'review', 'batch', '--json'], { cwd: dir, env: {} });
    expect(await cli.exited).toBe(0);
    const listed = JSON.parse(cli.stdout()) as {
      awaiting: Array<{ taskId: string; version: number; rerollPrice: number }>;
    };
    expect(await awaitingIds(page)).toEqual(listed.awaiting.map((a) => `${a.taskId}@${a.version}`));

    // A second tab, open on still-mug-4's page, that hears no live events (it has not caught up).
    const other = await browser.newPage();
    await other.route('**/api/events', (route) => route.abort());
    await other.goto(url);
    // The run page first (its reads finish before the next page is asked for), then the task's page.
    await other.waitForSelector('main[data-ready="run"]');
    await other.goto(new URL('/#/run/batch/task/still-mug-4', url).href);
    await other.waitForSelector('main[data-ready="task"]');
    expect(await other.locator('#task').getAttribute('data-version')).not.toBeNull();

    // The decisions in the grid's own order (newest first, every task): the order a person sees first.
    await page.selectOption('#filters select[name="review"]', '');
    // The grid is read once the page has the newest-first answer: the earlier lists' eight cards would
    // otherwise pass for it on a slow machine, and "before" would be an order the page then leaves.
    const newest = page.waitForResponse(
      (r) => r.url().includes('/tasks?') && r.url().includes('order=newest'),
    );
    await page.selectOption('#filters select[name="order"]', 'newest');
    await newest;
    await waitUntil(async () => (await order(page)).length === 8, 'eight cards');
    await waitUntil(async () => (await order(page))[0]?.startsWith('still-') === true, 'newest first');
    await blur(page);
    const before = await order(page);
    await moveTo(page, 'still-mug-1');
    await page.locator('#results').screenshot({ path: SCREENSHOT });
    await page.keyboard.press('a');
    await expect.poll(() => statusText(page), { timeout: 10_000 }).toBe('still-mug-1: approved');
    await expect.poll(() => reviewCounter(page, 'approved'), { timeout: 5000 }).toBe(1);
    await expectInPlace(page, before, 'still-mug-1');
    expect(await page.getAttribute('#grid .card[data-task="still-mug-1"]', 'data-review')).toBe('approved');

    await moveTo(page, 'still-mug-2');
    await page.keyboard.press('r');
    await expect.poll(() => statusText(page), { timeout: 10_000 }).toBe('still-mug-2: rejected');
    // Its clip is skipped (it finishes, which would put it first in "newest first"): it stays in place.
    await waitUntil(() => stateOf('clip-mug-2') === 'skipped', 'clip-mug-2 skipped');
    await expect.poll(() => reviewCounter(page, 'rejected'), { timeout: 5000 }).toBe(1);
    await expect
      .poll(() => page.getAttribute('#grid .card[data-task="clip-mug-2"]', 'data-state'), { timeout: 5000 })
      .toBe('skipped');
    await expectInPlace(page, before, 'still-mug-2');

    await moveTo(page, 'still-mug-3');
    await page.keyboard.press('Shift+R');
    const price = page.locator('#reroll-price');
    await price.waitFor();
    const priced = listed.awaiting.find((a) => a.taskId === 'still-mug-3')?.rerollPrice ?? -1;
    expect(Number(await price.getAttribute('data-total'))).toBe(priced);
    expect(await price.textContent()).toMatch(
      /^Re-roll 1 result\(s\): up to [\d.,]+ tokens for the re-roll(?: and 1 downstream task\(s\) priced again \(up to [\d.,]+ tokens more\))?; the run's worst case goes from [\d.,]+ to [\d.,]+ tokens; the budget of 400 tokens leaves [\d.,]+ tokens after it\.$/,
    );
    // The real folder the first result is kept in, as it will be on disk.
    expect(await page.locator('#reroll-kept').textContent()).toBe(
      `A re-roll is a second charge: the earlier result is kept in ${join(dir, 'out', 'batch', 'still-mug-3', 'attempt-1')}/.`,
    );
    await page.keyboard.press('Enter');
    await expect.poll(() => statusText(page), { timeout: 10_000 }).toBe('still-mug-3: re-roll asked for');
    await expect.poll(() => reviewCounter(page, 'rerolls'), { timeout: 5000 }).toBe(1);
    await expectInPlace(page, before, 'still-mug-3');

    // Only the approved variant's clip is submitted, and charged; the rejected one's is skipped.
    await waitUntil(() => stateOf('clip-mug-1') === 'done', 'clip-mug-1 done', 30_000);
    expect(stateOf('clip-mug-2')).toBe('skipped');
    await waitUntil(async () => (await sandboxState()).jobs.length === 6, 'the clip and the re-roll', 30_000);
    const after = await sandboxState();
    expect(after.jobs.map((j) => j.model).sort()).toEqual([...Array(5).fill('flat-image'), 'studio-2-6']);
    const charged = rows<{ task_id: string; tokens: number }>(
      "SELECT task_id, sum(tokens) AS tokens FROM ledger WHERE kind = 'charge' GROUP BY task_id ORDER BY task_id",
    );
    expect(charged.map((c) => c.task_id)).toEqual([
      'clip-mug-1',
      'still-mug-1',
      'still-mug-2',
      'still-mug-3',
      'still-mug-4',
    ]);
    const total = charged.reduce((n, c) => n + c.tokens, 0);
    expect(start - after.balance).toBeCloseTo(total, 6);

    // The counters and the spend chart moved without a reload.
    await expect.poll(() => reviewCounter(page, 'approved'), { timeout: 5000 }).toBe(1);
    await expect.poll(() => reviewCounter(page, 'rejected'), { timeout: 5000 }).toBe(1);
    await expect.poll(() => reviewCounter(page, 'rerolls'), { timeout: 5000 }).toBe(1);
    await expect
      .poll(() => page.$eval('#spend-chart', (el) => Number((el as HTMLElement).dataset.last)), {
        timeout: 5000,
      })
      .toBeGreaterThan(spendBefore);

    // Two tabs on still-mug-4: this one rejects it; the tab that did not catch up approves, and is refused.
    await moveTo(page, 'still-mug-4');
    await page.keyboard.press('r');
    await expect.poll(() => statusText(page), { timeout: 10_000 }).toBe('still-mug-4: rejected');
    await blur(other);
    await other.keyboard.press('a');
    await expect.poll(() => other.locator('#review-status').getAttribute('data-kind')).toBe('refused');
    const reason = await statusText(other);
    expect(reason).toMatch(/^still-mug-4: refused: /);
    expect(rows<{ verdict: string }>("SELECT verdict FROM tasks WHERE task_id = 'still-mug-4'")).toEqual([
      { verdict: 'rejected' },
    ]);
    await other.close();

    // The re-rolled variant comes back to be chosen again; rejecting it leaves nothing to decide: the run ends.
    // Redrawn where it was, awaiting review again on its second attempt.
    await expect
      .poll(() => page.getAttribute('#grid .card[data-task="still-mug-3"]', 'data-attempt'), {
        timeout: 30_000,
      })
      .toBe('2');
    expect(await page.getAttribute('#grid .card[data-task="still-mug-3"]', 'data-review')).toBe('awaiting');
    expect(await order(page)).toEqual(before);
    await moveTo(page, 'still-mug-3');
    // In bulk this time: x selects it, the bar above the grid rejects the selection with its note.
    await page.keyboard.press('x');
    await expect
      .poll(() => page.locator('#selected-count').textContent(), { timeout: 10_000 })
      .toBe('1 selected');
    await page.fill('#bulk input.note', 'the handle again');
    await page.click('#bulk button.v-reject');
    await expect.poll(() => statusText(page), { timeout: 10_000 }).toBe('still-mug-3: rejected');
    expect(
      rows<{ verdict: string; note: string; attempt: number }>(
        "SELECT verdict, note, attempt FROM decisions WHERE task_id = 'still-mug-3' ORDER BY id",
      ),
    ).toEqual([
      { verdict: 'reroll', note: null, attempt: 1 },
      { verdict: 'reject', note: 'the handle again', attempt: 2 },
    ]);
    expect(await runner.exited).toBe(0);
    // The re-rolled variant's first result is kept beside the new one.
    const kept = await readdir(join(dir, 'out', 'batch', 'still-mug-3', 'attempt-1'));
    expect(kept.some((name) => name.endsWith('.png'))).toBe(true);
    const end = await sandboxState();
    expect(end.jobs.map((j) => j.model).filter((m) => m === 'studio-2-6')).toHaveLength(1);
    expect(stateOf('clip-mug-3')).toBe('skipped');
    expect(stateOf('clip-mug-4')).toBe('skipped');
  }, 180_000);
});
