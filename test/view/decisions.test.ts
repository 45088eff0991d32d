// Decisions through the view over real HTTP (approve, reject, re-roll): the token header and the same origin are
// required (a cross-site POST changes nothing, money and state read back), a decision on a task that moved
// since the page read it is refused with the reason, the re-roll price says what the budget leaves and a
// re-roll over it is refused before anything is recorded, and `review <run> --json` lists what the view
// shows as awaiting review.
import { request as httpRequest } from 'node:http';
import Database from 'better-sqlite3';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readCookie } from '../../src/view/security.js';
import { startView, type ViewServer } from '../../src/view/server.js';
import { VARIANTS } from '../helpers/review-chain.js';
import { makeRunEnv, type RunEnv, taskStates } from '../helpers/run-env.js';
import { raw } from './helpers.js';

let env: RunEnv;
let view: ViewServer;
let file: string;

async function sandboxState(): Promise<{ balance: number; jobs: Array<{ model: string }> }> {
  const answer = await request(`${env.sandbox.baseUrl}/_sandbox/state`);
  return (await answer.body.json()) as { balance: number; jobs: Array<{ model: string }> };
}

/** A POST with a JSON body and exactly these headers (Host set to the view's address). */
function post(path: string, body: unknown, headers: Record<string, string>) {
  const text = JSON.stringify(body);
  return new Promise<{ status: number; json: Record<string, unknown> }>((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: view.port,
        path,
        method: 'POST',
        headers: {
          host: `127.0.0.1:${view.port}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(text),
          ...headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const t = Buffer.concat(chunks).toString('utf8');
          let json: Record<string, unknown> = {};
          try {
            json = JSON.parse(t) as Record<string, unknown>;
          } catch {
            json = { text: t };
          }
          resolve({ status: res.statusCode ?? 0, json });
        });
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

const auth = () => ({ authorization: `Bearer ${view.token}` });
const writer = () => ({
  ...auth(),
  'x-mediabatch-token': view.token,
  origin: `http://127.0.0.1:${view.port}`,
  'sec-fetch-site': 'same-origin',
});

async function getJson(path: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const answer = await raw(view.port, path, auth());
  return { status: answer.status, json: JSON.parse(answer.text) as Record<string, unknown> };
}

interface CardJson {
  id: string;
  review: { status: string; version: number; attempt: number } | null;
}

beforeAll(async () => {
  env = await makeRunEnv();
  file = await env.manifest({ tasks: VARIANTS, concurrency: 8, budget: 200 });
  const first = await env.run(['run', file, '--yes']);
  if (first.code !== 4) throw new Error(`run exited ${first.code}: ${first.stderr}`);
  view = await startView({ stateFile: env.db, cwd: env.dir });
}, 60_000);

afterAll(async () => {
  await view?.close();
  await env?.close();
});

describe('the chains that wait, on the page as in status', () => {
  it("names each upstream's link and where its reviewed result stands, as `status <run> --json` does", async () => {
    const detail = await getJson('/api/runs/batch');
    const status = JSON.parse((await env.run(['status', 'batch', '--json'])).stdout) as {
      chains: Array<{ task: string; state: string; after: unknown[] }>;
    };
    const chains = detail.json['chains'] as Array<{ task: string; after: unknown[] }>;
    // Each clip waits for a person, not a job: its still is done and awaits review.
    expect(chains.map((c) => c.after)).toEqual(
      ['1', '2', '3', '4'].map((i) => [
        { name: '', task: `still-mug-${i}`, state: 'done', review: 'awaiting review' },
      ]),
    );
    const waiting = new Set(chains.map((c) => c.task));
    expect(chains).toEqual(status.chains.filter((c) => waiting.has(c.task)));
  });

  it('says what status says the run needs: the review, not a `run` that would send nothing', async () => {
    const unfinished = (await getJson('/api/runs/batch')).json['unfinished'] as {
      tasks: number;
      advice: unknown;
    };
    const status = await env.run(['status', 'batch']);
    expect(status.stdout).toContain('4 awaiting a decision (4 tasks wait for them)');
    expect(status.stdout).not.toContain('unfinished:');
    expect(unfinished).toEqual({ tasks: 4, advice: null });
  });
});

describe('the view lists what awaits review', () => {
  it('filters cards by review=awaiting, each with its version, and matches `review <run> --json`', async () => {
    const list = await getJson('/api/runs/batch/tasks?review=awaiting&order=id');
    expect(list.status).toBe(200);
    const cards = list.json['tasks'] as CardJson[];
    const cli = JSON.parse((await env.run(['review', 'batch', '--json'])).stdout) as {
      awaiting: Array<{ taskId: string; version: number; attempt: number }>;
    };
    expect(cards.map((c) => c.id)).toEqual(cli.awaiting.map((a) => a.taskId));
    expect(cards.map((c) => c.review?.version)).toEqual(cli.awaiting.map((a) => a.version));
    expect(cards.every((c) => c.review?.status === 'awaiting')).toBe(true);
    const all = (await getJson('/api/runs/batch/tasks?order=id')).json['tasks'] as CardJson[];
    expect(all.find((c) => c.id === 'clip-mug-1')?.review).toBeNull();
    expect((await getJson('/api/runs/batch/tasks?review=maybe')).json['error']).toBe(
      'review: expected awaiting, got "maybe"',
    );
  });
});

describe('writes', () => {
  it('a cross-site POST (no token header, another Origin) is refused over HTTP and changes nothing', async () => {
    const before = await sandboxState();
    const states = taskStates(env);
    const body = { taskIds: ['still-mug-1'], verdict: 'reroll' };
    const path = '/api/runs/batch/decisions';
    const noHeader = await post(path, body, { ...auth(), origin: 'http://evil.example' });
    expect(noHeader.status).toBe(403);
    expect(noHeader.json['error']).toBe('the X-Mediabatch-Token header is missing or wrong');
    const crossSite = await post(path, body, {
      ...auth(),
      'x-mediabatch-token': view.token,
      origin: 'http://evil.example',
      'sec-fetch-site': 'cross-site',
    });
    expect(crossSite.status).toBe(403);
    expect(crossSite.json['error']).toBe('a cross-site request may not change a run');
    // A form another page posts carries the cookie only: still no token header.
    const cookieOnly = await post(path, body, {
      cookie: readCookie(view.port, view.token).split(';')[0] ?? '',
    });
    expect(cookieOnly.status).toBe(403);
    expect(taskStates(env)).toEqual(states);
    expect(env.query('SELECT * FROM decisions')).toEqual([]);
    expect((await sandboxState()).balance).toBe(before.balance);
  });

  it('a program on another local port, holding all the browser sends it, reads but cannot approve, reject or re-roll', async () => {
    const before = await sandboxState();
    const states = taskStates(env);
    // What a browser that opened the view sends to any port of 127.0.0.1: the cookie (the read key).
    const opened = await raw(view.port, `/?token=${view.token}`);
    const cookie = String(opened.headers['set-cookie']).split(';')[0] ?? '';
    const key = cookie.slice(cookie.indexOf('=') + 1);
    expect(key).not.toBe(view.token);
    // With it, reads work (docs/view.md: at most read) and the page it gets holds no token.
    expect((await raw(view.port, '/api/runs/batch/tasks', { cookie })).status).toBe(200);
    const page = await raw(view.port, '/', { cookie });
    expect(page.text).toContain('<meta name="mediabatch-token" content="">');
    // Every way it could present what it holds, with a browser's same-origin headers forged.
    const forged = { origin: `http://127.0.0.1:${view.port}`, 'sec-fetch-site': 'same-origin' };
    const tries: Array<Record<string, string>> = [
      { cookie },
      { cookie, ...forged, 'x-mediabatch-token': key },
      { ...forged, authorization: `Bearer ${key}`, 'x-mediabatch-token': key },
      { cookie, ...forged, 'x-mediabatch-token': cookie },
    ];
    for (const verdict of ['approve', 'reject', 'reroll']) {
      for (const headers of tries) {
        const answer = await post(
          '/api/runs/batch/decisions',
          { taskIds: ['still-mug-1'], verdict },
          headers,
        );
        expect([401, 403], `${verdict} ${JSON.stringify(headers)}`).toContain(answer.status);
      }
    }
    expect(taskStates(env)).toEqual(states);
    expect(env.query('SELECT * FROM decisions')).toEqual([]);
    const after = await sandboxState();
    expect(after.balance).toBe(before.balance);
    expect(after.jobs.length).toBe(before.jobs.length);
  });

  it('a decision on a task that moved since it was read is refused with the reason; the first stands', async () => {
    const cards = (await getJson('/api/runs/batch/tasks?review=awaiting&order=id')).json[
      'tasks'
    ] as CardJson[];
    const seen = cards.find((c) => c.id === 'still-mug-2')?.review?.version ?? -1;
    const body = (verdict: string) => ({
      taskIds: ['still-mug-2'],
      verdict,
      note: 'tab',
      expectedVersions: { 'still-mug-2': seen },
    });
    const first = await post('/api/runs/batch/decisions', body('approve'), writer());
    expect(first.status).toBe(200);
    expect(first.json['outcomes']).toMatchObject([{ task: 'still-mug-2', ok: true }]);
    const second = await post('/api/runs/batch/decisions', body('reject'), writer());
    expect(second.status).toBe(409);
    const [outcome] = second.json['outcomes'] as Array<{ ok: boolean; reason: string }>;
    expect(outcome?.ok).toBe(false);
    expect(outcome?.reason).toMatch(/still-mug-2/);
    expect(env.query<{ verdict: string }>("SELECT verdict FROM tasks WHERE task_id = 'still-mug-2'")).toEqual(
      [{ verdict: 'approved' }],
    );
    const detail = (await getJson('/api/runs/batch/tasks/still-mug-2')).json['review'] as {
      status: string;
      decisions: Array<{ verdict: string; note: string }>;
    };
    expect(detail.status).toBe('approved');
    expect(detail.decisions).toMatchObject([{ verdict: 'approve', note: 'tab' }]);
  });

  it('prices a re-roll against what the budget leaves, and refuses one over it before anything is recorded', async () => {
    const price = await getJson('/api/runs/batch/reroll-price?taskIds=still-mug-3');
    expect(price.status).toBe(200);
    expect(price.json).toMatchObject({ budget: 200, fits: true });
    expect(price.json['total']).toBeGreaterThan(0);
    expect(price.json['left']).toBeLessThan(200);
    // The dialog's words come from the server, the same as the CLI's prompt.
    expect(price.json['text']).toMatch(
      /^Re-roll 1 result\(s\): up to [\d.]+ tokens for the re-roll; the run's worst case goes from [\d.]+ to [\d.]+ tokens; the budget of 200 tokens leaves [\d.]+ tokens after it\.$/,
    );
    expect(price.json['nextRunRefuses']).toBe(false);

    // The budget lowered in the run's settings (as a resumed run with a smaller budget would record); the
    // store's budget of the run follows them.
    const before = await sandboxState();
    const spent = Number(price.json['committed']);
    const conn = new Database(env.db);
    conn
      .prepare("UPDATE runs SET settings = json_set(settings, '$.budget', ?) WHERE id = 'batch'")
      .run(spent + 0.001);
    conn.close();
    const over = await getJson('/api/runs/batch/reroll-price?taskIds=still-mug-3');
    expect(over.json['fits']).toBe(false);
    expect(over.json['nextRunRefuses']).toBe(true);
    expect(over.json['text']).toContain('the next `run` would refuse to start');
    const refused = await post(
      '/api/runs/batch/decisions',
      { taskIds: ['still-mug-3'], verdict: 'reroll' },
      writer(),
    );
    expect(refused.status).toBe(409);
    const [outcome] = refused.json['outcomes'] as Array<{ reason: string }>;
    expect(outcome?.reason).toMatch(
      /^re-rolling 1 task\(s\) may cost up to .* nothing was sent; raise budget/,
    );
    expect(env.query("SELECT * FROM decisions WHERE task_id = 'still-mug-3'")).toEqual([]);
    expect(taskStates(env)['still-mug-3']).toBe('done');
    expect((await sandboxState()).balance).toBe(before.balance);
  });

  it('names the field or the task that is wrong', async () => {
    const bad = await post(
      '/api/runs/batch/decisions',
      { taskIds: ['still-mug-4'], verdict: 'keep' },
      writer(),
    );
    expect(bad.status).toBe(400);
    expect(bad.json['error']).toBe('verdict: expected one of approve, reject, reroll, got "keep"');
    const unknown = await post(
      '/api/runs/batch/decisions',
      { taskIds: ['nope'], verdict: 'approve' },
      writer(),
    );
    expect(unknown.status).toBe(404);
    expect(unknown.json['error']).toBe('task nope: not in run batch');
    for (const [body, error] of [
      [
        { taskIds: ['still-mug-4'], verdict: 'approve', expectedVersion: { 'still-mug-4': 1 } },
        'body: unknown field "expectedVersion"; expected {taskIds, verdict, note?, expectedVersions?}',
      ],
      [
        { taskIds: ['still-mug-4', 7], verdict: 'approve' },
        'taskIds: every task id must be a non-empty string',
      ],
      [{ taskIds: 'still-mug-4', verdict: 'approve' }, 'taskIds: expected a list of 1 to 500 task ids'],
      [{ taskIds: [], verdict: 'approve' }, 'taskIds: expected a list of 1 to 500 task ids'],
      [
        { taskIds: ['still-mug-4'], verdict: 'approve', expectedVersions: { 'still-mug-4': '1' } },
        'expectedVersions.still-mug-4: expected a whole number',
      ],
      [
        { taskIds: ['still-mug-4'], verdict: 'approve', note: 5 },
        'note: expected text of at most 2000 characters',
      ],
      [['still-mug-4'], 'body: expected a JSON object {taskIds, verdict, note?, expectedVersions?}'],
    ] as const) {
      const answer = await post('/api/runs/batch/decisions', body, writer());
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.json['error']).toBe(error);
    }
    expect(env.query("SELECT * FROM decisions WHERE task_id = 'still-mug-4'")).toEqual([]);
  });
});

describe('a body that is not JSON', () => {
  it('is a 400 that says so, not an internal error', async () => {
    const answer = await raw(
      view.port,
      '/api/runs/batch/decisions',
      { ...writer(), 'content-type': 'application/json', 'content-length': '3' },
      'POST',
      '{x}',
    );
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.text).error).toMatch(/^body: /);
  });
});
