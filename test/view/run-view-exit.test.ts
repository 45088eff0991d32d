// `run --view` when stdin is not a terminal closes with its run, whatever pages are open: three Chromium
// pages follow the run (event streams, keep-alive sockets, reads every ~2 s), and the process still exits
// within 5 s of its last task finishing.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, requireBrowser, SKIP_BROWSER } from '../helpers/browser.js';
import { type Child, spawnCli, spawnSandbox } from '../helpers/child.js';

requireBrowser();

const KEY = 'view-exit-key';
const MANIFEST = `version: 1
name: batch
concurrency: 2
output: out
tasks:
  - id: "img-{{index}}"
    model: flat-image
    repeat: 12
    input: { prompt: "A mug, number {{index}}", ratio: "1:1" }
`;

let dir: string;
let sandbox: { child: Child; baseUrl: string };
let runner: Child | undefined;
let browser: Browser;

describe.skipIf(SKIP_BROWSER)('run --view with pages open', () => {
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mb-view-exit-'));
    await writeFile(join(dir, 'batch.yaml'), MANIFEST);
    sandbox = await spawnSandbox(['--api-key', KEY, '--speed', '0.3']);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  }, 60_000);

  afterAll(async () => {
    runner?.proc.kill('SIGKILL');
    sandbox?.child.proc.kill('SIGKILL');
    await browser?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('exits within 5 s of its last task with three pages open', async () => {
    const db = join(dir, 'state.db');
    const child = spawnCli(['--state', db, 'run', 'batch.yaml', '--yes', '--view', '--retries', '0'], {
      cwd: dir,
      env: { MEDIABATCH_API_KEY: KEY, MEDIABATCH_BASE_URL: sandbox.baseUrl, MEDIABATCH_POLL_SCALE: '0.2' },
    });
    runner = child;
    expect(await child.waitFor('\n')).toBe(true);
    const url = /^View: (\S+)$/m.exec(child.stdout())?.[1] ?? '';
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=/);
    let exitedAt = 0;
    child.proc.on('exit', () => {
      exitedAt = Date.now();
    });
    // Three pages, each with its event stream open: two on the run page, one on a task's page.
    // Tabs of one browser: they share its cookie and its six connections to the view.
    const tabs = await browser.newContext();
    const pages = await Promise.all([0, 1, 2].map(() => tabs.newPage()));
    for (const page of pages) {
      await page.goto(url);
      await page.waitForSelector('main[data-ready="run"]');
      await page.waitForSelector('#live[data-live="on"]');
    }
    await pages[2]?.goto(new URL('/#/run/batch/task/img-1', url).href);
    await pages[2]?.waitForSelector('main[data-ready="task"]');
    // One page also reads without a pause, as a busy reader does: its socket is never idle for long.
    await pages[1]?.evaluate(`(() => {
      const again = () => fetch('/api/runs').then((r) => r.text()).catch(() => '').then(() => setTimeout(again, 20));
      again();
    })()`);
    const code = await child.exited;
    expect(code).toBe(0);
    const conn = new Database(db, { readonly: true });
    const last = conn.prepare('SELECT max(finished_at) FROM tasks').pluck().get() as string;
    conn.close();
    expect(exitedAt - Date.parse(last)).toBeLessThan(5000);
    await tabs.close();
  }, 120_000);
});
