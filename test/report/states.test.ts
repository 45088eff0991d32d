// The report of a run whose tasks went through the new states, built from real rows written through the
// store's public API: a task that succeeded on its third attempt (two failed jobs refunded), one paid
// and not fetched, one paid and lost, one stalled, one whose cost the API did not state, one recovered
// from doubt, and an mp4 stored under an image model.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parse } from 'csv-parse/sync';
import { chromium } from 'playwright-core';
import { afterEach, describe, expect, it } from 'vitest';
import {
  buildReport,
  renderGallery,
  reportCsv,
  reportMarkdown,
  writeReport,
} from '../../src/report/index.js';
import type { Store } from '../../src/store/index.js';
import { CHROMIUM, requireBrowser, SKIP_BROWSER } from '../helpers/browser.js';
import { submit, task, useStoreWithRun } from '../store/helpers.js';

const ctx = useStoreWithRun();
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
function runDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'mediabatch-states-'));
  dirs.push(dir);
  return join(dir, 'r1');
}

const FP = 'fp0000000000';

/** Submitted, then the service's job succeeds: the task is downloading. */
function succeed(store: Store, id: string, uuid: string, cost: number): void {
  submit(store, 'r1', id, uuid, cost, FP);
  store.jobs.recordJobStatus(uuid, 'success', { status: 'success' }, 'poll');
}

function finish(store: Store, id: string, dir: string, name: string, kind: 'image' | 'video'): void {
  store.files.recordFile('r1', id, { index: 1, kind, path: join(dir, id, name), bytes: 10, sha256: 'h' });
  store.tasks.markDone('r1', id);
}

function statesRun(store: Store, dir: string): void {
  store.tasks.upsertTasks('r1', [
    { ...task('retry'), retries: 2 },
    task('unf', {}, 2),
    task('gone', {}, 4),
    task('slow', {}, 1),
    task('assumed', {}, 5),
    task('rec'),
    task('bad'),
    task('clip'),
  ]);
  // Two failed (refunded) jobs, then a third that succeeds: three charges, two refunds.
  for (const n of [1, 2]) {
    submit(store, 'r1', 'retry', `uuid-retry-${n}`, 3, FP);
    store.jobs.recordJobStatus(`uuid-retry-${n}`, 'failed', { status: 'failed' }, 'poll');
    expect(store.tasks.requeueTasks('r1', ['retry'], ['failed'])).toEqual(['retry']);
  }
  succeed(store, 'retry', 'uuid-retry-3', 3);
  finish(store, 'retry', dir, '1.png', 'image');

  succeed(store, 'unf', 'uuid-unf', 2);
  store.tasks.moveTask(
    'r1',
    'unf',
    'unfetched',
    'the download link expired; the next run asks for a new one',
  );
  succeed(store, 'gone', 'uuid-gone', 4);
  store.tasks.moveTask('r1', 'gone', 'unfetched', 'connection reset');
  store.tasks.moveTask('r1', 'gone', 'lost', 'paid, result lost: the service answered 404 for job uuid-gone');
  submit(store, 'r1', 'slow', 'uuid-slow', 1, FP);
  store.tasks.moveTask('r1', 'slow', 'stalled', 'past its deadline of 600 s');

  const n = store.submissions.recordSubmitIntent('r1', 'assumed');
  store.submissions.recordSubmitted('r1', 'assumed', n, {
    imgUuid: 'uuid-assumed',
    cost: undefined,
    listPrice: 5,
    keyFingerprint: FP,
  });
  store.jobs.recordJobStatus('uuid-assumed', 'success', { status: 'success' }, 'poll');
  finish(store, 'assumed', dir, '1.png', 'image');

  const r = store.submissions.recordSubmitIntent('r1', 'rec');
  store.submissions.recordInDoubt('r1', 'rec', r, { message: 'connection reset after sending' });
  expect(
    store.submissions.adoptInDoubt('r1', 'rec', { imgUuid: 'uuid-rec', cost: 3, keyFingerprint: FP }),
  ).toBe(true);
  store.jobs.recordJobStatus('uuid-rec', 'success', { status: 'success' }, 'callback');
  finish(store, 'rec', dir, '1.png', 'image');

  submit(store, 'r1', 'bad', 'uuid-bad', 3, FP);
  store.jobs.recordJobStatus('uuid-bad', 'failed', { status: 'failed' }, 'poll');

  // The service returned an mp4 for an image model: stored as what its bytes are.
  succeed(store, 'clip', 'uuid-clip', 3);
  finish(store, 'clip', dir, '1.mp4', 'video');
}

function built(dir: string) {
  const store = ctx.store();
  statesRun(store, dir);
  const reader = { state: 'state/mediabatch.db' };
  return { store, report: buildReport(store, 'r1', { now: ctx.clock().now(), runDir: dir, reader }) };
}

describe('the report of tasks in the new states', () => {
  it('counts three attempts of a task that succeeded on its third, and nets them to one charge', () => {
    const { report } = built(runDir());
    const retry = report.tasks.find((t) => t.id === 'retry');
    expect(retry).toMatchObject({
      status: 'done',
      attempts: 3,
      charged_attempts: 3,
      jobs: 3,
      charged: 9,
      refunded: 6,
      net: 3,
      cost_assumed: false,
      recovered_from_doubt: false,
    });
    expect(report.totals.retried).toBe(1);
    expect(report.by_model[0]?.retried).toBe(1);
  });

  it('lists unfetched, stalled and lost tasks with the tokens they cost and their reason', () => {
    const { report } = built(runDir());
    expect(report.totals.paid_without_result).toEqual({
      tasks: 3,
      tokens: 7,
      unfetched: { tasks: 1, tokens: 2 },
      stalled: { tasks: 1, tokens: 1 },
      lost: { tasks: 1, tokens: 4 },
    });
    expect(report.tasks.find((t) => t.id === 'gone')).toMatchObject({
      status: 'lost',
      net: 4,
      error: 'paid, result lost: the service answered 404 for job uuid-gone',
    });
    expect(report.advice).toContain(
      '1 task paid, result not on disk yet (2 tokens): the download did not finish. `mediabatch run /m/spring.yaml --run-id r1` fetches it without paying again.',
    );
    expect(report.advice.join('\n')).toMatch(/1 task paid, result lost \(4 tokens\)/);
  });

  it('marks the assumed cost and the recovery from doubt', () => {
    const { report } = built(runDir());
    const byId = new Map(report.tasks.map((t) => [t.id, t]));
    expect(byId.get('assumed')).toMatchObject({ cost_assumed: true, charged: 5, net: 5 });
    expect(byId.get('rec')).toMatchObject({
      status: 'done',
      recovered_from_doubt: true,
      attempts: 1,
      charged_attempts: 1,
    });
    expect(report.totals).toMatchObject({ cost_assumed: 1, recovered_from_doubt: 1 });
    // 9 + 2 + 4 + 1 + 5 + 3 + 3 + 3 charged; 6 + 3 refunded.
    expect(report.totals.net.tokens).toBe(21);
  });

  it("keeps the run's --allow-local-output and --allow-partial in report.json, and report.md's resume command carries them", () => {
    const dir = runDir();
    const store = ctx.store();
    statesRun(store, dir);
    store.runs.updateRunSettings('r1', { invocation: { allowLocalOutput: true, allowPartial: true } });
    const report = buildReport(store, 'r1', {
      now: ctx.clock().now(),
      runDir: dir,
      reader: { state: 's.db' },
    });
    expect(report.run.invocation).toMatchObject({ allow_local_output: true, allow_partial: true });
    expect(reportMarkdown(report)).toContain(
      'To resume, run `mediabatch run /m/spring.yaml --run-id r1 --state s.db --allow-local-output --allow-partial`',
    );
  });

  it('puts the paid tasks not on disk first in report.md, with their tokens, reason and how to resume', () => {
    const dir = runDir();
    const md = reportMarkdown(built(dir).report);
    const paidAt = md.indexOf('## Paid, not on disk');
    const failedAt = md.indexOf('## Failed, rejected and blocked tasks');
    expect(paidAt).toBeGreaterThan(0);
    expect(failedAt).toBeGreaterThan(paidAt);
    const paid = md.slice(paidAt, failedAt);
    expect(paid).toContain(
      '3 tasks charged 7 tokens and their result is not on disk. To resume, run `mediabatch run /m/spring.yaml --run-id r1`',
    );
    expect(paid).toContain(
      '| `unf` | flat-image | unfetched (paid, not on disk yet) | 2 | 1 | the download link expired; the next run asks for a new one |',
    );
    expect(paid).toContain(
      '| `gone` | flat-image | lost (paid, result lost) | 4 | 1 | paid, result lost: the service answered 404 for job uuid-gone |',
    );
    expect(paid).toContain(
      '| `slow` | flat-image | stalled (paid, past its deadline) | 1 | 1 | past its deadline of 600 s |',
    );
    expect(paid).not.toContain('`bad`');
    expect(md.slice(failedAt)).toMatch(/\| `bad` \| flat-image \| failed \| 3 \| 3 \|/);
    expect(md).toContain('| `retry` | flat-image | done | 3 | 3 | 9 | 6 | 3 |');
    expect(md).toContain('| `assumed` | flat-image | done | 1 | 5 | 5 | 0 | 5 (assumed: list price) |');
    expect(md).toContain('| `rec` | flat-image | done, recovered from doubt | 1 |');
    expect(md).toContain(
      '1 task retried after a failed, refunded job (2 retries, net 3 tokens) · 1 recovered from doubt · 1 with an assumed cost',
    );
  });

  it('writes attempts, markers and the reason into report.csv', () => {
    const rows = parse(reportCsv(built(runDir()).report), { columns: true }) as Record<string, string>[];
    const byId = new Map(rows.map((r) => [r.task_id, r]));
    expect(byId.get('retry')).toMatchObject({
      attempts: '3',
      charged_attempts: '3',
      net_tokens: '3',
      cost_assumed: 'false',
    });
    expect(byId.get('assumed')?.cost_assumed).toBe('true');
    expect(byId.get('rec')?.recovered_from_doubt).toBe('true');
    expect(byId.get('gone')).toMatchObject({ status: 'lost', net_tokens: '4' });
    expect(byId.get('gone')?.error).toMatch(/^paid, result lost/);
  });

  it('streams to disk the same report.json, report.csv and report.md as built in memory, and the gallery', async () => {
    const dir = runDir();
    const { store, report } = built(dir);
    const written = await writeReport(store, 'r1', dir, {
      now: ctx.clock().now(),
      reader: { state: 'state/mediabatch.db' },
    });
    expect(JSON.parse(readFileSync(written.files.json, 'utf8'))).toEqual(report);
    expect(readFileSync(written.files.csv, 'utf8')).toBe(reportCsv(report));
    expect(readFileSync(written.files.markdown, 'utf8')).toBe(reportMarkdown(report));
    expect(readFileSync(written.files.gallery, 'utf8')).toContain('"i":"clip","m":"flat-image","s":"done"');
  });

  it("gives the gallery's money tiles their unit, one token in the singular", () => {
    const { report } = built(runDir());
    const html = renderGallery({ ...report, balance: { before: 2, after: 1, change: 1 } });
    expect(html).toContain(
      '<div class="label">Balance</div><div class="value">1 token</div><div class="sub">after the run; 2 tokens before it</div>',
    );
    expect(html).toMatch(
      /<div class="label">Net cost<\/div><div class="value">[\d.,]+ tokens?<\/div><div class="sub">[^<]* · charged [\d.,]+ tokens? · refunded [\d.,]+ tokens?/,
    );
  });

  it('gives the gallery the stored kind of an mp4 returned for an image model', () => {
    const { report } = built(runDir());
    const html = renderGallery(report);
    const data = JSON.parse(
      html.slice(html.indexOf('id="gallery-data">') + 18, html.indexOf('</script>')),
    ) as { tasks: { i: string; m: string; files: { p: string; k: string }[] }[] };
    expect(data.tasks.find((t) => t.i === 'clip')).toMatchObject({
      m: 'flat-image',
      files: [{ p: 'clip/1.mp4', k: 'video' }],
    });
  });
});

requireBrowser();

describe.skipIf(SKIP_BROWSER)(`the gallery of the new states in ${CHROMIUM}`, () => {
  it('plays the mp4 of an image model in a <video>, and says which paid cards have no result', async () => {
    const dir = runDir();
    const { report } = built(dir);
    mkdirSync(join(dir, 'clip'), { recursive: true });
    writeFileSync(join(dir, 'index.html'), renderGallery(report));
    const profile = mkdtempSync(join(tmpdir(), 'mediabatch-chromium-'));
    dirs.push(profile);
    const browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--allow-file-access-from-files'],
    });
    try {
      const page = await browser.newPage();
      await page.goto(pathToFileURL(join(dir, 'index.html')).href);
      await page.waitForSelector('#grid .card');
      const clip = page.locator('.card[data-id="clip"]');
      expect(await clip.locator('video source').getAttribute('src')).toBe('clip/1.mp4');
      expect(await clip.locator('img').count()).toBe(0);
      expect(await page.locator('.card[data-id="unf"] .media').innerText()).toContain(
        'Paid, result not on disk yet',
      );
      expect(await page.locator('.card[data-id="gone"] .paid').innerText()).toBe(
        'Paid, result lost: 4 tokens',
      );
      expect(await page.locator('.card[data-id="retry"] .marks').innerText()).toContain('3 attempts');
      await page.locator('#f-status .chip[data-status="lost"]').click();
      expect(
        await page.locator('#grid .card').evaluateAll((cards) => cards.map((c) => c.getAttribute('data-id'))),
      ).toEqual(['gone']);
    } finally {
      await browser.close();
    }
  });
});
