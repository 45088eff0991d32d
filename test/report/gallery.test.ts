// The gallery opened in a real headless browser (Debian chromium driven by playwright-core), from the
// run folder over file://, as a user would open it.
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { renderGallery } from '../../src/report/gallery.js';
import type { Report, ReportTask } from '../../src/report/index.js';
import { TASK_STATES } from '../../src/store/index.js';
import { CHROMIUM, requireBrowser, SKIP_BROWSER } from '../helpers/browser.js';
import { type RealRun, realRun } from './helpers.js';

const ARTIFACTS = fileURLToPath(new URL('../../test-artifacts/', import.meta.url));
requireBrowser();

const XSS_ID = '<script>alert(1)</script>';
const MANIFEST = (media: (name: string) => string) => `version: 1
name: gallery
concurrency: 8
output: out
tasks:
  - id: "hero-{{product}}"
    model: flat-image
    matrix: { product: [mug, cap] }
    input: { prompt: "A studio photo of an Acme {{product}}", ratio: "1:1" }
  - id: ${JSON.stringify(XSS_ID)}
    model: flat-image
    input: { prompt: "<img src=x onerror=\\"document.title='pwned'\\">" }
  - id: broken
    model: anime-waifu
    input: { prompt: "SANDBOX_FAIL on purpose", ratio: "1:1" }
  - id: mascot
    model: oc-maker
    input:
      prompt: "Invent a mascot. Answer with JSON: name, personality, backstory, oc_prompt."
      image_render_model: render-a
  - id: voice
    model: speech-v3
    input: { text: "Welcome to Acme.", voice: Alloy }
  - id: chorus
    model: song-replace-section
    input:
      audio_url: ${media('song-30s.mp3')}
      infill_start_s: 0
      infill_end_s: 12
      lyrics: "[Chorus] every mug"
      full_lyrics: "[Verse] morning\\n[Chorus] every mug"
      style: "upbeat acoustic pop"
      title: "Acme Mornings"
  - id: teaser
    model: flow22_spicy
    input: { prompt: "A slow dolly shot across Acme mugs", resolution: 480p }
`;

const LAUNCH_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** The few browser globals the page functions use (the project's tsconfig has no DOM library). */
interface LazyImage {
  complete: boolean;
  naturalWidth: number;
  getAttribute(name: string): string | null;
  scrollIntoView(): void;
  addEventListener(type: string, listener: (value: unknown) => void, opts: { once: boolean }): void;
}
interface BrowserGlobals {
  document: { querySelectorAll(selector: string): ArrayLike<LazyImage>; body: { scrollHeight: number } };
  scrollTo(x: number, y: number): void;
}

interface Opened {
  page: Page;
  problems: string[];
}

describe.skipIf(SKIP_BROWSER)(`the gallery in ${CHROMIUM}`, () => {
  let run: RealRun;
  let browser: BrowserContext;
  let profile: string;
  const pages: Page[] = [];

  beforeAll(async () => {
    run = await realRun({ manifest: MANIFEST, runId: 'gallery' });
    expect(run.result.code, run.result.stderr).toBe(2);
    expect((await run.mb(['report'])).code).toBe(0);
    profile = mkdtempSync(join(tmpdir(), 'mediabatch-chromium-'));
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: LAUNCH_ARGS,
      viewport: { width: 1280, height: 900 },
    });
  }, 90_000);

  afterEach(async () => {
    for (const page of pages.splice(0)) await page.close();
  });

  afterAll(async () => {
    await browser?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await run?.close();
  });

  async function open(file: string): Promise<Opened> {
    const page = await browser.newPage();
    pages.push(page);
    const problems: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('dialog', (d) => {
      problems.push(`dialog: ${d.message()}`);
      void d.dismiss();
    });
    page.on('request', (r) => {
      if (!r.url().startsWith('file://')) problems.push(`network: ${r.url()}`);
    });
    await page.goto(pathToFileURL(file).href);
    await page.waitForSelector('#grid .card');
    return { page, problems };
  }

  /** Scrolls every image into view (they load lazily) and reports each one's natural width. */
  function loadAllImages(page: Page) {
    return page.evaluate(async () => {
      const { document } = globalThis as unknown as BrowserGlobals;
      const images = Array.from(document.querySelectorAll('#grid img'));
      for (const img of images) {
        img.scrollIntoView();
        if (!img.complete) {
          await new Promise((resolve) => {
            img.addEventListener('load', resolve, { once: true });
            img.addEventListener('error', resolve, { once: true });
            setTimeout(resolve, 5_000);
          });
        }
      }
      return images.map((img) => ({ src: img.getAttribute('src'), width: img.naturalWidth }));
    });
  }

  it('shows every result: images load, every player has a source file, sheets and songs, no errors', async () => {
    const { page, problems } = await open(join(run.runDir, 'index.html'));
    const images = await loadAllImages(page);
    // hero-mug, hero-cap, the XSS-named task and the mascot's portrait.
    expect(images).toHaveLength(4);
    for (const image of images) expect(image.width, String(image.src)).toBeGreaterThan(0);

    const players = await page.$$eval('#grid audio, #grid video', (els) =>
      els.map((el) => ({
        tag: el.tagName.toLowerCase(),
        preload: el.getAttribute('preload'),
        src: el.querySelector('source')?.getAttribute('src') ?? '',
      })),
    );
    expect(players.map((p) => p.tag).sort()).toEqual(['audio', 'audio', 'audio', 'video']);
    for (const p of players) {
      expect(p.preload).toBe('none');
      expect(existsSync(join(run.runDir, decodeURIComponent(p.src))), p.src).toBe(true);
    }

    const mascot = page.locator('.card[data-id="mascot"]');
    expect(await mascot.locator('.sheet .name').textContent()).toMatch(/\S/);
    const chorus = page.locator('.card[data-id="chorus"]');
    expect(await chorus.locator('.song .st').allTextContents()).toEqual(['Acme Mornings', 'Acme Mornings']);
    expect(await chorus.locator('.song .sm').first().textContent()).toContain('upbeat acoustic pop');
    expect(await chorus.locator('.song details pre').first().textContent()).toContain('every mug');

    const broken = page.locator('.card[data-id="broken"]');
    expect(await broken.locator('.badge').textContent()).toBe('failed');
    expect(await broken.locator('.error').textContent()).toMatch(/failed/);
    expect(await page.locator('table').first().textContent()).toContain('flow22_spicy');

    await page.evaluate(() => (globalThis as unknown as BrowserGlobals).scrollTo(0, 0));
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'gallery.png'), fullPage: true });
    expect(problems).toEqual([]);
  });

  it('renders a task id and a prompt full of markup as text', async () => {
    const { page, problems } = await open(join(run.runDir, 'index.html'));
    await loadAllImages(page);
    const titles = await page.$$eval('#grid .card .title', (els) => els.map((el) => el.textContent));
    expect(titles).toContain(XSS_ID);
    const prompts = await page.$$eval('#grid .prompt', (els) => els.map((el) => el.textContent));
    expect(prompts).toContain(`<img src=x onerror="document.title='pwned'">`);
    expect(await page.title()).toBe('gallery · mediabatch gallery');
    expect(await page.$$eval('#grid script, #grid img[onerror]', (els) => els.length)).toBe(0);
    expect(problems).toEqual([]);
  });

  it('filters by model, status and text', async () => {
    const { page, problems } = await open(join(run.runDir, 'index.html'));
    const cards = () =>
      page.$$eval('#grid .card', (els) =>
        els.map((el) => ({ id: el.getAttribute('data-id'), model: el.getAttribute('data-model') })),
      );
    expect(await cards()).toHaveLength(8);
    expect(await page.textContent('#count')).toBe('8 tasks');

    await page.selectOption('#f-model', 'flat-image');
    expect((await cards()).map((c) => c.model)).toEqual(['flat-image', 'flat-image', 'flat-image']);
    expect(await page.textContent('#count')).toBe('3 of 8 tasks');

    await page.selectOption('#f-model', 'all');
    await page.click('#f-status .chip[data-status="failed"]');
    expect((await cards()).map((c) => c.id)).toEqual(['broken']);
    expect(await page.getAttribute('#f-status .chip[data-status="failed"]', 'aria-pressed')).toBe('true');

    await page.click('#f-status .chip[data-status="all"]');
    await page.fill('#f-search', 'acme cap');
    await page.waitForFunction(
      () => (globalThis as unknown as BrowserGlobals).document.querySelectorAll('#grid .card').length === 1,
    );
    expect((await cards()).map((c) => c.id)).toEqual(['hero-cap']);
    expect(problems).toEqual([]);
  });

  it('stays usable with thousands of tasks: cards are rendered as the reader scrolls', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mediabatch-big-gallery-'));
    try {
      const template = JSON.parse(readFileSync(join(run.runDir, 'report.json'), 'utf8')) as Report;
      const hero = template.tasks.find((t) => t.id === 'hero-mug') as ReportTask;
      mkdirSync(join(dir, 'shared'));
      copyFileSync(join(run.runDir, 'hero-mug', '1.png'), join(dir, 'shared', '1.png'));
      const statuses = ['done', 'done', 'done', 'failed', 'in_doubt'] as const;
      const tasks: ReportTask[] = Array.from({ length: 3000 }, (_, i) => {
        const status = statuses[i % statuses.length] ?? 'done';
        return {
          ...hero,
          id: `task-${i}`,
          model: i % 2 === 0 ? 'flat-image' : 'anime-waifu',
          status,
          folder: 'shared',
          files:
            status === 'done'
              ? [{ ...hero.files[0], path: 'shared/1.png' } as ReportTask['files'][number]]
              : [],
          error: status === 'done' ? null : 'the job failed; the API refunds its tokens',
        };
      });
      const byStatus = Object.fromEntries(TASK_STATES.map((s) => [s, 0]));
      writeFileSync(
        join(dir, 'index.html'),
        renderGallery({
          ...template,
          tasks,
          totals: { ...template.totals, tasks: 3000, by_status: byStatus as Report['totals']['by_status'] },
        }),
      );
      const { page, problems } = await open(join(dir, 'index.html'));
      const count = () => page.$$eval('#grid .card', (els) => els.length);
      const first = await count();
      expect(first).toBeGreaterThan(0);
      expect(first).toBeLessThan(200);
      for (let i = 0; i < 5; i++) {
        await page.evaluate(() => {
          const browser = globalThis as unknown as BrowserGlobals;
          browser.scrollTo(0, browser.document.body.scrollHeight);
        });
        await page.waitForTimeout(100);
      }
      expect(await count()).toBeGreaterThan(first);
      await page.click('#f-status .chip[data-status="in_doubt"]');
      expect(await page.textContent('#count')).toBe('600 of 3000 tasks');
      expect(
        await page.$$eval('#grid .card', (els) => els.every((el) => el.classList.contains('s-in_doubt'))),
      ).toBe(true);
      await loadAllImages(page);
      expect(problems).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
