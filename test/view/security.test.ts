// The view over real HTTP: the token (query → cookie → redirect, Bearer), the Host check, every way of
// reaching a file the run does not record (404), the headers, and sentinel secrets found in no answer.
import { EventEmitter } from 'node:events';
import { mkdir, mkdtemp, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CliIO } from '../../src/cli/io.js';
import { runCli } from '../../src/cli/program.js';
import { TASK_STATES } from '../../src/store/index.js';
import { registerSecret } from '../../src/util/secrets.js';
import { allowedHosts, readAccess, readKey, writeRefusal } from '../../src/view/security.js';
import { startView, type ViewServer } from '../../src/view/server.js';
import type { RunEnv } from '../helpers/run-env.js';
import { faultyRun, raw } from './helpers.js';

const API_KEY = 'sk-SENTINEL-api-key-7f3a9c1e';
const STORAGE_SECRET = 'SENTINEL-storage-secret-4b8d2e6f';

let env: RunEnv;
let view: ViewServer;
let outside: string;
const logged: string[] = [];
const answers: string[] = [];

/** Every answer is kept, so the secrets check reads all of them. */
async function get(path: string, headers: Record<string, string> = {}) {
  const answer = await raw(view.port, path, headers);
  answers.push(JSON.stringify(answer.headers), answer.text);
  return answer;
}
const auth = () => ({ authorization: `Bearer ${view.token}` });

/**
 * The key as a run made under another environment left it in the state file: pasted into a prompt,
 * echoed in an error and in a job record (an oc-maker sheet, a song's title and lyrics).
 */
let sheetTask = '';
function plantKey(): void {
  const conn = new Database(env.db);
  try {
    conn
      .prepare(
        `UPDATE tasks SET body = json_set(body, '$.prompt', 'a mug, key ' || ?, '$.title', ?), error = 'server said ' || ?
         WHERE run_id = 'batch' AND task_id = 'img-5'`,
      )
      .run(API_KEY, API_KEY, API_KEY);
    const sheet = conn
      .prepare(
        `SELECT task_id AS id, img_uuid AS uuid FROM tasks t WHERE state = 'done' AND task_id LIKE 'img-%'
         AND EXISTS (SELECT 1 FROM job_events j WHERE j.img_uuid = t.img_uuid) ORDER BY seq DESC LIMIT 1`,
      )
      .get() as { id: string; uuid: string };
    sheetTask = sheet.id;
    const uuid = sheet.uuid;
    conn.prepare("UPDATE tasks SET model = 'oc-maker' WHERE task_id = ?").run(sheetTask);
    const record = JSON.stringify({
      json: [
        { type: 'json', value: { name: 'Ada', note: `key ${API_KEY}` } },
        { title: `song ${API_KEY}`, lyrics: `la ${API_KEY}` },
      ],
    });
    conn.prepare('UPDATE job_events SET record = ? WHERE img_uuid = ?').run(record, uuid);
  } finally {
    conn.close();
  }
}

beforeAll(async () => {
  env = await faultyRun(API_KEY);
  registerSecret(API_KEY);
  plantKey();
  view = await startView({ stateFile: env.db, cwd: env.dir, onError: (m) => logged.push(m) });
  outside = await mkdtemp(join(tmpdir(), 'mb-view-outside-'));
  await writeFile(join(outside, 'secret.png'), 'not a result of the run');
}, 60_000);

afterAll(async () => {
  await view?.close();
  await env?.close();
  await rm(outside, { recursive: true, force: true });
});

describe('the token', () => {
  it('is required for the page, the API, the events and the files: 401 without it', async () => {
    for (const path of [
      '/',
      '/api/runs',
      '/api/runs/batch',
      '/api/events',
      '/files/batch/img-1/1',
      '/assets/app.js',
    ]) {
      const answer = await get(path);
      expect(answer.status, path).toBe(401);
      expect(answer.text).toContain('needs its token');
    }
    expect((await get('/api/runs', { authorization: 'Bearer wrong' })).status).toBe(401);
    expect((await get('/?token=wrong')).status).toBe(401);
  });

  it('opens the page from the printed address with the token in it, and a cookie that only reads', async () => {
    const first = await get(`/?token=${view.token}`);
    expect(first.status).toBe(200);
    expect(first.headers['cache-control']).toBe('no-store');
    expect(first.text).toContain(`<meta name="mediabatch-token" content="${view.token}">`);
    const cookie = String(first.headers['set-cookie']);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Strict');
    const pair = cookie.split(';')[0] ?? '';
    expect(pair).toBe(`mediabatch_view_${view.port}=${readKey(view.token)}`);
    expect(pair).not.toContain(view.token);
    const page = await get('/', { cookie: pair });
    expect(page.status).toBe(200);
    expect(page.text).toContain('<script type="module" src="/assets/app.js">');
    expect(page.text).toContain('<meta name="mediabatch-token" content="">');
    expect(page.text).not.toContain(view.token);
    expect((await get('/api/runs', { cookie: pair })).status).toBe(200);
    expect((await get('/api/runs', { cookie: pair.replace(/=.*/, '=nope') })).status).toBe(401);
    // The token itself in the cookie is not the read key: a cookie never carries the token.
    expect((await get('/api/runs', { cookie: `mediabatch_view_${view.port}=${view.token}` })).status).toBe(
      401,
    );
  });

  it('on another address, sets the cookie and redirects to it without the token (one leading slash)', async () => {
    const api = await get(`/api/runs?token=${view.token}&x=1`);
    expect(api.status).toBe(303);
    expect(api.headers['location']).toBe('/api/runs?x=1');
    expect(String(api.headers['set-cookie'])).toContain(readKey(view.token));
    for (const path of [`//evil.example/?token=${view.token}`, `/\\evil.example/?token=${view.token}`]) {
      const answer = await get(path);
      expect(answer.status, path).toBe(303);
      expect(answer.headers['location'], path).toMatch(/^\/[^/\\]/);
    }
  });

  it('is not locked out by a cookie of the same name that another local program set (sent first)', async () => {
    const name = `mediabatch_view_${view.port}`;
    const ours = `${name}=${readKey(view.token)}`;
    for (const cookie of [
      `${name}=planted-by-another-port; ${ours}`,
      `${name}=; other=1; ${ours}`,
      `${ours}; ${name}=planted-later`,
    ]) {
      expect((await get('/api/runs', { cookie })).status, cookie).toBe(200);
    }
    expect((await get('/api/runs', { cookie: `${name}=planted-by-another-port` })).status).toBe(401);
  });

  it('works as a Bearer header', async () => {
    const answer = await get('/api/runs', auth());
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text).runs.map((r: { id: string }) => r.id)).toEqual(['batch']);
  });
});

describe('what each capability opens (pure rules)', () => {
  const o = { hosts: allowedHosts('127.0.0.1', 4000), token: 'k'.repeat(43), port: 4000 };
  const key = readKey(o.token);
  const host = '127.0.0.1:4000';
  it.each([
    ['the token as Bearer', { authorization: `Bearer ${o.token}` }, 'ok'],
    ['the token as the page header', { 'x-mediabatch-token': o.token }, 'ok'],
    ['the read key in the cookie', { cookie: `mediabatch_view_4000=${key}` }, 'ok'],
    [
      'the read key behind a planted one',
      { cookie: `mediabatch_view_4000=x; mediabatch_view_4000=${key}` },
      'ok',
    ],
    ['the token in the cookie', { cookie: `mediabatch_view_4000=${o.token}` }, 'no-token'],
    ['the read key as Bearer', { authorization: `Bearer ${key}` }, 'no-token'],
    ['the read key as the page header', { 'x-mediabatch-token': key }, 'no-token'],
    ['the read key under another port', { cookie: `mediabatch_view_4001=${key}` }, 'no-token'],
  ])('%s → %s', (_name, headers, expected) => {
    expect(readAccess({ host, ...headers }, o)).toBe(expected);
  });
  it('writes take only the token in the header', () => {
    const same = { host, origin: `http://${host}`, 'sec-fetch-site': 'same-origin' };
    expect(writeRefusal({ ...same, 'x-mediabatch-token': key }, o)).toBe(
      'the X-Mediabatch-Token header is missing or wrong',
    );
    expect(writeRefusal({ ...same, 'x-mediabatch-token': o.token }, o)).toBeUndefined();
    expect(key).not.toContain(o.token.slice(0, 8));
    expect(readKey(o.token)).toBe(key);
  });
});

describe('the Host header', () => {
  it('must name a loopback address or the bound one: 403 otherwise (DNS rebinding), even with the token', async () => {
    for (const host of [
      `evil.example:${view.port}`,
      `localhost.evil.example:${view.port}`,
      `127.0.0.1.nip.io:${view.port}`,
      `10.0.0.5:${view.port}`,
    ]) {
      const answer = await get('/api/runs', { ...auth(), host });
      expect(answer.status, host).toBe(403);
    }
    expect((await get('/api/runs', { ...auth(), host: `localhost:${view.port}` })).status).toBe(200);
    // An SSH tunnel from another local port (ssh -L 8080:127.0.0.1:<port>): still loopback, still served.
    expect((await get('/api/runs', { ...auth(), host: 'localhost:8080' })).status).toBe(200);
  });
});

describe('files', () => {
  it('serves a recorded file, with Range for players', async () => {
    const whole = await get('/files/batch/img-1/1', auth());
    expect(whole.status).toBe(200);
    expect(whole.headers['content-type']).toBe('image/png');
    const [row] = env.query<{ bytes: number }>("SELECT bytes FROM files WHERE task_id = 'clip'");
    const part = await get('/files/batch/clip/1', { ...auth(), range: 'bytes=0-99' });
    expect(part.status).toBe(206);
    expect(part.headers['content-range']).toBe(`bytes 0-99/${row?.bytes}`);
    expect(part.body.length).toBe(100);
    expect(part.headers['content-type']).toBe('video/mp4');
    expect((await get('/files/batch/clip/1', { ...auth(), range: 'bytes=99999999-' })).status).toBe(416);
  });

  it('answers 404 to every traversal and to anything the run does not record', async () => {
    const attempts = [
      '/files/batch/../state.db',
      '/files/batch/img-1/../../state.db',
      '/files/batch/%2e%2e/1',
      '/files/batch/%2e%2e%2f%2e%2e%2fstate.db/1',
      '/files/batch/img-1%2f..%2f..%2f..%2fstate.db/1',
      '/files/%2e%2e/img-1/1',
      '/files/batch/img-1/2',
      '/files/batch/img-1/1.png',
      '/files/batch/img-3/1',
      '/files/other/img-1/1',
      '/files/batch/img-1/-1',
      '/assets/..%2f..%2fpackage.json',
      '/assets/../package.json',
    ];
    for (const path of attempts) expect((await get(path, auth())).status, path).toBe(404);
  });

  it('refuses a link planted in the output folder, to a file or to a folder outside the run', async () => {
    const [row] = env.query<{ path: string }>("SELECT path FROM files WHERE task_id = 'img-2'");
    const path = row?.path ?? '';
    await unlink(path);
    await symlink(join(outside, 'secret.png'), path);
    expect((await get('/files/batch/img-2/1', auth())).status).toBe(404);

    const [row8] = env.query<{ path: string }>("SELECT path FROM files WHERE task_id = 'img-8'");
    const folder = join(row8?.path ?? '', '..');
    await rm(folder, { recursive: true });
    await mkdir(join(outside, 'img-8'));
    await writeFile(join(outside, 'img-8', '1.png'), 'planted');
    await symlink(join(outside, 'img-8'), folder);
    expect((await get('/files/batch/img-8/1', auth())).status).toBe(404);
    expect((await get('/files/batch/img-9/1', auth())).status).toBe(200);
  });
});

describe('headers and secrets', () => {
  it('sends a strict CSP, nosniff and no referrer with every answer', async () => {
    for (const answer of [
      await get('/', auth()),
      await get('/api/runs', auth()),
      await get('/nothing', auth()),
    ]) {
      const csp = String(answer.headers['content-security-policy']);
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain('unsafe-inline');
      expect(answer.headers['x-content-type-options']).toBe('nosniff');
      expect(answer.headers['referrer-policy']).toBe('no-referrer');
    }
  });

  it('puts the API key and the storage secret in no page, answer or log', async () => {
    const list = JSON.parse((await get('/api/runs/batch/tasks?order=id&limit=200', auth())).text);
    for (const t of list.tasks as { id: string }[]) await get(`/api/runs/batch/tasks/${t.id}`, auth());
    await get('/api/runs/batch', auth());
    for (const name of ['app.js', 'api.js', 'run-page.js', 'cards.js', 'charts.js', 'dom.js', 'view.css']) {
      expect((await get(`/assets/${name}`, auth())).status).toBe(200);
    }
    const all = answers.join('\n') + logged.join('\n');
    expect(answers.length).toBeGreaterThan(40);
    expect(all).not.toContain(API_KEY);
    expect(all).not.toContain(STORAGE_SECRET);
    expect(all).toContain('img-1');
  });
});

describe('writes (the next issue) need the token header and the same origin', () => {
  const hosts = allowedHosts('127.0.0.1', 4000);
  const token = 't'.repeat(43);
  it.each([
    [{}, 'the X-Mediabatch-Token header is missing or wrong'],
    [{ 'x-mediabatch-token': 'wrong' }, 'the X-Mediabatch-Token header is missing or wrong'],
    [
      { 'x-mediabatch-token': token, origin: 'http://evil.example' },
      'requests from http://evil.example may not change a run',
    ],
    [
      { 'x-mediabatch-token': token, 'sec-fetch-site': 'cross-site' },
      'a cross-site request may not change a run',
    ],
    [
      { 'x-mediabatch-token': token, origin: 'http://localhost:4000' },
      'requests from http://localhost:4000 may not change a run',
    ],
    [
      { 'x-mediabatch-token': token, origin: 'http://127.0.0.1:4000', 'sec-fetch-site': 'same-origin' },
      undefined,
    ],
  ])('%j → %s', (headers, expected) => {
    expect(writeRefusal({ host: '127.0.0.1:4000', ...headers }, { hosts, token })).toBe(expected);
  });

  it('a POST without them is refused over HTTP (403) before any route', async () => {
    const answer = await raw(
      view.port,
      '/api/runs/batch',
      { ...auth(), origin: 'http://evil.example' },
      'POST',
    );
    expect(answer.status).toBe(403);
  });
});

describe('whatever the router answers', () => {
  const long = `/api/runs/batch/tasks/${'x'.repeat(200)}`;

  it('a foreign Host with a 200-character path is 403, with the security headers', async () => {
    for (const path of [long, `/files/batch/${'y'.repeat(200)}/1`, `/${'z'.repeat(200)}`]) {
      const answer = await get(path, { ...auth(), host: `evil.example:${view.port}` });
      expect(answer.status, path).toBe(403);
      expect(answer.text).not.toContain('x'.repeat(200));
      expect(String(answer.headers['content-security-policy'])).toContain("default-src 'none'");
      expect(answer.headers['x-content-type-options']).toBe('nosniff');
    }
  });

  it('asks for the token first (401), then answers with a route or a 404, never a 414', async () => {
    expect((await get(long)).status).toBe(401);
    const answer = await get(long, auth());
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.text).error).toBe(`task ${'x'.repeat(200)}: not in run batch`);
    for (const [method, path, status] of [
      ['PUT', '/api/runs', 403],
      ['DELETE', '/api/runs/batch', 403],
      ['GET', '/api/runs/batch/tasks/%zz', 400],
      ['GET', `/api/runs/${'r'.repeat(5000)}`, 404],
    ] as const) {
      const a = await raw(view.port, path, auth(), method);
      answers.push(a.text);
      expect(a.status, `${method} ${path}`).toBe(status);
      expect(a.headers['referrer-policy'], path).toBe('no-referrer');
      expect(a.headers['x-frame-options'], path).toBe('DENY');
    }
  });

  it('answers what Node cannot read (headers or a path over its limit) with the same headers, echoing nothing', async () => {
    for (const [path, headers] of [
      ['/api/runs', { ...auth(), 'x-big': 'b'.repeat(20_000) }],
      [`/api/runs/batch/tasks/${'t'.repeat(20_000)}`, auth()],
    ] as const) {
      const answer = await raw(view.port, path, headers);
      expect(answer.status).toBe(431);
      expect(String(answer.headers['content-security-policy'])).toContain("default-src 'none'");
      expect(answer.headers['x-content-type-options']).toBe('nosniff');
      expect(answer.text).toBe('Request Header Fields Too Large\n');
    }
  });
});

describe('query parameters', () => {
  it.each([
    [
      '/api/runs/batch/tasks?state=done&state=failed',
      'state: given 2 times; give it once (several values separated by commas)',
    ],
    ['/api/runs/batch/tasks?q=a&q=b', 'q: given 2 times; give it once'],
    [
      '/api/runs/batch/reroll-price?taskIds=img-1&taskIds=img-2',
      'taskIds: given 2 times; give it once, the ids separated by commas',
    ],
    [
      '/api/runs/batch/tasks?state=',
      'state: empty; leave it out or give a value (several values separated by commas)',
    ],
    ['/api/runs/batch/tasks?limit=ten', 'limit: expected a whole number from 1 to 200, got "ten"'],
    ['/api/runs/batch/tasks?limit=1.5', 'limit: expected a whole number from 1 to 200, got "1.5"'],
    ['/api/runs/batch/tasks?order=oldest', 'order: expected newest or id, got "oldest"'],
    [
      '/api/runs/batch/tasks?stat=done',
      'unknown parameter "stat"; known: state, model, q, review, order, cursor, limit',
    ],
    ['/api/runs/batch/reroll-price', 'taskIds: missing, the ids separated by commas'],
    ['/api/runs/batch/reroll-price?taskIds=,', 'taskIds: expected 1 to 500 task ids, separated by commas'],
    ['/api/runs?all=1', 'unknown parameter "all"; this address takes none'],
    ['/api/runs/batch/workers?host=a', 'unknown parameter "host"; this address takes none'],
    ['/files/batch/img-1/1?download=1', 'unknown parameter "download"; this address takes none'],
    [
      '/api/runs/batch/tasks?__proto__=1',
      'unknown parameter "__proto__"; known: state, model, q, review, order, cursor, limit',
    ],
    [
      '/api/runs/batch/tasks?constructor=x',
      'unknown parameter "constructor"; known: state, model, q, review, order, cursor, limit',
    ],
    ['/api/runs/batch/tasks?limit=0', 'limit: expected a whole number from 1 to 200, got "0"'],
    ['/api/runs/batch/tasks?limit=201', 'limit: expected a whole number from 1 to 200, got "201"'],
    ['/api/runs/batch/tasks?state=done,', `state: unknown state ""; known: ${TASK_STATES.join(', ')}`],
    [
      '/api/runs/batch/tasks?cursor=eyJwaGFzZSI6ImlkIiwidGFza0lkIjp7fX0',
      'cursor: not a cursor this server gave; start again without it',
    ],
    [
      `/api/runs/batch/reroll-price?taskIds=${Array.from({ length: 501 }, (_, i) => `t${i}`).join(',')}`,
      'taskIds: expected 1 to 500 task ids, separated by commas',
    ],
  ])('%s → 400: %s', async (path, message) => {
    const before = logged.length;
    const answer = await get(path, auth());
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.text)).toEqual({ v: 1, error: message });
    expect(logged.length).toBe(before);
  });
});

describe('any query or body', () => {
  /** A seeded stream of numbers (mulberry32): the same requests on every run, so a failure repeats. */
  function seeded(seed: number): () => number {
    let a = seed;
    return () => {
      a = (a + 0x6d2b79f5) | 0;
      let t = Math.imul(a ^ (a >>> 15), 1 | a);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  const KEYS = [
    'state',
    'model',
    'q',
    'review',
    'order',
    'cursor',
    'limit',
    'taskIds',
    'token',
    '__proto__',
    'x',
    '',
  ];
  const VALUES = [
    '',
    'done',
    'done,failed',
    ',',
    'awaiting',
    'id',
    '48',
    '-1',
    '1e3',
    'img-1',
    '%',
    '%zz',
    '\u0000',
    'é€',
    'a'.repeat(300),
    '[]',
    '{}',
    'eyJ9',
  ];

  it('is answered 200 or 400 with one line, never 500 nor a log line (300 seeded requests)', async () => {
    const next = seeded(33);
    const pick = <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)] as T;
    const before = logged.length;
    for (let i = 0; i < 300; i += 1) {
      const pairs = Array.from(
        { length: Math.floor(next() * 4) },
        () => `${encodeURIComponent(pick(KEYS))}=${encodeURIComponent(pick(VALUES))}`,
      );
      const route = pick([
        '/api/runs/batch/tasks',
        '/api/runs/batch/reroll-price',
        '/api/runs',
        '/api/runs/batch/tasks/img-1',
        '/api/runs/batch/workers',
      ]);
      const path = `${route}?${pairs.join('&')}`;
      const answer = await raw(view.port, path, auth());
      // A valid token in the query is the printed address: a redirect without it.
      expect([200, 303, 400, 401, 404], path).toContain(answer.status);
      if (answer.status === 400) expect(JSON.parse(answer.text).error, path).toMatch(/^[^\n]+$/);
    }
    for (let i = 0; i < 100; i += 1) {
      const body = JSON.stringify(
        pick([
          { taskIds: [pick(VALUES)], verdict: pick(['approve', 'reject', 'reroll', 'keep', '']) },
          { taskIds: pick(VALUES), verdict: 'approve', note: pick([null, 5, 'n', {}]) },
          { taskIds: ['img-1'], verdict: 'approve', expectedVersions: pick([[], { 'img-1': 'x' }, null, 3]) },
          pick(VALUES),
          [pick(VALUES)],
          null,
        ]),
      );
      const answer = await raw(
        view.port,
        '/api/runs/batch/decisions',
        { ...auth(), 'x-mediabatch-token': view.token, 'content-type': 'application/json' },
        'POST',
        body,
      );
      expect([400, 404, 409], body).toContain(answer.status);
    }
    expect(logged.slice(before)).toEqual([]);
  });
});

describe('HEAD of a file', () => {
  it('answers the length of the file, and no body', async () => {
    const [row] = env.query<{ bytes: number }>("SELECT bytes FROM files WHERE task_id = 'clip'");
    const head = await raw(view.port, '/files/batch/clip/1', auth(), 'HEAD');
    expect(head.status).toBe(200);
    expect(row?.bytes).toBeGreaterThan(100);
    expect(head.headers['content-length']).toBe(String(row?.bytes));
    expect(head.headers['content-type']).toBe('video/mp4');
    expect(head.body.length).toBe(0);
    const part = await raw(view.port, '/files/batch/clip/1', { ...auth(), range: 'bytes=0-99' }, 'HEAD');
    expect(part.status).toBe(206);
    expect(part.headers['content-length']).toBe('100');
  });
});

describe('a key left in the state file', () => {
  it('shows on no card (text, sheet, songs, error) and is not found by q=', async () => {
    const list = JSON.parse((await get('/api/runs/batch/tasks?order=id&limit=200', auth())).text);
    const byId = new Map((list.tasks as Array<Record<string, unknown>>).map((t) => [t['id'], t]));
    expect(byId.get('img-5')?.['text']).toEqual({ prompt: 'a mug, key [redacted]', title: '[redacted]' });
    expect(byId.get('img-5')?.['error']).toBe('server said [redacted]');
    expect(byId.get(sheetTask)?.['sheet']).toEqual({ name: 'Ada', note: 'key [redacted]' });
    expect(byId.get(sheetTask)?.['songs']).toEqual([{ title: 'song [redacted]', lyrics: 'la [redacted]' }]);
    for (const q of [API_KEY, API_KEY.slice(0, 10), 'SENTINEL-api', 'key sk-']) {
      const found = JSON.parse((await get(`/api/runs/batch/tasks?q=${encodeURIComponent(q)}`, auth())).text);
      expect(found.tasks, q).toEqual([]);
    }
    const mug = JSON.parse((await get('/api/runs/batch/tasks?q=a%20mug%2C%20key', auth())).text);
    expect(mug.tasks.map((t: { id: string }) => t.id)).toEqual(['img-5']);
    expect(JSON.parse((await get('/api/runs/batch/tasks?q=server%20said', auth())).text).tasks).toHaveLength(
      1,
    );
  });
});

describe('mediabatch view (the command)', () => {
  it('prints exactly one line with the address, serves, and ends on Ctrl-C; 0.0.0.0 is warned about', async () => {
    let stdout = '';
    let stderr = '';
    const signals = new EventEmitter();
    let seen: (line: string) => void = () => undefined;
    const printed = new Promise<string>((resolve) => {
      seen = resolve;
    });
    const io: CliIO = {
      stdout: {
        write: (s: string) => {
          stdout += s;
          if (stdout.includes('\n')) seen(stdout);
        },
      },
      stderr: { write: (s: string) => (stderr += s) },
      // The secrets a user has in the environment: the view is given them and must not show them.
      env: {
        MEDIABATCH_API_KEY: API_KEY,
        AWS_ACCESS_KEY_ID: 'AKIASENTINEL',
        AWS_SECRET_ACCESS_KEY: STORAGE_SECRET,
      },
      cwd: env.dir,
      now: () => new Date(),
      interactive: false,
      signals,
    };
    const done = runCli(['--state', env.db, 'view', 'batch', '--host', '0.0.0.0'], io);
    const line = await printed;
    expect(line).toMatch(/^View: http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{43}\n$/);
    expect(stderr).toContain('Warning: the view listens on every address');
    const port = Number(/:(\d+)\//.exec(line)?.[1]);
    const token = /token=(.*)\n/.exec(line)?.[1] ?? '';
    const first = await raw(port, `/?token=${token}`);
    expect(first.status).toBe(200);
    expect(first.text).toContain('<meta name="mediabatch-start" content="#/run/batch">');
    const bearer = { authorization: `Bearer ${token}` };
    const looked = [
      await raw(port, '/api/runs/batch', bearer),
      await raw(port, '/api/runs/batch/tasks/img-4', bearer),
    ];
    expect(looked.map((a) => a.status)).toEqual([200, 200]);
    const all = [stdout, stderr, ...looked.map((a) => a.text + JSON.stringify(a.headers))].join('\n');
    expect(all).toContain('img-4');
    expect(all).not.toContain(API_KEY);
    expect(all).not.toContain(STORAGE_SECRET);
    signals.emit('SIGINT');
    expect(await done).toBe(0);
    expect(stdout).toBe(line);
  });

  it('exits 1 naming the run when the state file does not have it', async () => {
    let stderr = '';
    const io: CliIO = {
      stdout: { write: () => undefined },
      stderr: { write: (s: string) => (stderr += s) },
      env: {},
      cwd: env.dir,
      now: () => new Date(),
      interactive: false,
      signals: new EventEmitter(),
    };
    expect(await runCli(['--state', env.db, 'view', 'nope'], io)).toBe(1);
    expect(stderr).toContain('run nope: not found in');
    expect(stderr).toContain('known runs, newest first: batch');
  });
});
