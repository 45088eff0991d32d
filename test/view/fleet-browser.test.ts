// The fleet's page in Debian's chromium, at a phone's width: `view` over a PostgreSQL state while three
// workers (`mediabatch run … --state postgres://…`, each its own process) drive one run. The run's
// counters move without a reload, the workers panel lists the three, and the one killed with SIGKILL is
// marked lost; the page never scrolls sideways. When the database then goes away the page says so, and
// clears it when it is back. Its screenshot is docs/images/view-workers.png (`npm run screenshots`).
import { hostname } from 'node:os';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/index.js';
import { startView, type ViewServer } from '../../src/view/server.js';
import { CHROMIUM, requireBrowser, SKIP_BROWSER, screenshotPath } from '../helpers/browser.js';
import type { Child } from '../helpers/child.js';
import { spawnWorker } from '../helpers/fleet.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';
import { images, makeRunEnv, type RunEnv } from '../helpers/run-env.js';

requireBrowser();

declare const document: {
  scrollingElement: { scrollWidth: number } | null;
  querySelector(s: string): { textContent: string | null } | null;
};

const WIDTH = 390;
const TASKS = 48;

let pg: Postgres;
let env: RunEnv;
let url: string;
let view: ViewServer;
let browser: Browser;
let page: Page;
let store: Store;
const workers: Child[] = [];

const doneShown = (p: Page) =>
  p.evaluate(() =>
    Number((document.querySelector('.counter.s-done .n')?.textContent ?? '').replace(/,/g, '')),
  );

describe.skipIf(SKIP_BROWSER)('the view of a fleet over PostgreSQL', () => {
  beforeAll(async () => {
    pg = await startPostgres();
    // Each request of the run waits a little at the sandbox: the run takes seconds, not milliseconds.
    env = await makeRunEnv({ speed: 0.1, latencyMs: 150 });
    url = pg.freshDatabase();
    store = openStore(url);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  }, 120_000);

  afterAll(async () => {
    for (const w of workers) if (w.proc.exitCode === null) w.proc.kill('SIGKILL');
    await browser?.close();
    await view?.close();
    store?.close();
    await env?.close();
    pg?.stop();
  });

  it('moves the counters while three workers run, lists them and marks the one killed lost', {
    timeout: 180_000,
  }, async () => {
    const file = await env.manifest({ name: 'fleet', concurrency: 2, tasks: images(TASKS) });
    const worker = () => {
      const child = spawnWorker(env, url, file);
      workers.push(child);
      return child;
    };
    // The first plans and checks the run; the two others join it once it is there.
    worker();
    await expect.poll(() => store.workers.list('fleet').length, { timeout: 60_000 }).toBeGreaterThan(0);
    worker();
    worker();

    view = await startView({ stateFile: url, cwd: env.dir, run: 'fleet' });
    page = await browser.newPage({
      viewport: { width: WIDTH, height: 844 },
      isMobile: true,
      hasTouch: true,
    });
    page.on('pageerror', (e) => {
      throw e;
    });
    await page.goto(view.url);
    await page.waitForSelector('main[data-ready="run"]');

    // The counters move while the run goes: a later count than the first one shown, no reload.
    await page.waitForFunction(
      () => {
        const n = Number((document.querySelector('.counter.s-done .n')?.textContent ?? '').replace(/,/g, ''));
        return n > 0;
      },
      undefined,
      { timeout: 30_000 },
    );
    const first = await doneShown(page);
    expect(first).toBeLessThan(TASKS);
    await page.waitForFunction(
      (seen) =>
        Number((document.querySelector('.counter.s-done .n')?.textContent ?? '').replace(/,/g, '')) > seen,
      first,
      { timeout: 30_000 },
    );

    const working = page.locator('#workers tr[data-state="working"]');
    await expect.poll(() => working.count(), { timeout: 60_000 }).toBe(3);
    expect(await page.locator('#workers .host').allTextContents()).toEqual([
      hostname(),
      hostname(),
      hostname(),
    ]);

    // kill -9 of a worker: no goodbye, no more heartbeats; the page marks it lost (its pid is gone
    // from this machine; elsewhere, once its heartbeat runs out).
    const victim = workers[1];
    victim?.proc.kill('SIGKILL');
    expect(await victim?.exited).toBe('SIGKILL');
    const lost = page.locator('#workers tr[data-state="lost"]');
    await expect.poll(() => lost.count(), { timeout: 15_000 }).toBe(1);
    expect(await lost.getAttribute('data-worker')).toMatch(new RegExp(`^${victim?.proc.pid}@`));
    expect(await page.textContent('#workers-summary')).toMatch(/ · 1 lost · /);
    expect(await lost.locator('td').nth(3).textContent()).toBe('0');
    // Its last heartbeat ages on the page by the clock alone.
    await expect
      .poll(() => lost.locator('.ago').textContent(), { timeout: 5_000 })
      .toMatch(/^[1-9][\d ,a-z]* ago$/);

    // At a phone's width the page does not scroll sideways; the table scrolls in its own box.
    expect(await page.evaluate(() => document.scrollingElement?.scrollWidth ?? 0)).toBeLessThanOrEqual(WIDTH);
    await page.locator('#workers').scrollIntoViewIfNeeded();
    const box = await page.locator('#workers').boundingBox();
    if (box === null) throw new Error('the workers panel is not shown');
    await page.screenshot({
      path: screenshotPath('view-workers.png'),
      clip: box,
    });
    // The two left finish the run (a task the killed one was sending is in doubt: exit 2, never resent),
    // at once: the slow answers were for watching the counters move.
    env.sandbox.configure({ latencyMs: 0, speed: 0.01 });
    const codes = await Promise.all([workers[0]?.exited, workers[2]?.exited]);
    for (const code of codes) expect([0, 2]).toContain(code);
    const done = store.tasks.countTasksByState('fleet').done;
    await expect.poll(() => doneShown(page), { timeout: 10_000 }).toBe(done);
    // The panel is drawn from the workers' own event, not the run's: on a loaded machine the counters
    // caught up before it did.
    await expect
      .poll(() => page.locator('#workers tr[data-state="stopped"]').count(), { timeout: 10_000 })
      .toBe(2);

    // The database goes away under the open page: it says so in one line, and clears it when it is back.
    const away = page.locator('#away');
    pg.pause();
    try {
      await expect.poll(() => away.isVisible(), { timeout: 15_000 }).toBe(true);
      expect(await away.textContent()).toMatch(
        /^the PostgreSQL state at postgres:\/\/postgres@127\.0\.0\.1:\d+\/\w+ (went away|cannot be reached|does not take connections yet): [^\n]+: the page reads again when it is back$/,
      );
    } finally {
      pg.resume();
    }
    await expect.poll(() => away.isVisible(), { timeout: 15_000 }).toBe(false);
    expect(await doneShown(page)).toBe(done);
  });
});
