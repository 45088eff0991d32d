// The run page in Debian's chromium over a finished run: a slow run page never draws over the page the
// reader moved on to, a run whose figures are still being read says so instead of showing 0 spend, every
// amount of money and each budget says its unit, and result images load lazily and decode off the main
// thread.
import { type Browser, chromium, type Page, type Route } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startView, type ViewServer } from '../../src/view/server.js';
import { CHROMIUM, requireBrowser, SKIP_BROWSER } from '../helpers/browser.js';
import type { RunEnv } from '../helpers/run-env.js';
import { faultyRun } from './helpers.js';

requireBrowser();

// The callbacks below run in the page: the browser's globals, as far as these tests use them.
declare const location: { hash: string };
declare const document: {
  querySelector(s: string): { dataset: Record<string, string | undefined> } | null;
};

let env: RunEnv;
let view: ViewServer;
let browser: Browser;
let page: Page;
/** The run's JSON, exactly: not its task list (…/batch/tasks) nor a task. */
const RUN_JSON = /\/api\/runs\/batch$/;

async function open(hash: string): Promise<void> {
  await page.evaluate((h) => {
    location.hash = h;
  }, hash);
}

/** Back to the runs list, then the run, so the run page is read afresh. */
async function openRun(): Promise<void> {
  await open('#/');
  await page.waitForSelector('#runs table');
  await open('#/run/batch');
  await page.waitForSelector('main[data-ready="run"]');
}

describe.skipIf(SKIP_BROWSER)('the run page in chromium', () => {
  beforeAll(async () => {
    env = await faultyRun();
    view = await startView({ stateFile: env.db, cwd: env.dir });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    page.on('pageerror', (e) => {
      throw e;
    });
    await page.goto(view.url);
    await page.waitForSelector('#runs table');
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await view?.close();
    await env?.close();
  });

  it('drops a slow run page when the reader has moved on to a task', async () => {
    let answered = false;
    await page.route(RUN_JSON, async (route: Route) => {
      await new Promise((r) => setTimeout(r, 1500));
      await route.continue().catch(() => {});
      answered = true;
    });
    try {
      await open('#/run/batch');
      await page.waitForTimeout(100);
      await open('#/run/batch/task/clip');
      await page.waitForSelector('main[data-ready="task"]');
      // The slow answer comes after the task page is shown: it must not draw the run page over it.
      await expect.poll(() => answered, { timeout: 5000 }).toBe(true);
      await page.waitForTimeout(500);
      expect(
        await page.$eval('main', (el) => (el as unknown as { dataset: { ready?: string } }).dataset.ready),
      ).toBe('task');
      expect(await page.textContent('#task-state')).toBe('done');
      expect(await page.locator('#counters').count()).toBe(0);
    } finally {
      await page.unroute(RUN_JSON);
    }
  });

  it('says the figures are being read while figures_ready is false, then shows them', async () => {
    // The answer a large run gives while its figures are first read: empty cost table, no spend yet.
    await page.route(RUN_JSON, async (route: Route) => {
      const answer = await route.fetch();
      const body = (await answer.json()) as Record<string, unknown> & { run: Record<string, unknown> };
      body['figures_ready'] = false;
      body['models'] = [];
      body['spend_series'] = { ...(body['spend_series'] as object), points: [] };
      body.run = { ...body.run, net: 0, charged: 0, refunded: 0, estimated: 0 };
      await route.fulfill({ response: answer, json: body });
    });
    try {
      await openRun();
      const money = await page.textContent('#money');
      expect(money).toContain('figures are being read…');
      expect(money).not.toContain('Net 0');
      expect(await page.textContent('#models')).toContain('figures are being read…');
      expect(await page.locator('#models table').count()).toBe(0);
      expect(await page.textContent('#figures-note')).toContain('figures are being read…');
    } finally {
      await page.unroute(RUN_JSON);
    }
    // The real answer (figures in): the run's spend (it paid for its results), and a cost table.
    await openRun();
    const money = (await page.textContent('#money')) ?? '';
    expect(money).not.toContain('being read');
    expect(Number(/^Net ([\d.,]+) tokens/.exec(money)?.[1]?.replaceAll(',', ''))).toBeGreaterThan(0);
    expect(await page.locator('#models tbody tr').count()).toBeGreaterThan(0);
    expect(await page.textContent('#figures-note')).toBe('');
  });

  it('gives every amount of the money line and each budget its unit, one token in the singular', async () => {
    const one = { net: 1, charged: 1, refunded: 0, estimated: 2, worst_case: 2.5, budget: 1 };
    const RUNS_JSON = /\/api\/runs$/;
    await page.route(RUN_JSON, async (route: Route) => {
      const answer = await route.fetch();
      const body = (await answer.json()) as { run: Record<string, unknown> };
      await route.fulfill({ response: answer, json: { ...body, run: { ...body.run, ...one } } });
    });
    await page.route(RUNS_JSON, async (route: Route) => {
      const answer = await route.fetch();
      const body = (await answer.json()) as { runs: Record<string, unknown>[] };
      await route.fulfill({
        response: answer,
        json: { ...body, runs: body.runs.map((r) => ({ ...r, ...one })) },
      });
    });
    try {
      await openRun();
      expect(await page.textContent('#money')).toContain(
        'Net 1 token (charged 1 token, refunded 0 tokens) · estimated 2 tokens · worst case 2.5 tokens · budget 1 token',
      );
      await open('#/');
      await page.waitForSelector('#runs table');
      expect(await page.textContent('#runs table')).toContain('1 of ~2 (budget 1 token)');
    } finally {
      await page.unroute(RUN_JSON);
      await page.unroute(RUNS_JSON);
    }
    await openRun();
  });

  it('loads result images lazily and decodes them off the main thread', async () => {
    const attrs = await page.$$eval('#grid .card img', (els) =>
      els.map((e) => `${e.getAttribute('loading')} ${e.getAttribute('decoding')}`),
    );
    expect(attrs.length).toBeGreaterThan(0);
    expect(new Set(attrs)).toEqual(new Set(['lazy async']));
  });
});
