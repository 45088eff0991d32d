// A run larger than the view reads within a request (figures.ts: SYNC_TASKS): its cost table, spend and
// finished series are read in the background in short chunks, then kept up to date incrementally while
// another connection finishes tasks, charges them, and undoes finishes (a retry). What the page is told
// must match the state file each time.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fillViewRun, VIEW_RUN } from '../../bench/view-fill.js';
import { SYNC_TASKS } from '../../src/view/figures.js';
import { startView, type ViewServer } from '../../src/view/server.js';
import { raw } from './helpers.js';

const TASKS = 50_000;
let dir: string;
let file: string;
let view: ViewServer;
let writer: Database.Database;

interface Figures {
  models: Record<string, { tasks: number; done: number; estimated: number }>;
  finished: number;
  charged: number;
}

/** The figures as the state file has them, counted in one statement each. */
function truth(): Figures {
  const models: Figures['models'] = {};
  const rows = writer
    .prepare<[string], { model: string; tasks: number; done: number; estimated: number }>(
      `SELECT model, count(*) AS tasks, sum(state = 'done') AS done, total(est_tokens) AS estimated
       FROM tasks WHERE run_id = ? GROUP BY model`,
    )
    .all(VIEW_RUN);
  for (const r of rows)
    models[r.model] = { tasks: r.tasks, done: r.done, estimated: Math.round(r.estimated) };
  const one = (sql: string) => writer.prepare(sql).pluck().get(VIEW_RUN) as number;
  return {
    models,
    finished: one('SELECT count(*) FROM tasks WHERE run_id = ? AND finished_at IS NOT NULL'),
    charged: Math.round(one(`SELECT total(tokens) FROM ledger WHERE run_id = ? AND kind = 'charge'`)),
  };
}

/** The figures the run page is given. */
async function shown(): Promise<Figures & { ready: boolean }> {
  const answer = await raw(view.port, `/api/runs/${VIEW_RUN}`, { authorization: `Bearer ${view.token}` });
  expect(answer.status, answer.text).toBe(200);
  const d = JSON.parse(answer.text);
  const models: Figures['models'] = {};
  for (const m of d.models)
    models[m.model] = { tasks: m.tasks, done: m.done, estimated: Math.round(m.estimated) };
  return {
    ready: d.figures_ready,
    models,
    finished: d.finished_series.points.at(-1)?.[1] ?? 0,
    charged: Math.round(d.run.charged),
  };
}

/** Asks the page's question until it matches the state file (10 s at most), then compares. */
async function expectCaughtUp(): Promise<void> {
  const want = truth();
  let got = await shown();
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline && !isDeepStrictEqual(got, { ...want, ready: true })) {
    await new Promise((r) => setTimeout(r, 100));
    got = await shown();
  }
  expect(got).toEqual({ ...want, ready: true });
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mb-view-figures-'));
  file = join(dir, 'state.db');
  fillViewRun(file, TASKS);
  writer = new Database(file);
  view = await startView({ stateFile: file, cwd: dir });
}, 120_000);

afterAll(async () => {
  await view?.close();
  writer?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('a run larger than one request reads', () => {
  it('is read in the background and then shows the cost table, spend and finishes of the state file', async () => {
    expect(TASKS).toBeGreaterThan(SYNC_TASKS);
    await expectCaughtUp();
  });

  it('keeps up while tasks finish and are charged, and when finishes are undone', async () => {
    const now = new Date().toISOString();
    writer.transaction(() => {
      writer
        .prepare(
          `UPDATE tasks SET state = 'done', finished_at = ?, updated_at = ? WHERE run_id = ? AND task_id IN
             (SELECT task_id FROM tasks WHERE run_id = ? AND state = 'pending' LIMIT 300)`,
        )
        .run(now, now, VIEW_RUN, VIEW_RUN);
      writer
        .prepare(
          `INSERT INTO ledger (key_fingerprint, period, run_id, task_id, img_uuid, kind, tokens, at)
           SELECT 'fp0123456789', '2026-01', run_id, task_id, 'u-' || task_id, 'charge', est_tokens, finished_at
           FROM tasks WHERE run_id = ? AND finished_at = ?`,
        )
        .run(VIEW_RUN, now);
    })();
    await expectCaughtUp();
    // A retry puts finished tasks back to pending: the series must count them no more.
    writer
      .prepare(
        `UPDATE tasks SET state = 'pending', finished_at = NULL WHERE run_id = ? AND task_id IN
           (SELECT task_id FROM tasks WHERE run_id = ? AND state = 'done' ORDER BY seq LIMIT 200)`,
      )
      .run(VIEW_RUN, VIEW_RUN);
    await expectCaughtUp();
  });

  it('keeps no read snapshot open between its reads: the writer can checkpoint the whole WAL', async () => {
    writer.prepare(`UPDATE tasks SET updated_at = ? WHERE run_id = ? AND seq <= 100`).run('x', VIEW_RUN);
    await expectCaughtUp();
    // A reader holding a snapshot makes a TRUNCATE checkpoint report busy (and the WAL grow).
    expect(writer.pragma('wal_checkpoint(TRUNCATE)')).toEqual([{ busy: 0, log: 0, checkpointed: 0 }]);
  });
});

describe('a view that closes', () => {
  it('lets a page that reconnects its event stream go at once, so the server can close', async () => {
    view.feed.stop();
    const started = Date.now();
    const answer = await raw(view.port, '/api/events', { authorization: `Bearer ${view.token}` });
    expect(answer.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(5_000);
    await view.close();
  });
});
