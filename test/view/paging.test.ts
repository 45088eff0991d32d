// Paging at scale: a state file of 100,000 tasks (bench/view-fill.ts: stored by the store's own insert,
// then a realistic mix of states). Every page is read by keyset: walking all of them lists each task
// once, and the first page does not read the run.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fillViewRun, VIEW_RUN } from '../../bench/view-fill.js';
import { startView, type ViewServer } from '../../src/view/server.js';
import { raw } from './helpers.js';

const RUN = VIEW_RUN;
const TASKS = 100_000;
let dir: string;
let view: ViewServer;
let count: (sql: string) => number;

async function page(query: string) {
  const answer = await raw(view.port, `/api/runs/${RUN}/tasks?${query}`, {
    authorization: `Bearer ${view.token}`,
  });
  expect(answer.status, answer.text).toBe(200);
  return JSON.parse(answer.text) as {
    tasks: { id: string; state: string; model: string }[];
    next_cursor: string | null;
  };
}

async function walk(query: string): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const p = await page(`${query}${cursor ? `&cursor=${cursor}` : ''}`);
    ids.push(...p.tasks.map((t) => t.id));
    cursor = p.next_cursor;
  } while (cursor !== null);
  return ids;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mb-view-paging-'));
  const file = join(dir, 'state.db');
  fillViewRun(file, TASKS);
  const db = new Database(file, { readonly: true });
  count = (sql) => (db.prepare(sql).pluck().get() as number) ?? 0;
  view = await startView({ stateFile: file, cwd: dir });
}, 120_000);

afterAll(async () => {
  await view?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('a run of 100,000 tasks', () => {
  // How fast the first page comes is measured by `npm run bench` (bench/view.ts), not bounded here: a
  // wall-clock limit on two shared cores fails on a loaded machine, not on slow code.
  it('answers the first page of each order and filter in full', async () => {
    for (const query of [
      'order=newest',
      'order=id',
      'state=done',
      'state=failed',
      'state=in_doubt&order=id',
      'model=speech-v3',
    ]) {
      const p = await page(`${query}&limit=48`);
      expect(p.tasks.length, query).toBe(48);
    }
  });

  it('lists every task exactly once, newest first then the unfinished, 200 a page', async () => {
    const ids = await walk('order=newest&limit=200');
    expect(ids.length).toBe(TASKS);
    expect(new Set(ids).size).toBe(TASKS);
    const unfinished = count(`SELECT count(*) FROM tasks WHERE run_id = '${RUN}' AND finished_at IS NULL`);
    expect(unfinished).toBeGreaterThan(0);
    // Every finished task is listed before every unfinished one.
    const firstPending = ids.indexOf('t-35');
    expect(firstPending).toBeGreaterThanOrEqual(TASKS - unfinished);
  }, 60_000);

  it('pages a filter by state (a small set, sorted) and by model (a large one, by index) without gaps', async () => {
    const failed = await walk('state=failed&order=id&limit=200');
    expect(failed.length).toBe(
      count(`SELECT count(*) FROM tasks WHERE run_id = '${RUN}' AND state = 'failed'`),
    );
    expect(new Set(failed).size).toBe(failed.length);
    expect(failed).toEqual([...failed].sort());
    const speechDone = await walk('state=done&model=speech-v3&limit=200');
    expect(speechDone.length).toBe(
      count(`SELECT count(*) FROM tasks WHERE run_id = '${RUN}' AND state = 'done' AND model = 'speech-v3'`),
    );
    expect(new Set(speechDone).size).toBe(speechDone.length);
  }, 60_000);

  it('finds a task by text', async () => {
    const p = await page('q=variant%2099999%2C');
    expect(p.tasks.map((t) => t.id)).toEqual(['t-99999']);
  });
});
