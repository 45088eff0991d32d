// `mediabatch view` at 1,000,000 tasks (the figures, in `npm run bench`): the state file built
// through the store (bench/view-fill.ts), the view served by the compiled CLI in a process of its own
// (its peak RSS), Chromium's first render of the run page (counters, both charts, the first page of
// results), how long a task's change takes to reach the open page (p95), and what an open page costs
// the run it watches: `run --view` with a Chromium page on its run for the whole run against `run`
// (3,000 images, concurrency 64, sandbox at speed 0, compiled CLI, median of 3, alternated).
//
//   npx tsx bench/view.ts [--tasks 1000000] [--json]
//   npx tsx bench/view.ts --ratio [--tasks 3000]    only the runner's rate with a page ÷ without
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { chromium, type Page } from 'playwright-core';
import { CHROMIUM } from '../test/helpers/browser.js';
import { spawnSandbox } from '../test/helpers/child.js';
import { writeImagesManifest } from './lib/manifests.js';
import { cliMeasured, type Measured, quantile, round } from './lib/measure.js';
import { fillViewRun, VIEW_RUN } from './view-fill.js';

export const FIRST_RENDER_TARGET_MS = 1000;
export const VIEW_RSS_TARGET_MB = 250;
export const SSE_P95_TARGET_MS = 1000;
export const THROUGHPUT_RATIO_TARGET = 0.9;

export interface ViewFigures {
  tasks: number;
  fillSeconds: number;
  /** `mediabatch view big` (compiled) from spawn to its printed address. */
  viewStartMs: number;
  /** From goto to counters, charts and the first results page drawn: the first load, then again. */
  firstRenderMs: number;
  secondRenderMs: number;
  viewPeakRssMb: number;
  /** From the printed address until the run's cost table and series are in (read in the background). */
  figuresReadyMs: number;
  /** The run page's JSON asked back to back meanwhile: the slowest answer, and the median. */
  detailMaxMs: number;
  detailMedianMs: number;
  detailAsks: number;
  sseP95Ms: number;
  sseMedianMs: number;
  changes: number;
  runner: RunnerRatio;
}

const LAUNCH = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];

interface ServedView {
  url: string;
  /** From spawn to the printed address (the first run's figures are read before it). */
  startMs: number;
  stop: () => void;
  done: Promise<Measured>;
}

async function serveView(stateFile: string, cwd: string, run?: string): Promise<ServedView> {
  let url = '';
  const spawned = performance.now();
  let stop: () => void = () => undefined;
  let seen: () => void = () => undefined;
  const printed = new Promise<void>((resolve) => {
    seen = resolve;
  });
  const done = cliMeasured(['--state', stateFile, 'view', ...(run ? [run] : []), '--port', '0'], {
    cwd,
    onStdout: (chunk) => {
      const m = /View: (\S+)/.exec(chunk);
      if (m?.[1]) {
        url = m[1];
        seen();
      }
    },
    interrupter: (interrupt) => {
      stop = interrupt;
    },
  });
  await Promise.race([printed, done.then((m) => Promise.reject(new Error(`view exited: ${m.stderr}`)))]);
  return { url, stop, done, startMs: round(performance.now() - spawned, 0) };
}

/**
 * Asks the run page's JSON back to back from the printed address until its figures are in: how long
 * that took, and how long each answer waited (a figure read that held the event loop shows here).
 */
async function probeDetail(url: string): Promise<{ readyMs: number; latencies: number[] }> {
  const base = new URL(url);
  const token = base.searchParams.get('token') ?? '';
  const started = performance.now();
  const latencies: number[] = [];
  for (;;) {
    const t = performance.now();
    const answer = await fetch(`${base.origin}/api/runs/${VIEW_RUN}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    const body = (await answer.json()) as { figures_ready?: boolean };
    latencies.push(round(performance.now() - t, 0));
    if (body.figures_ready !== false) return { readyMs: round(performance.now() - started, 0), latencies };
    if (performance.now() - started > 120_000) throw new Error('the figures were not in after 120 s');
  }
}

async function renderMs(page: Page, url: string): Promise<number> {
  const start = performance.now();
  await page.goto(url);
  await page.waitForSelector('main[data-ready="run"] #grid .card', { timeout: 60_000 });
  return round(performance.now() - start, 0);
}

/** Moves `changes` tasks to done, one at a time; the page notes when its counter shows each. */
async function sseLatencies(page: Page, stateFile: string, changes: number): Promise<number[]> {
  // Page code as text: the bench is compiled without the DOM's types.
  await page.evaluate(`(() => {
    window.seenAt = [];
    const counters = document.querySelector('#counters');
    new MutationObserver(() => window.seenAt.push(Date.now())).observe(counters.parentElement, {
      childList: true, subtree: true, characterData: true,
    });
  })()`);
  const seen = (): Promise<number> => page.evaluate('window.seenAt.length') as Promise<number>;
  const db = new Database(stateFile);
  const move = db.prepare(
    `UPDATE tasks SET state = 'done', finished_at = ?, updated_at = ? WHERE run_id = ? AND task_id = ?`,
  );
  const pending = db
    .prepare<[string, number], string>(
      `SELECT task_id FROM tasks WHERE run_id = ? AND state = 'pending' LIMIT ?`,
    )
    .pluck()
    .all(VIEW_RUN, changes);
  const latencies: number[] = [];
  try {
    for (const taskId of pending) {
      const before = await seen();
      const now = new Date().toISOString();
      move.run(now, now, VIEW_RUN, taskId);
      const committed = Date.now();
      // Polled from here: the page's CSP forbids the string evaluation waitForFunction would need.
      const deadline = Date.now() + 10_000;
      while ((await seen()) <= before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      const seenAt = (await page.evaluate(`window.seenAt[${before}]`)) as number | undefined;
      latencies.push((seenAt ?? committed) - committed);
      await new Promise((r) => setTimeout(r, 400));
    }
  } finally {
    db.close();
  }
  return latencies;
}

/** The weight of an open page on the run it watches (in `npm run bench` and `bench/view.ts --ratio`). */
export const RATIO_TASKS = 3000;
const RATIO_CONCURRENCY = 64;

export interface RunnerRatio {
  tasks: number;
  /** Tasks a second of `run` without a view, each repetition. */
  without: number[];
  /** Tasks a second of `run --view` with a Chromium page on the run's page from start to end. */
  withPage: number[];
  /** Median with ÷ median without. */
  ratio: number;
  /** The machine's load average (1 min) before and after: other work shares the same cores. */
  load: [number, number];
}

/**
 * One run of `tasks` images at concurrency 64 against the sandbox (speed 0), by the compiled CLI in a
 * process of its own. With `page`: `run --view`, and the page opens the printed address (the run's page)
 * at once and stays on it until the process has exited with its run.
 */
async function runnerRate(
  dir: string,
  name: string,
  baseUrl: string,
  tasks: number,
  page?: Page,
): Promise<number> {
  const file = await writeImagesManifest(dir, { name, count: tasks, concurrency: RATIO_CONCURRENCY });
  const state = join(dir, `${name}.db`);
  let opened: Promise<unknown> = Promise.resolve();
  const m = await cliMeasured(
    ['--state', state, 'run', file, '--yes', '--no-probe', ...(page ? ['--view'] : [])],
    {
      cwd: dir,
      env: { MEDIABATCH_API_KEY: 'sandbox-key', MEDIABATCH_BASE_URL: baseUrl, MEDIABATCH_POLL_SCALE: '0.01' },
      onStdout: (chunk) => {
        const url = /View: (\S+)/.exec(chunk)?.[1];
        if (page && url) {
          opened = page
            .goto(url)
            .then(() => page.waitForSelector('main[data-ready="run"]', { timeout: 60_000 }));
        }
      },
    },
  );
  if (m.code !== 0) throw new Error(`run exited ${m.code}: ${m.stderr.slice(-1000)}`);
  if (page) {
    await opened;
    await page.goto('about:blank');
  }
  return round(tasks / (m.ms / 1000), 1);
}

/**
 * The runner's rate with a page open on its run ÷ without, median of 3, the two alternated so that the
 * machine's other load falls on both alike.
 */
export async function measureRunnerRatio(
  tasks = RATIO_TASKS,
  log: (line: string) => void = () => undefined,
): Promise<RunnerRatio> {
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-view-ratio-'));
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: LAUNCH });
  const sandbox = await spawnSandbox(['--speed', '0', '--balance', '1e9', '--seed', '7']);
  const loadBefore = round(loadavg()[0] ?? 0, 1);
  try {
    await cliMeasured(['--version'], { cwd: dir });
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    const without: number[] = [];
    const withPage: number[] = [];
    for (let i = 0; i < 3; i++) {
      without.push(await runnerRate(dir, `plain${i}`, sandbox.baseUrl, tasks));
      withPage.push(await runnerRate(dir, `viewed${i}`, sandbox.baseUrl, tasks, page));
      log(`view: runner ${without.at(-1)} tasks/s without a view, ${withPage.at(-1)} with a page on its run`);
    }
    const median = (xs: number[]) => quantile(xs, 0.5);
    return {
      tasks,
      without,
      withPage,
      ratio: round(median(withPage) / median(without), 3),
      load: [loadBefore, round(loadavg()[0] ?? 0, 1)],
    };
  } finally {
    sandbox.child.proc.kill('SIGTERM');
    await browser.close();
    await rm(dir, { recursive: true, force: true });
  }
}

export async function measureView(
  count: number,
  log: (line: string) => void = () => undefined,
): Promise<ViewFigures> {
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-view-'));
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: LAUNCH });
  try {
    const file = join(dir, 'state.db');
    const started = performance.now();
    fillViewRun(file, count, join(dir, 'out'));
    const fillSeconds = round((performance.now() - started) / 1000, 1);
    log(`view: ${count.toLocaleString('en-US')} tasks stored in ${fillSeconds} s`);
    // The first compiled command builds dist/ (tsc): not part of the view's start.
    await cliMeasured(['--version'], { cwd: dir });
    const view = await serveView(file, dir, VIEW_RUN);
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    // The browser itself started before the clock: the figure is the page's, not Chromium's start.
    await page.goto('about:blank');
    // The first render while the figures are still read, and the run's JSON asked alongside.
    const [firstRenderMs, probe] = await Promise.all([renderMs(page, view.url), probeDetail(view.url)]);
    const secondRenderMs = await renderMs(page, view.url.replace(/\?token=.*/, `#/run/${VIEW_RUN}`));
    log(`view: start ${view.startMs} ms, first render ${firstRenderMs} ms, again ${secondRenderMs} ms`);
    log(
      `view: figures in ${probe.readyMs} ms after the address; run JSON asked ${probe.latencies.length} times meanwhile, slowest ${Math.max(...probe.latencies)} ms, median ${quantile(probe.latencies, 0.5)} ms`,
    );
    const latencies = await sseLatencies(page, file, 20);
    view.stop();
    const served = await view.done;
    await page.close();
    log(`view: change to page p95 ${quantile(latencies, 0.95)} ms; view peak RSS ${served.peakRssMb} MB`);
    const median = (xs: number[]) => quantile(xs, 0.5);
    return {
      tasks: count,
      fillSeconds,
      viewStartMs: view.startMs,
      firstRenderMs,
      secondRenderMs,
      viewPeakRssMb: served.peakRssMb,
      figuresReadyMs: probe.readyMs,
      detailMaxMs: Math.max(...probe.latencies),
      detailMedianMs: quantile(probe.latencies, 0.5),
      detailAsks: probe.latencies.length,
      sseP95Ms: quantile(latencies, 0.95),
      sseMedianMs: median(latencies),
      changes: latencies.length,
      runner: await measureRunnerRatio(RATIO_TASKS, log),
    };
  } finally {
    await browser.close();
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: { tasks: { type: 'string' }, json: { type: 'boolean' }, ratio: { type: 'boolean' } },
  });
  const log = (l: string) => process.stderr.write(`${l}\n`);
  const figures = values.ratio
    ? await measureRunnerRatio(Number(values.tasks ?? RATIO_TASKS), log)
    : await measureView(Number(values.tasks ?? 1_000_000), log);
  console.log(values.json ? JSON.stringify(figures) : figures);
}
