// A run that stopped with tasks left after finishing others at a measurable rate: the rate alone would
// give it an end a few seconds away. Its run page must say it is not running, and give no estimated end,
// in the view's API and in Debian's chromium.
import { type Browser, chromium } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { startView, type ViewServer } from '../../src/view/server.js';
import { CHROMIUM, requireBrowser, SKIP_BROWSER } from '../helpers/browser.js';
import { images, makeRunEnv, type RunEnv } from '../helpers/run-env.js';
import { raw } from './helpers.js';

requireBrowser();

let env: RunEnv | undefined;
let view: ViewServer | undefined;
let browser: Browser | undefined;

afterAll(async () => {
  await browser?.close();
  await view?.close();
  await env?.close();
});

interface RunDetail {
  run: { state: string; stopped: { reason: string } | null };
  finished_series: { rate_per_minute: number | null; estimated_end: string | null; unfinished: number };
}

describe.skipIf(SKIP_BROWSER)('the run page of a run stopped with tasks left', () => {
  it("says 'not running' and gives no estimated end, though its rate would give one", async () => {
    // One task at a time, each request held 150 ms: a task (submit, look, download) takes at least
    // 450 ms, so the four finishes spread over more than a second, which is what a rate needs.
    env = await makeRunEnv({ latencyMs: 150 });
    const file = await env.manifest({ tasks: images(6), concurrency: 1 });
    const first = await env.run(['run', file, '--yes', '--limit', '4']);
    expect(first.code).toBe(4);

    view = await startView({ stateFile: env.db, cwd: env.dir });
    const answer = await raw(view.port, '/api/runs/batch', { authorization: `Bearer ${view.token}` });
    expect(answer.status).toBe(200);
    const detail = JSON.parse(answer.text) as RunDetail;
    expect(detail.run.state).toBe('interrupted');
    expect(detail.run.stopped?.reason).toBe('limit');
    expect(detail.finished_series.unfinished).toBe(2);
    expect(detail.finished_series.rate_per_minute).toBeGreaterThan(0);
    expect(detail.finished_series.estimated_end).toBeNull();

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    page.on('pageerror', (e) => {
      throw e;
    });
    await page.goto(view.url);
    await page.waitForSelector('#runs table');
    // The runs list says why it stopped, as `status`'s list does.
    const listed = (await env.run(['status'])).stdout;
    expect(listed).toMatch(/^batch .* interrupted \(limit\) /m);
    expect(await page.textContent('#runs table .state')).toBe('interrupted (limit)');
    await page.evaluate(() => {
      (globalThis as unknown as { location: { hash: string } }).location.hash = '#/run/batch';
    });
    await page.waitForSelector('main[data-ready="run"] #rate');
    const line = (await page.textContent('#rate')) ?? '';
    expect(line).toMatch(/^4\/6 finished · [\d.,]+ tasks\/min · not running · active /);
    expect(line).not.toContain('estimated end');
  }, 60_000);
});
