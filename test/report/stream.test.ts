// The report written a page of tasks at a time (writeReport) against the report built in memory from
// every task (buildReport and the pure renderers): on a run of 3,000 tasks of every kind, the files must
// say the same thing, and the streamed gallery must still filter and render cards as the reader scrolls.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  buildReport,
  copyReportFile,
  MARKDOWN_LIST_LIMIT,
  type Report,
  readGalleryExtras,
  renderGallery,
  reportCsv,
  reportMarkdown,
  reportSchema,
  writeReport,
} from '../../src/report/index.js';
import { openStore, type Store } from '../../src/store/index.js';
import { writeFileAtomicStream } from '../../src/util/fsatomic.js';
import { CHROMIUM, requireBrowser, SKIP_BROWSER } from '../helpers/browser.js';
import { estimate, FakeClock, submit, task } from '../store/helpers.js';

const TASKS = 3000;
requireBrowser();

let dir: string;
let runDir: string;
let store: Store;
let clock: FakeClock;
let streamed: Awaited<ReturnType<typeof writeReport>>;
let report: Report;

/** Task i of the big run: mostly done images, and every other state, model and oddity at intervals. */
function fill(store: Store): void {
  store.runs.createRun({ id: 'big', manifestPath: 'big.yaml', manifestName: 'big', settings: {} });
  store.tasks.upsertTasks(
    'big',
    Array.from({ length: TASKS }, (_, i) => {
      const t = task(`t-${i}`, { prompt: i % 7 === 0 ? `a "mug" <b>${i}</b>, =1+1` : `a mug ${i}` });
      if (i % 50 === 1) return { ...t, model: 'oc-maker', estimate: estimate(1.5, { assumedPrice: true }) };
      if (i % 50 === 2)
        return {
          ...t,
          model: 'song',
          wireBody: '{"lyrics":"la la"}',
          estimate: estimate(2, { min: 1, max: 4 }),
        };
      if (i % 50 === 3) return { ...t, wireBody: 'not json' };
      return { ...t, estimate: estimate(0.2) };
    }),
  );
  for (let i = 0; i < TASKS; i++) {
    const id = `t-${i}`;
    clock.advance(1_000);
    const kind = i % 20;
    if (kind === 19) continue; // pending
    if (kind === 18) {
      store.tasks.markBlocked('big', id, 'quota: set MEDIABATCH_QUOTA higher');
      continue;
    }
    const attempt = store.submissions.recordSubmitIntent('big', id);
    if (kind === 17 || kind === 16) {
      store.submissions.recordInDoubt('big', id, attempt, { message: 'connection reset after sending' });
      continue;
    }
    if (kind === 15) {
      store.submissions.recordNotCharged('big', id, attempt, {
        outcome: 'rejected',
        httpStatus: 400,
        message: 'ratio: bad',
      });
      continue;
    }
    store.submissions.recordSubmitted('big', id, attempt, {
      imgUuid: `u-${i}`,
      cost: 0.15,
      keyFingerprint: 'fp0000000000',
    });
    if (kind === 14) {
      store.jobs.recordJobStatus(`u-${i}`, 'failed', { status: 'failed' }, 'poll');
      continue;
    }
    if (kind === 13) continue; // submitted
    store.jobs.recordJobStatus(`u-${i}`, 'success', { status: 'success', duration: 7.5 }, 'poll');
    const folder = join(runDir, id);
    const audio = i % 50 === 2;
    store.files.recordFile('big', id, {
      index: 1,
      kind: audio ? 'audio' : 'image',
      path: join(folder, audio ? '1.mp3' : '1.png'),
      bytes: 1000 + i,
      sha256: `sha-${i}`,
    });
    if (i % 50 === 1) {
      mkdirSync(folder, { recursive: true });
      writeFileSync(join(folder, 'sheet.json'), JSON.stringify({ name: `Mascot ${i}`, backstory: 'x' }));
    }
    if (audio) {
      mkdirSync(folder, { recursive: true });
      writeFileSync(
        join(folder, 'job.json'),
        JSON.stringify({ songs: [{ file: '1.mp3', title: `Song ${i}` }] }),
      );
    }
    store.tasks.markDone('big', id);
  }
  // One task sent twice: two jobs, one refunded.
  store.tasks.requeueTasks('big', ['t-14'], ['failed']);
  submit(store, 'big', 't-14', 'u-14-again', 0.15);
  store.runs.setRunBalance('big', { before: 1000, after: 600 });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mediabatch-stream-'));
  runDir = join(dir, 'out', 'big');
  clock = new FakeClock();
  store = openStore(join(dir, 'state.db'), { now: clock.now });
  fill(store);
  streamed = await writeReport(store, 'big', runDir, { now: clock.now() });
  report = buildReport(store, 'big', { now: clock.now(), runDir });
}, 120_000);

afterAll(() => {
  store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe(`the streamed report of ${TASKS} tasks`, () => {
  it('writes report.json byte for byte as the report built in memory, in-doubt tasks first', () => {
    const text = readFileSync(streamed.files.json, 'utf8');
    expect(text).toBe(`${JSON.stringify(report, null, 2)}\n`);
    const parsed = JSON.parse(text) as Report;
    expect(reportSchema.safeParse(parsed).error).toBeUndefined();
    expect(parsed.tasks).toHaveLength(TASKS);
    expect(parsed.in_doubt).toHaveLength(300);
    expect(parsed.tasks.slice(0, 300).every((t) => t.status === 'in_doubt')).toBe(true);
    expect(parsed.tasks[300]?.id).toBe('t-0');
    expect(parsed.tasks.find((t) => t.id === 't-14')).toMatchObject({
      jobs: 2,
      charged: 0.3,
      refunded: 0.15,
    });
    expect(parsed.totals.by_status).toMatchObject({
      in_doubt: 300,
      pending: 150,
      blocked: 150,
      rejected: 150,
    });
  });

  it('keeps the run-level figures it returns equal to those in report.json', () => {
    const { inDoubt, files, ...head } = streamed.head;
    const { in_doubt: _list, tasks, ...fixed } = report;
    expect(head).toEqual(fixed);
    expect(inDoubt.count).toBe(300);
    expect(files).toEqual({
      files: tasks.reduce((n, t) => n + t.files.length, 0),
      bytes: tasks.reduce((n, t) => n + t.bytes, 0),
    });
  });

  it('reads the tasks once for report.json, report.csv and index.html, a page at a time', async () => {
    const reads: unknown[] = [];
    const pages = store.reportReads.reportTaskPages.bind(store.reportReads);
    const spy = vi.spyOn(store.reportReads, 'reportTaskPages').mockImplementation((runId, opts) => {
      reads.push(opts ?? {});
      return pages(runId, opts);
    });
    try {
      await writeReport(store, 'big', runDir, { now: clock.now() });
    } finally {
      spy.mockRestore();
    }
    // Every task: once. The rest are the in-doubt list (report.json's and the gallery's first cards) and
    // report.md's first few of each kind.
    expect(reads.filter((o) => Object.keys(o as object).length === 0)).toHaveLength(1);
    expect(readFileSync(streamed.files.json, 'utf8')).toBe(`${JSON.stringify(report, null, 2)}\n`);
  });

  it('writes report.csv as the report in memory does, one row per task', () => {
    expect(readFileSync(streamed.files.csv, 'utf8')).toBe(reportCsv(report));
  });

  it(`lists the first ${MARKDOWN_LIST_LIMIT} tasks in report.md and says where the others are`, () => {
    const md = readFileSync(streamed.files.markdown, 'utf8');
    expect(md).toBe(reportMarkdown(report));
    expect(md).toContain(
      `This list shows the first ${MARKDOWN_LIST_LIMIT.toLocaleString('en-US')} of ${TASKS.toLocaleString('en-US')} tasks (in doubt first, then manifest order)`,
    );
    const section = md.slice(md.indexOf('## Tasks\n'));
    expect(section.split('\n').filter((line) => line.startsWith('| `t-'))).toHaveLength(MARKDOWN_LIST_LIMIT);
    expect(md.length).toBeLessThan(400_000);
  });

  it('writes the same gallery as the one rendered in memory, prompts, sheets and songs included', async () => {
    const extras = await readGalleryExtras(report, store.tasks.tasksOfRun('big'), runDir);
    const html = readFileSync(streamed.files.gallery, 'utf8');
    expect(html).toBe(renderGallery(report, extras));
    expect(html).toContain('Mascot 1');
    expect(html).toContain('Song 2');
  });

  it('prints report.json from the file, piece by piece', async () => {
    let out = '';
    await copyReportFile(streamed.files.json, { write: (text: string) => (out += text) });
    expect(out).toBe(readFileSync(streamed.files.json, 'utf8'));
  });

  it('leaves no temporary file behind', () => {
    for (const file of Object.values(streamed.files)) expect(existsSync(`${file}.part`)).toBe(false);
  });
});

describe.skipIf(SKIP_BROWSER)(`the streamed gallery of ${TASKS} tasks in ${CHROMIUM}`, () => {
  it('opens, renders cards as the reader scrolls, and filters', async () => {
    const profile = mkdtempSync(join(tmpdir(), 'mediabatch-chromium-'));
    const browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--no-first-run',
        '--disable-background-networking',
      ],
      viewport: { width: 1280, height: 900 },
    });
    try {
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
      // The result files of this run are not on disk: their images may not load; nothing else may fail.
      page.on('console', (m) => {
        if (m.type() === 'error' && !m.text().includes('ERR_FILE_NOT_FOUND')) problems.push(m.text());
      });
      await page.goto(pathToFileURL(streamed.files.gallery).href);
      await page.waitForSelector('#grid .card');
      const count = () => page.$$eval('#grid .card', (els) => els.length);
      const first = await count();
      expect(first).toBeGreaterThan(0);
      expect(first).toBeLessThan(200);
      expect(await page.textContent('#count')).toBe(`${TASKS} tasks`);
      for (let i = 0; i < 5; i++) {
        await page.mouse.wheel(0, 20_000);
        await page.waitForTimeout(100);
      }
      expect(await count()).toBeGreaterThan(first);
      await page.click('#f-status .chip[data-status="in_doubt"]');
      expect(await page.textContent('#count')).toBe(`300 of ${TASKS} tasks`);
      await page.selectOption('#f-model', 'oc-maker');
      expect(await page.textContent('#count')).toBe(`0 of ${TASKS} tasks`);
      await page.click('#f-status .chip[data-status="all"]');
      expect(await page.textContent('#count')).toBe(`60 of ${TASKS} tasks`);
      expect(await page.locator('.card[data-id="t-1"] .sheet .name').textContent()).toBe('Mascot 1');
      expect(problems).toEqual([]);
    } finally {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('writeFileAtomicStream', () => {
  it('leaves the previous file whole and no temporary file when writing fails halfway', async () => {
    const where = mkdtempSync(join(tmpdir(), 'mediabatch-atomic-'));
    try {
      const file = join(where, 'report.json');
      writeFileSync(file, 'the previous report');
      const failing = writeFileAtomicStream(file, async (sink) => {
        for (let i = 0; i < 10_000; i++) await sink.write('x'.repeat(100));
        throw new Error('disk full');
      });
      await expect(failing).rejects.toThrow('disk full');
      expect(readFileSync(file, 'utf8')).toBe('the previous report');
      expect(existsSync(`${file}.part`)).toBe(false);
      await writeFileAtomicStream(file, async (sink) => {
        for (let i = 0; i < 10_000; i++) await sink.write(`${i}\n`);
      });
      expect(readFileSync(file, 'utf8').split('\n')).toHaveLength(10_001);
    } finally {
      rmSync(where, { recursive: true, force: true });
    }
  });
});
