// The view in Debian's chromium while a real run goes in another process against a sandbox in a third:
// the run appears on the runs list, counters, charts and result cards move without a reload, failures
// are grouped by reason, the in-doubt advice shows, filters and the task page work, the video plays.
// Its screenshot is README's docs/images/view.png (`npm run screenshots` writes it there).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { startView, type ViewServer } from '../../src/view/server.js';
import { CHROMIUM, requireBrowser, SKIP_BROWSER, screenshotPath } from '../helpers/browser.js';
import { type Child, spawnCli, spawnSandbox } from '../helpers/child.js';

requireBrowser();

// The callbacks below run in the page: the browser's globals, typed as far as these tests use them.
declare const window: { marker?: number; scrollTo(x: number, y: number): void };
declare function fetch(url: string): Promise<{ json(): Promise<unknown> }>;
/** A card the test marked (an expando: a card drawn again loses it). */
type Marked = HTMLElement & { seen?: number };
declare const document: {
  querySelector(s: string): HTMLElement | null;
  querySelectorAll(s: string): { length: number };
};
interface HTMLElement {
  dataset: Record<string, string | undefined>;
  textContent: string | null;
}
interface HTMLVideoElement extends HTMLElement {
  muted: boolean;
  preload: string;
  readyState: number;
  error: { code: number } | null;
  load(): void;
  addEventListener(type: string, listener: () => void, opts?: { once: boolean }): void;
}

const SCREENSHOT = screenshotPath('view.png');
const KEY = 'view-browser-key';
const MANIFEST = `version: 1
name: batch
concurrency: 3
budget: 40
output: out
tasks:
  - id: "img-{{index}}"
    model: flat-image
    repeat: 18
    input: { prompt: "A studio photo of an Acme mug, number {{index}}", ratio: "1:1" }
  - id: broken-1
    model: flat-image
    input: { prompt: "SANDBOX_FAIL on purpose", ratio: "1:1" }
  - id: broken-2
    model: flat-image
    input: { prompt: "SANDBOX_FAIL again", ratio: "1:1" }
  - id: clip
    model: flow22_spicy
    input: { prompt: "A slow dolly shot across Acme mugs", resolution: 480p }
`;

let dir: string;
let db: string;
let view: ViewServer;
let sandbox: { child: Child; baseUrl: string };
let runner: Child;
let browser: Browser;
let page: Page;

function count(sql: string): number {
  const conn = new Database(db, { readonly: true });
  try {
    return (conn.prepare(sql).pluck().get() as number) ?? 0;
  } finally {
    conn.close();
  }
}

/** The number a counter shows (0 when the counter is not on the page). */
function counter(state: string): Promise<number> {
  return page.$eval(`#counters [data-state="${state}"] .n`, (el) => Number(el.textContent)).catch(() => 0);
}

describe.skipIf(SKIP_BROWSER)('mediabatch view in chromium, live', () => {
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mb-view-browser-'));
    db = join(dir, 'state.db');
    await writeFile(join(dir, 'batch.yaml'), MANIFEST);
    openStore(db).close();
    view = await startView({ stateFile: db, cwd: dir });
    sandbox = await spawnSandbox([
      '--api-key',
      KEY,
      '--speed',
      '0.2',
      '--charge-then-error-rate',
      '0.25',
      '--seed',
      '3',
    ]);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--autoplay-policy=no-user-gesture-required',
      ],
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
    await view?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('shows the run appear and move while it goes, with no reload', async () => {
    await page.goto(view.url);
    expect(new URL(page.url()).search).toBe('');
    await page.waitForSelector('#runs');
    await page.evaluate(() => {
      window.marker = 1;
    });
    runner = spawnCli(['--state', db, 'run', 'batch.yaml', '--yes', '--retries', '0'], {
      cwd: dir,
      env: { MEDIABATCH_API_KEY: KEY, MEDIABATCH_BASE_URL: sandbox.baseUrl, MEDIABATCH_POLL_SCALE: '0.2' },
    });
    // The runs list gains the run by itself; the keyboard opens it (Tab to the link, Enter).
    const link = page.locator('#runs a[href="#/run/batch"]');
    await link.waitFor({ timeout: 15_000 });
    await link.focus();
    await page.keyboard.press('Enter');
    await page.waitForSelector('main[data-ready="run"]');
    // Every read of the run's JSON while it goes: the page must stay calm (at most one every ~2 s).
    const reads: number[] = [];
    // Times as the browser started each request (not as this process heard of it, which lags under load).
    page.on('requestfinished', (r) => {
      if (new URL(r.url()).pathname === '/api/runs/batch') reads.push(r.timing().startTime);
    });
    let marked: string | undefined;

    const seen = { done: new Set<number>(), points: new Set<string>(), cards: new Set<string>() };
    const look = async () => {
      seen.done.add(await counter('done'));
      seen.points.add(await page.$eval('#spend-chart', (el) => `${(el as HTMLElement).dataset.last}`));
      // Result cards gain their image or video as results land.
      seen.cards.add(String(await page.locator('#grid .card .media > *').count()));
      // A finished card, marked once: it is not drawn again while the other results land.
      marked ??= await page
        .$eval('#grid .card[data-state="done"]', (el) => {
          (el as Marked).seen = 1;
          return el.dataset.task;
        })
        .catch(() => undefined);
    };
    const order = () => page.$$eval('#grid .card', (els) => els.map((e) => (e as HTMLElement).dataset.task));
    let engaged: Array<string | undefined> | undefined;
    while (runner.proc.exitCode === null) {
      await look();
      // Once a result is in, the reader starts on the grid (j): from then on no card moves by itself.
      if (engaged === undefined && marked !== undefined) {
        await page.keyboard.press('j');
        await page.waitForSelector('#grid .card.current');
        engaged = await order();
      }
      await page.waitForTimeout(200);
    }
    await runner.exited;
    // The end reaches the page within a second or so of the last commit.
    const done = count("SELECT count(*) FROM tasks WHERE state = 'done'");
    await page.waitForFunction(
      (n) => Number(document.querySelector('#counters [data-state="done"] .n')?.textContent) === n,
      done,
      { timeout: 3000 },
    );
    await look();
    // The run's badge follows its state live, colour included (its class names the state).
    await page.waitForFunction(
      () => document.querySelector('#run-state')?.textContent === 'finished',
      undefined,
      {
        timeout: 5000,
      },
    );
    expect(await page.getAttribute('#run-state', 'class')).toBe('state r-finished');
    expect(await page.evaluate(() => window.marker)).toBe(1);
    // Several distinct values seen while it went: it moved, not only at the end.
    expect(seen.done.size).toBeGreaterThanOrEqual(3);
    expect(seen.points.size).toBeGreaterThanOrEqual(3);
    expect(seen.cards.size).toBeGreaterThanOrEqual(3);
    expect(marked).toBeDefined();
    expect(await page.$eval(`#grid .card[data-task="${marked}"]`, (el) => (el as Marked).seen ?? 0)).toBe(1);
    // Newest first, the results that finished since moved on the server; on the page they stayed put, and
    // the button says so; pressed, it shows the server's order.
    expect(await order()).toEqual(engaged);
    const served = (await page.evaluate(() => fetch('/api/runs/batch/tasks').then((r) => r.json()))) as {
      tasks: Array<{ id: string }>;
    };
    const serverOrder = served.tasks.map((t) => t.id);
    expect(serverOrder).not.toEqual(engaged);
    await expect.poll(() => page.locator('#grid-news').isVisible(), { timeout: 5000 }).toBe(true);
    expect(await page.textContent('#grid-news')).toMatch(
      /^\d+ new or moved result\(s\): show them in order$/,
    );
    await page.click('#grid-news');
    await expect.poll(order, { timeout: 5000 }).toEqual(serverOrder);
    reads.sort((x, y) => x - y);
    const gaps = reads.slice(1).map((t, i) => t - (reads[i] ?? 0));
    expect(reads.length).toBeGreaterThanOrEqual(2);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(1900);
    // The charts follow within a second (they are read again after the counters move).
    const finished = count('SELECT count(*) FROM tasks WHERE finished_at IS NOT NULL');
    await page.waitForFunction(
      (n) => (document.querySelector('#finished-chart') as HTMLElement | null)?.dataset.last === String(n),
      finished,
      { timeout: 3000 },
    );
  }, 120_000);

  it('groups failures by reason and shows the in-doubt advice', async () => {
    const failedRow = page.locator('#failures tr', { hasText: 'the job failed' });
    await expect(failedRow.locator('.count').textContent()).resolves.toBe('2');
    expect(await failedRow.locator('a').allTextContents()).toEqual(['broken-1', 'broken-2']);
    const inDoubt = count("SELECT count(*) FROM tasks WHERE state = 'in_doubt'");
    expect(inDoubt).toBeGreaterThan(0);
    const advice = await page.locator('#in-doubt .in-doubt').textContent();
    expect(advice).toContain(`${inDoubt} task(s) in doubt`);
    expect(advice).toContain('--retry-in-doubt');
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: SCREENSHOT });
  });

  it('filters the results by model, state and text on the server', async () => {
    const ids = () => page.$$eval('#grid .card', (els) => els.map((e) => (e as HTMLElement).dataset.task));
    await page.selectOption('#filters select[name="model"]', 'flow22_spicy');
    await page.waitForFunction(() => document.querySelectorAll('#grid .card').length === 1);
    expect(await ids()).toEqual(['clip']);
    await page.selectOption('#filters select[name="model"]', '');
    await page.selectOption('#filters select[name="state"]', 'failed');
    await page.waitForFunction(() => document.querySelectorAll('#grid .card').length === 2);
    expect((await ids()).sort()).toEqual(['broken-1', 'broken-2']);
    await page.selectOption('#filters select[name="state"]', '');
    await page.fill('#filters input[name="q"]', 'number 17');
    await page.waitForFunction(() => document.querySelectorAll('#grid .card').length === 1);
    expect(await ids()).toEqual(['img-17']);
    await page.fill('#filters input[name="q"]', '');
    await page.waitForFunction(() => document.querySelectorAll('#grid .card').length > 2);
  });

  it('shows the last filter asked for when an earlier one answers after it', async () => {
    const count = () => page.$$eval('#grid .card', (els) => els.length);
    // The one-model filter's answer is held back until the next filter has answered and been drawn.
    let release = (): void => undefined;
    const held = new Promise<void>((r) => (release = r));
    await page.route('**/tasks?*model=flow22_spicy*', async (route) => {
      await held;
      await route.continue();
    });
    const slow = page.waitForResponse((r) => r.url().includes('model=flow22_spicy'));
    await page.selectOption('#filters select[name="model"]', 'flow22_spicy');
    const all = page.waitForResponse((r) => r.url().includes('/tasks?') && !r.url().includes('model='));
    await page.selectOption('#filters select[name="model"]', '');
    await all;
    await page.waitForFunction(() => document.querySelectorAll('#grid .card').length > 2);
    const shown = await count();
    release();
    await slow;
    // A moment later the late answer has had every chance to be drawn.
    await page.waitForTimeout(300);
    expect(await count()).toBe(shown);
    expect(await page.inputValue('#filters select[name="model"]')).toBe('');
    await page.unroute('**/tasks?*model=flow22_spicy*');
  });

  it('plays the video of a result', async () => {
    const state = await page.$eval('#grid .card[data-task="clip"] video', async (el) => {
      const v = el as HTMLVideoElement;
      v.muted = true;
      v.preload = 'auto';
      const ready = new Promise<string>((resolve) => {
        v.addEventListener('canplay', () => resolve('canplay'), { once: true });
        v.addEventListener('error', () => resolve(`error ${v.error?.code}`), { once: true });
        setTimeout(() => resolve(`timeout at readyState ${v.readyState}`), 8000);
      });
      v.load();
      return v.readyState >= 3 ? 'ready' : await ready;
    });
    expect(['canplay', 'ready']).toContain(state);
    expect(
      await page.$eval('#grid .card[data-task="clip"] video', (el) => (el as HTMLVideoElement).readyState),
    ).toBeGreaterThanOrEqual(3);
  });

  it('opens a task page with the request, attempts, ledger and files', async () => {
    await page.locator('#grid .card[data-task="clip"] h3 a').click();
    await page.waitForSelector('main[data-ready="task"]');
    expect(await page.textContent('#request')).toContain('A slow dolly shot across Acme mugs');
    const body = await page.textContent('#task');
    expect(body).toContain('Attempts');
    expect(body).toContain('charge');
    expect(body).toContain('1.mp4');
    expect(await page.textContent('#task-state')).toBe('done');
  });
});
