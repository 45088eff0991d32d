// The view at a phone's width in Debian's chromium (390×844, touch): no page scrolls sideways (the runs
// list, a run with failures, charts and the cost table, a task), the charts fit their box and read in
// the page's ISO time at any span, buttons are large enough to touch, a downstream held for review names
// the still it waits for, a task opened from the grid starts at the top, and at 1,500 tasks every count
// has its thousands separators and the rate at most one decimal. Its screenshots are
// docs/images/view-phone-*.png (`npm run screenshots`).
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fillViewRun, VIEW_RUN } from '../../bench/view-fill.js';
import { startView, type ViewServer } from '../../src/view/server.js';
import { CHROMIUM, requireBrowser, SKIP_BROWSER, screenshotPath } from '../helpers/browser.js';
import { VARIANTS } from '../helpers/review-chain.js';
import { images, type RunEnv } from '../helpers/run-env.js';
import { faultyRun } from './helpers.js';

requireBrowser();

declare const window: { scrollY: number; scrollTo(x: number, y: number): void };
declare const document: {
  scrollingElement: { scrollWidth: number } | null;
  querySelector(s: string): HTMLElement | null;
};
interface HTMLElement {
  dataset: Record<string, string | undefined>;
  getBoundingClientRect(): { width: number; height: number; y: number };
  scrollIntoView(): void;
}

const shot = (name: string) => screenshotPath(`view-phone-${name}.png`);
const WIDTH = 390;

let env: RunEnv;
let view: ViewServer;
let big: ViewServer | undefined;
let browser: Browser;
let page: Page;

const scrollWidth = (p: Page) => p.evaluate(() => document.scrollingElement?.scrollWidth ?? 0);
const base = () => view.url.replace(/\?token=.*/, '');

async function open(p: Page, hash: string, ready: 'runs' | 'run' | 'task'): Promise<void> {
  await p.goto(`${base()}#${hash}`);
  if (ready === 'runs') await p.waitForSelector('#runs table');
  else await p.waitForSelector(`main[data-ready="${ready}"]`);
}

describe.skipIf(SKIP_BROWSER)('the view on a phone', () => {
  beforeAll(async () => {
    env = await faultyRun();
    // A second run in the same state file: four reviewed stills, each with a clip that waits for it.
    const chain = await env.manifest({ name: 'chain', tasks: VARIANTS }, 'chain.yaml');
    await env.run(['run', chain, '--yes']);
    const one = await env.manifest({ name: 'one', tasks: images(1, 'solo') }, 'one.yaml');
    expect((await env.run(['run', one, '--yes'])).code).toBe(0);
    view = await startView({ stateFile: env.db, cwd: env.dir });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    page = await browser.newPage({ viewport: { width: WIDTH, height: 844 }, isMobile: true, hasTouch: true });
    page.on('pageerror', (e) => {
      throw e;
    });
    await page.goto(view.url);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await view?.close();
    await big?.close();
    await env?.close();
  });

  it('shows the runs list without sideways scroll', async () => {
    await open(page, '/', 'runs');
    expect(await scrollWidth(page)).toBeLessThanOrEqual(WIDTH);
    await page.screenshot({ path: shot('runs') });
  });

  it('shows a run with failures, charts and the cost table without sideways scroll', async () => {
    await open(page, '/run/batch', 'run');
    await page.waitForSelector('#failures table');
    await page.waitForSelector('#models table');
    expect(await scrollWidth(page)).toBeLessThanOrEqual(WIDTH);
    for (const id of ['spend-chart', 'finished-chart']) {
      const [box, canvas] = await page.$eval(`#${id}`, (el) => {
        const c = el.querySelector('canvas');
        return [el.getBoundingClientRect().width, c ? c.getBoundingClientRect().width : Infinity];
      });
      expect(canvas).toBeLessThanOrEqual(box);
    }
    // Turned sideways and back: the charts follow their box both ways.
    const canvasWidth = () => page.$eval('#spend-chart canvas', (el) => el.getBoundingClientRect().width);
    await page.setViewportSize({ width: 900, height: 844 });
    await expect.poll(canvasWidth).toBeGreaterThan(WIDTH);
    await page.setViewportSize({ width: WIDTH, height: 844 });
    await expect.poll(canvasWidth).toBeLessThan(WIDTH);
    // The cost table's last column is reached by scrolling the table's own box, not the page.
    const net = page.locator('#models th', { hasText: 'net' });
    await net.scrollIntoViewIfNeeded();
    expect(await net.isVisible()).toBe(true);
    expect(await scrollWidth(page)).toBeLessThanOrEqual(WIDTH);
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({
      path: shot('run'),
      fullPage: true,
      clip: { x: 0, y: 0, width: WIDTH, height: 1100 },
    });
    const top = await page.$eval('#in-doubt', (el) => el.getBoundingClientRect().y);
    const end = await page.$eval(
      '#models',
      (el) => el.getBoundingClientRect().y + el.getBoundingClientRect().height,
    );
    await page.screenshot({
      path: shot('tables'),
      fullPage: true,
      clip: { x: 0, y: top, width: WIDTH, height: end - top },
    });
  });

  it('labels the time axis in ISO time and counts with whole ticks', async () => {
    const ticks = async (id: string, axis: 'x' | 'y') =>
      ((await page.getAttribute(`#${id}`, `data-${axis}-ticks`)) ?? '').split(' | ').filter((t) => t !== '');
    await open(page, '/run/batch', 'run');
    const x = await ticks('finished-chart', 'x');
    expect(x.length).toBeGreaterThan(0);
    for (const t of x) expect(t).toMatch(/^(\d\d-\d\d )?\d\d:\d\d(:\d\d)?$/);
    const y = await ticks('finished-chart', 'y');
    expect(y[0]).toBe('0');
    for (const t of y) expect(t).toMatch(/^\d[\d,]*$/);
    // One point in time: an axis of seconds around it, never a span of years.
    await open(page, '/run/one', 'run');
    const lone = await ticks('finished-chart', 'x');
    expect(lone.length).toBeGreaterThan(0);
    for (const t of lone) expect(t).toMatch(/^\d\d:\d\d:\d\d$/);
    for (const t of await ticks('finished-chart', 'y')) expect(t).toMatch(/^\d+$/);
  });

  it('opens a task from the grid at the top of its page, without sideways scroll', async () => {
    await open(page, '/run/batch', 'run');
    const link = page.locator('#grid .card[data-task="clip"] h3 a');
    await link.scrollIntoViewIfNeeded();
    expect(await page.evaluate(() => window.scrollY)).toBeGreaterThan(500);
    await link.click();
    await page.waitForSelector('main[data-ready="task"]');
    expect(await page.evaluate(() => window.scrollY)).toBe(0);
    expect(await scrollWidth(page)).toBeLessThanOrEqual(WIDTH);
    await page.screenshot({ path: shot('task') });
    // The look whose record finished the job is counted: never `polls 0` beside a record from a poll.
    const polls = Number(await page.locator('dt:text-is("polls") + dd').textContent());
    const fromPolls = await page.locator('#task tr', { hasText: /poll$/ }).count();
    expect(fromPolls).toBeGreaterThan(0);
    expect(polls).toBeGreaterThanOrEqual(fromPolls);
  });

  it('gives review buttons a touch size and names the still a held clip waits for', async () => {
    await open(page, '/run/chain', 'run');
    await page.waitForSelector('#grid .card[data-task="still-mug-1"] .review');
    expect(await scrollWidth(page)).toBeLessThanOrEqual(WIDTH);
    const sizes = await page.$$eval(
      '#grid .card .review button, #grid .card .select-box, #bulk button',
      (els) => els.map((el) => (el as HTMLElement).getBoundingClientRect()),
    );
    expect(sizes.length).toBeGreaterThanOrEqual(16);
    for (const s of sizes) {
      expect(s.height).toBeGreaterThanOrEqual(44);
      expect(s.width).toBeGreaterThanOrEqual(44);
    }
    const still = page.locator('#grid .card[data-task="still-mug-1"]');
    expect(await still.locator('.badge').textContent()).toBe('awaiting review');
    const clip = page.locator('#grid .card[data-task="clip-mug-1"] .state');
    expect(await clip.textContent()).toBe("waiting for still-mug-1's review");
    await still.scrollIntoViewIfNeeded();
    await page.screenshot({ path: shot('review') });
  });

  it('puts thousands separators on every count at 1,500 tasks, and a rate with at most one decimal', async () => {
    const file = `${env.dir}/big.db`;
    fillViewRun(file, 1500, `${env.dir}/out`);
    big = await startView({ stateFile: file, cwd: env.dir });
    const phone = await browser.newPage({ viewport: { width: WIDTH, height: 844 }, isMobile: true });
    await phone.goto(big.url);
    await phone.goto(`${big.url.replace(/\?token=.*/, '')}#/run/${VIEW_RUN}`);
    await phone.waitForSelector('main[data-ready="run"] #models table');
    expect(await phone.textContent('#counters [data-state="total"] .n')).toBe('1,500');
    const rate = (await phone.textContent('#rate')) ?? '';
    expect(rate).toMatch(/^1,\d{3}\/1,500 finished · /);
    expect(rate).toMatch(/ [\d,]+(\.\d)? tasks\/min · /);
    // Times aside, no figure of four digits or more goes without its separator.
    // Task ids (t-1001) aside too: the failures' counts are read, not their task lists.
    for (const where of ['#counters', '#money', '#models', '#failures .count', '#in-doubt']) {
      const texts = await phone.$$eval(where, (els) =>
        els.map((el) => (el as HTMLElement & { innerText: string }).innerText),
      );
      expect(texts.length, where).toBeGreaterThan(0);
      const text = texts.join(' ').replace(/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/g, '');
      expect(text, where).not.toMatch(/\d{4,}/);
    }
    const y = (await phone.getAttribute('#finished-chart', 'data-y-ticks')) ?? '';
    expect(y).toMatch(/1,\d{3}/);
    // The legend's value under the cursor too (at the chart's right end, the run's last finishes).
    const over = phone.locator('#finished-chart .u-over');
    const box = await over.boundingBox();
    await over.hover({ position: { x: (box?.width ?? 2) - 1, y: 10 } });
    expect(await phone.textContent('#finished-chart .u-legend .u-series:nth-child(2) .u-value')).toMatch(
      /^1,\d{3}$/,
    );
    expect(await scrollWidth(phone)).toBeLessThanOrEqual(WIDTH);
    await phone.close();
  });
});
