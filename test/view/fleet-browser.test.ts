// The fleet's page in Debian's chromium, at a phone's width: `view` over a PostgreSQL state while a run
// goes in another process. The run's counters move without a reload, the workers panel lists the three
// workers of the run, and the one killed with SIGKILL is marked lost; the page never scrolls sideways.
// The three workers are rows of the run's workers table whose heartbeats this test beats, each held by a
// real process of this machine (the runner itself and two stand-ins), so a kill -9 is seen as the store
// sees a dead worker (its pid gone from this host). When the database then goes away the page says so,
// and clears it when it is back. Writes docs/images/view-workers.png.
import { type ChildProcess, spawn } from 'node:child_process';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/index.js';
import { startView, type ViewServer } from '../../src/view/server.js';
import { CHROMIUM, requireBrowser, SKIP_BROWSER } from '../helpers/browser.js';
import { type Child, spawnCli } from '../helpers/child.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';
import { FAST_POLLS, images, makeRunEnv, type RunEnv, SANDBOX_KEY } from '../helpers/run-env.js';

requireBrowser();

declare const document: {
  scrollingElement: { scrollWidth: number } | null;
  querySelector(s: string): { textContent: string | null } | null;
};

const WIDTH = 390;
const TASKS = 24;
/** Short, so that a worker that stops beating is lost within the test. */
const TTL_MS = 3_000;

let pg: Postgres;
let env: RunEnv;
let url: string;
let view: ViewServer;
let browser: Browser;
let page: Page;
let runner: Child;
let store: Store;
const standIns: ChildProcess[] = [];

const doneShown = (p: Page) =>
  p.evaluate(() =>
    Number((document.querySelector('.counter.s-done .n')?.textContent ?? '').replace(/,/g, '')),
  );

describe.skipIf(SKIP_BROWSER)('the view of a fleet over PostgreSQL', () => {
  beforeAll(async () => {
    pg = await startPostgres();
    // Each request of the run waits a little at the sandbox: the run takes seconds, not milliseconds.
    env = await makeRunEnv({ latencyMs: 150 });
    url = pg.freshDatabase();
    store = openStore(url);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  }, 120_000);

  afterAll(async () => {
    runner?.proc.kill('SIGKILL');
    for (const p of standIns) p.kill('SIGKILL');
    await browser?.close();
    await view?.close();
    store?.close();
    await env?.close();
    pg?.stop();
  });

  it('moves the counters while the run goes, lists its three workers and marks the one killed lost', {
    timeout: 120_000,
  }, async () => {
    const file = await env.manifest({ name: 'fleet', concurrency: 2, tasks: images(TASKS) });
    runner = spawnCli(['--state', url, 'run', file, '--yes'], {
      cwd: env.dir,
      env: {
        MEDIABATCH_API_KEY: SANDBOX_KEY,
        MEDIABATCH_BASE_URL: env.sandbox.baseUrl,
        MEDIABATCH_POLL_SCALE: FAST_POLLS,
      },
    });
    await expect.poll(() => store.runs.getRun('fleet') !== undefined, { timeout: 30_000 }).toBe(true);

    // Three workers on this host: the runner, and two processes standing in for workers of the fleet.
    for (let i = 0; i < 2; i++) standIns.push(spawn('sleep', ['300'], { stdio: 'ignore' }));
    const pids = [runner.proc.pid, ...standIns.map((p) => p.pid)].map(Number);
    const ids = pids.map((pid, i) => `${pid}@${hostname()}#w${i}`);
    for (const [i, id] of ids.entries()) store.workers.join('fleet', id, hostname(), pids[i] ?? 0, TTL_MS);
    let beating = [...ids];
    let submitted = 0;
    const heartbeat = setInterval(() => {
      submitted += 1;
      for (const id of beating) store.workers.heartbeat('fleet', id, { inFlight: 2, submitted }, TTL_MS);
    }, 300);

    try {
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
          const n = Number(
            (document.querySelector('.counter.s-done .n')?.textContent ?? '').replace(/,/g, ''),
          );
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

      const rows = page.locator('#workers tbody tr');
      await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(3);
      expect(await page.locator('#workers tr[data-state="working"]').count()).toBe(3);
      expect(await page.locator('#workers .host').allTextContents()).toEqual([
        hostname(),
        hostname(),
        hostname(),
      ]);

      // kill -9 of one worker: no goodbye, no more heartbeats; the page marks it lost.
      const killed = standIns[0];
      killed?.kill('SIGKILL');
      beating = beating.filter((id) => id !== ids[1]);
      const lost = page.locator('#workers tr[data-state="lost"]');
      await expect.poll(() => lost.count(), { timeout: 15_000 }).toBe(1);
      expect(await lost.getAttribute('data-worker')).toBe(ids[1]);
      expect(await page.textContent('#workers-summary')).toBe('2 working · 1 lost · 0 stopped');
      expect(await lost.locator('td').nth(3).textContent()).toBe('0');
      // Its last heartbeat ages on the page by the clock alone.
      await expect
        .poll(() => lost.locator('.ago').textContent(), { timeout: 5_000 })
        .toMatch(/^[1-9]\d* s ago$/);

      // At a phone's width the page does not scroll sideways; the table scrolls in its own box.
      expect(await page.evaluate(() => document.scrollingElement?.scrollWidth ?? 0)).toBeLessThanOrEqual(
        WIDTH,
      );
      // The picture for docs/view.md, once the heartbeats stop redrawing the panel.
      clearInterval(heartbeat);
      await page.locator('#workers').scrollIntoViewIfNeeded();
      const box = await page.locator('#workers').boundingBox();
      if (box === null) throw new Error('the workers panel is not shown');
      await page.screenshot({
        path: fileURLToPath(new URL('../../docs/images/view-workers.png', import.meta.url)),
        clip: box,
      });
    } finally {
      clearInterval(heartbeat);
    }
    expect(await runner.exited).toBe(0);
    expect(runner.stderr()).toBe('');

    // The database goes away under the open page: it says so in one line, and clears it when it is back.
    const away = page.locator('#away');
    pg.pause();
    try {
      await expect.poll(() => away.isVisible(), { timeout: 15_000 }).toBe(true);
      expect(await away.textContent()).toMatch(
        /^the PostgreSQL state at postgres:\/\/postgres@127\.0\.0\.1:\d+\/\w+ (went away|cannot be reached): [^\n]+: the page reads again when it is back$/,
      );
    } finally {
      pg.resume();
    }
    await expect.poll(() => away.isVisible(), { timeout: 15_000 }).toBe(false);
    expect(await doneShown(page)).toBe(TASKS);
  });
});
