// The JSON API's shapes on a real sandbox run with failures and tasks in doubt (money checked against
// the sandbox's own balance), filters and keyset paging, the task page, and server-sent events while
// another run of the same state file goes.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_DEFAULTS } from '../../src/sandbox/options.js';
import { openStore } from '../../src/store/index.js';
import { startView, type ViewServer } from '../../src/view/server.js';
import type { RunEnv } from '../helpers/run-env.js';
import { faultyRun, raw } from './helpers.js';

let env: RunEnv;
let view: ViewServer;
const auth = () => ({ authorization: `Bearer ${view.token}` });

async function json(path: string) {
  const answer = await raw(view.port, path, { authorization: `Bearer ${view.token}` });
  expect(answer.status, `${path}: ${answer.text}`).toBe(200);
  expect(answer.headers['content-type']).toContain('application/json');
  return JSON.parse(answer.text);
}

/** Every task id of the list, page after page by cursor. */
async function walk(query: string): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 100; i++) {
    const page = await json(`/api/runs/batch/tasks?${query}${cursor ? `&cursor=${cursor}` : ''}`);
    ids.push(...page.tasks.map((t: { id: string }) => t.id));
    cursor = page.next_cursor;
    if (cursor === null) return ids;
  }
  throw new Error('no end of pages');
}

beforeAll(async () => {
  env = await faultyRun();
  view = await startView({ stateFile: env.db, cwd: env.dir });
}, 60_000);

afterAll(async () => {
  await view?.close();
  await env?.close();
});

describe('GET /api/runs/:run', () => {
  it('gives counters, money, failures by reason, in-doubt advice and the two series, as the store and the sandbox say', async () => {
    const d = await json('/api/runs/batch');
    const states = env.query<{ state: string; n: number }>(
      'SELECT state, count(*) AS n FROM tasks GROUP BY state',
    );
    expect(d.v).toBe(1);
    for (const { state, n } of states) expect(d.run.by_state[state]).toBe(n);
    expect(d.run.tasks).toBe(13);
    const failed = env.query<{ task_id: string }>(
      "SELECT task_id FROM tasks WHERE state = 'failed' ORDER BY seq",
    );
    const doubt = env.query<{ task_id: string }>(
      "SELECT task_id FROM tasks WHERE state = 'in_doubt' ORDER BY seq",
    );
    expect(failed.length).toBeGreaterThan(1);
    expect(doubt.length).toBeGreaterThan(1);
    // One row per reason: the same error in several tasks is one group with its count and its tasks.
    const group = d.failures.find(
      (f: { reason: string }) => f.reason === 'the job failed; the API refunds its tokens',
    );
    expect(group).toEqual({
      reason: 'the job failed; the API refunds its tokens',
      states: ['failed'],
      count: failed.length,
      tasks: failed.map((r) => r.task_id),
    });
    expect(d.in_doubt.tasks).toBe(doubt.length);
    expect(d.in_doubt.advice).toContain(`${doubt.length} task(s) in doubt`);
    expect(d.in_doubt.advice).toContain('--retry-in-doubt');
    expect(d.in_doubt.retry_max).toBeCloseTo(0.2 * doubt.length, 6);
    // Money: the sandbox charged the ledger's net, plus some of the jobs whose answer was lost (in
    // doubt), at most what the view says a retry of them may cost.
    const spentAtSandbox = SANDBOX_DEFAULTS.balance - env.state().balance;
    expect(spentAtSandbox).toBeGreaterThan(d.run.net);
    expect(spentAtSandbox).toBeLessThanOrEqual(d.run.net + d.in_doubt.retry_max + 1e-9);
    expect(d.spend_series.columns).toEqual(['time_ms', 'charged', 'refunded', 'net']);
    const last = d.spend_series.points.at(-1);
    expect(last.slice(1)).toEqual([d.run.charged, d.run.refunded, d.run.net]);
    expect(d.run.refunded).toBeCloseTo(0.2 * failed.length, 6);
    expect(d.spend_series.worst_case).toBe(d.run.worst_case);
    expect(d.finished_series.points.at(-1)[1]).toBe(
      d.finished_series.unfinished === 0 ? 13 - doubt.length : expect.any(Number),
    );
    const models = Object.fromEntries(d.models.map((m: { model: string }) => [m.model, m]));
    expect(models['flow22_spicy']).toMatchObject({ tasks: 1, done: 1, charged: 5, net: 5 });
    expect(models['flat-image'].tasks).toBe(12);
  });

  it('answers 404 for a run the state file does not have', async () => {
    const answer = await raw(view.port, '/api/runs/nope', { authorization: `Bearer ${view.token}` });
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.text).error).toBe('run nope: not found in the state file');
  });
});

describe('GET /api/runs/:run/tasks', () => {
  it('filters by state, model and text (id, prompt, error), and pages by cursor without gaps or repeats', async () => {
    const failed = env.query<{ task_id: string }>(
      "SELECT task_id FROM tasks WHERE state = 'failed' ORDER BY task_id",
    );
    expect((await walk('state=failed&order=id&limit=1')).sort()).toEqual(failed.map((r) => r.task_id).sort());
    expect(await walk('model=flow22_spicy')).toEqual(['clip']);
    expect(await walk('q=NUMBER%2012')).toEqual(['img-12']);
    expect((await walk('q=refunds')).sort()).toEqual(failed.map((r) => r.task_id).sort());
    const byId = await walk('order=id&limit=4');
    expect(byId).toEqual([...byId].sort());
    expect(new Set(byId).size).toBe(13);
    const newest = await walk('order=newest&limit=3');
    expect(new Set(newest).size).toBe(13);
    const finishedFirst = newest.slice(
      0,
      13 - env.query('SELECT 1 FROM tasks WHERE finished_at IS NULL').length,
    );
    expect(finishedFirst).not.toContain('img-4');
  });

  it('gives a card its files, text and money', async () => {
    const page = await json('/api/runs/batch/tasks?model=flow22_spicy');
    const [clip] = page.tasks;
    expect(clip).toMatchObject({
      id: 'clip',
      state: 'done',
      model: 'flow22_spicy',
      net: 5,
      text: { prompt: 'a slow dolly shot' },
    });
    expect(clip.files).toEqual([
      expect.objectContaining({ index: 1, kind: 'video', url: '/files/batch/clip/1' }),
    ]);
  });

  it('says what is wrong with a bad query: 400 and one line', async () => {
    const answer = await raw(view.port, '/api/runs/batch/tasks?state=nope', {
      authorization: `Bearer ${view.token}`,
    });
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.text).error).toMatch(/^state: unknown state "nope"; known: pending, /);
    const cursor = await raw(view.port, '/api/runs/batch/tasks?cursor=xyz', {
      authorization: `Bearer ${view.token}`,
    });
    expect(JSON.parse(cursor.text).error).toBe(
      'cursor: not a cursor this server gave; start again without it',
    );
  });
});

describe('GET /api/runs/:run/tasks/:task', () => {
  it('gives the request as sent, attempts, ledger lines, the job record, files and links', async () => {
    const [failedTask] = env.query<{ task_id: string }>(
      "SELECT task_id FROM tasks WHERE state = 'failed' LIMIT 1",
    );
    const d = await json(`/api/runs/batch/tasks/${failedTask?.task_id}`);
    expect(d.task).toMatchObject({ id: failedTask?.task_id, state: 'failed', model: 'flat-image' });
    expect(d.request.prompt).toMatch(/^img number \d+$/);
    expect(d.attempts).toEqual([expect.objectContaining({ attempt: 1, outcome: 'submitted' })]);
    expect(d.ledger.map((l: { kind: string; tokens: number }) => [l.kind, l.tokens])).toEqual([
      ['charge', 0.2],
      ['refund', 0.2],
    ]);
    expect(d.job.events.map((e: { status: string }) => e.status)).toContain('failed');
    expect(d.files).toEqual([]);
    const clip = await json('/api/runs/batch/tasks/clip');
    expect(clip.files[0].bytes).toBe(
      env.query<{ bytes: number }>("SELECT bytes FROM files WHERE task_id = 'clip'")[0]?.bytes,
    );
    expect(clip.upstreams).toEqual([]);
    expect(clip.downstreams).toEqual([]);
  });
});

describe('GET /api/events', () => {
  it('pushes run counters and finished tasks while another run of the same state file goes', async () => {
    const events: string[] = [];
    const req = request({
      host: '127.0.0.1',
      port: view.port,
      path: '/api/events',
      headers: { host: `127.0.0.1:${view.port}`, authorization: `Bearer ${view.token}` },
    });
    const opened = new Promise<void>((resolve) => {
      req.on('response', (res) => {
        expect(res.headers['content-type']).toContain('text/event-stream');
        res.on('data', (c: Buffer) => events.push(c.toString('utf8')));
        resolve();
      });
    });
    req.end();
    await opened;
    const file = await env.manifest(
      { name: 'second', tasks: [{ id: 'late', model: 'flat-image', input: { prompt: 'late' } }] },
      'second.yaml',
    );
    env.sandbox.configure({ failRate: 0, chargeThenErrorRate: 0 });
    expect((await env.run(['run', file, '--yes'])).code).toBe(0);
    await new Promise((r) => setTimeout(r, 700));
    req.destroy();
    const text = events.join('');
    expect(text).toContain('event: runs');
    expect(text).toMatch(
      /event: tasks\ndata: \{"v":1,"run":"second","tasks":\[\{"id":"late","state":"done"\}\]/,
    );
    const runEvents = text
      .split('\n\n')
      .filter((e) => e.includes('event: run\n') && e.includes('"run":"second"'));
    expect(runEvents.at(-1)).toContain('"done":1');
  });
});

describe('GET /api/runs/:run/workers', () => {
  it('is empty for a run driven by one process on SQLite, and a worker whose heartbeat runs out is pushed as lost with nothing written', async () => {
    expect(JSON.parse((await raw(view.port, '/api/runs/batch/workers', auth())).text)).toMatchObject({
      v: 1,
      run: 'batch',
      workers: [],
    });
    const events: string[] = [];
    const req = request({
      host: '127.0.0.1',
      port: view.port,
      path: '/api/events',
      headers: { host: `127.0.0.1:${view.port}`, ...auth() },
    });
    await new Promise<void>((resolve) => {
      req.on('response', (res) => {
        res.on('data', (c: Buffer) => events.push(c.toString('utf8')));
        resolve();
      });
      req.end();
    });
    try {
      const store = openStore(env.db);
      try {
        store.workers.join('batch', '7@elsewhere#n', 'elsewhere', 7, 1_500);
      } finally {
        store.close();
      }
      const workerEvents = () =>
        events
          .join('')
          .split('\n\n')
          .filter((e) => e.startsWith('id:') && e.includes('event: workers\n'));
      await expect.poll(() => workerEvents().length, { timeout: 5_000 }).toBe(1);
      expect(workerEvents()[0]).toContain('"state":"working"');
      // SQLite's data version moves only when another connection commits: nothing does from here on.
      await expect.poll(() => workerEvents().length, { timeout: 5_000 }).toBe(2);
      expect(workerEvents()[1]).toContain('"state":"lost"');
      const answer = JSON.parse((await raw(view.port, '/api/runs/batch/workers', auth())).text);
      expect(answer.workers.map((w: { host: string; state: string }) => [w.host, w.state])).toEqual([
        ['elsewhere', 'lost'],
      ]);
    } finally {
      req.destroy();
    }
  });
});

describe('run --view', () => {
  it('prints the address of the view of the run while it goes, and closes it with the run (no terminal)', async () => {
    const file = await env.manifest(
      { name: 'viewed', tasks: [{ id: 'one', model: 'flat-image', input: { prompt: 'one' } }] },
      'viewed.yaml',
    );
    const result = await env.run(['run', file, '--yes', '--view']);
    expect(result.code).toBe(0);
    const lines = result.stdout.split('\n').filter((l) => l.startsWith('View: '));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^View: http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{43}$/);
    // Closed with the run: nothing listens there any more.
    const port = Number(/:(\d+)\//.exec(lines[0] ?? '')?.[1]);
    await expect(raw(port, '/api/runs')).rejects.toThrow(/ECONNREFUSED/);
  });
});
