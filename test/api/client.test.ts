import { Agent, MockAgent } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { type ApiClient, type ApiRequestEvent, createApiClient } from '../../src/api/client.js';
import { exchange } from '../../src/api/exchange.js';
import type { ApiAnswer } from '../../src/api/outcome.js';
import { createRedactor } from '../../src/api/redact.js';
import {
  closedPort,
  type Handler,
  sendJson,
  startServer,
  startSilentTcpServer,
  type TestServer,
} from './servers.js';

const KEY = 'SENTINEL-KEY-7d1e0c9b44';
const VIDEOS = '/api/v1/videos/generations';
const uuid = '0b6f7c4e-8f4e-4a39-9a53-2b1f2d7f0e11';
const body = { model: 'flow22_spicy', prompt: 'a cat', resolution: '480p' };

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function server(handler: Handler): Promise<TestServer> {
  const s = await startServer(handler);
  cleanups.push(s.close);
  return s;
}

function client(baseUrl: string, extra: Partial<Parameters<typeof createApiClient>[0]> = {}): ApiClient {
  const c = createApiClient({ baseUrl, apiKey: KEY, ...extra });
  cleanups.push(() => c.close());
  return c;
}

/** Serves one fixed answer to every request. */
const answering = (status: number, value: unknown, type = 'application/json'): Handler => {
  return (_req, res) => {
    const text = typeof value === 'string' ? value : JSON.stringify(value);
    res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
};

/** Echoes the credential the server received, as some debug pages and proxies do. */
const echoing = (status: number, wrap: (auth: string) => unknown): Handler => {
  return (req, res) => answering(status, wrap(req.headers.authorization ?? ''), 'text/html')(req, res, '');
};

describe('submit against a real server', () => {
  it.each<[string, Handler, Record<string, unknown>]>([
    [
      'an accepted task',
      answering(200, { code: 0, msg: 'Success', data: { img_uuid: uuid, cost: 5 } }),
      { type: 'accepted', imgUuid: uuid, cost: 5, mayHaveCharged: true },
    ],
    [
      'a rejected request (400)',
      answering(400, { code: 400, msg: 'resolution: must be 480p or 720p, got 1080p' }),
      { type: 'rejected', message: 'resolution: must be 480p or 720p, got 1080p', mayHaveCharged: false },
    ],
    [
      'insufficient tokens (code 100)',
      answering(200, { code: 100, msg: 'tokens is not enough' }),
      { type: 'insufficient-tokens', mayHaveCharged: false, retrySafe: false },
    ],
    [
      'quota exceeded (code 101)',
      answering(200, { code: 101, msg: 'API key quota exceeded: 5000 of 5000 tokens used (monthly)' }),
      { type: 'quota-exceeded', used: 5000, quota: 5000, period: 'monthly', mayHaveCharged: false },
    ],
    ['a refused key (401)', answering(401, { code: 401, msg: 'Token Error' }), { type: 'unauthorized' }],
    [
      'a server error with the envelope (500)',
      answering(500, { code: 500, msg: '' }),
      { type: 'retryable', mayHaveCharged: false, retrySafe: true },
    ],
    [
      'a 500 with an HTML body',
      answering(500, '<html><h1>Internal Server Error</h1></html>', 'text/html'),
      { type: 'in-doubt', mayHaveCharged: true, retrySafe: false },
    ],
    [
      'a 200 without a cost',
      answering(200, { code: 0, msg: 'Success', data: { img_uuid: uuid } }),
      { type: 'accepted', imgUuid: uuid, cost: undefined, mayHaveCharged: true },
    ],
    [
      'a 200 without a task id',
      answering(200, { code: 0, msg: 'Success', data: { cost: 5 } }),
      { type: 'in-doubt', mayHaveCharged: true },
    ],
    [
      'a 200 with numbers as strings and msg null',
      answering(200, { code: '0', msg: null, data: { img_uuid: uuid, cost: '1.63' } }),
      { type: 'accepted', imgUuid: uuid, cost: 1.63 },
    ],
    [
      'a 200 with code 500',
      answering(200, { code: 500, msg: '' }),
      { type: 'retryable', mayHaveCharged: false, retrySafe: true },
    ],
    [
      'an HTML 404 from a proxy',
      answering(404, '<html><body>Not Found</body></html>', 'text/html'),
      { type: 'retryable', mayHaveCharged: false, retrySafe: true },
    ],
  ])('%s', async (_name, handler, expected) => {
    const s = await server(handler);
    const outcome = await client(s.url).submit(VIDEOS, body);
    expect(outcome).toMatchObject(expected);
  });

  it('sends the JSON body with the bearer key to the endpoint under the base URL prefix', async () => {
    const s = await server(answering(200, { code: 0, msg: 'Success', data: { img_uuid: uuid, cost: 5 } }));
    await client(`${s.url}/gateway/`).submit(VIDEOS, body);
    expect(s.requests).toHaveLength(1);
    const [seen] = s.requests;
    expect(seen?.method).toBe('POST');
    expect(seen?.url).toBe(`/gateway${VIDEOS}`);
    expect(seen?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(seen?.headers['content-type']).toBe('application/json');
    expect(JSON.parse(seen?.body ?? '')).toEqual(body);
  });

  it('puts the task in doubt when the server reads the body and then resets the connection', async () => {
    const s = await server((req) => req.socket.destroy());
    const outcome = await client(s.url).submit(VIDEOS, body);
    expect(s.requests).toHaveLength(1);
    expect(outcome).toMatchObject({ type: 'in-doubt', mayHaveCharged: true, retrySafe: false });
  });

  it('puts the task in doubt when no answer comes within the headers timeout', async () => {
    const s = await server(() => {
      // never answers
    });
    const outcome = await client(s.url, { timeouts: { submitHeadersMs: 150 } }).submit(VIDEOS, body);
    expect(outcome.type).toBe('in-doubt');
    expect(outcome.type === 'in-doubt' && outcome.reason).toMatch(/UND_ERR_HEADERS_TIMEOUT/);
  });

  it('puts the task in doubt when the answer body stops halfway', async () => {
    const s = await server((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': 200 });
      res.write('{"code":0,"msg":"Suc');
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const outcome = await client(s.url).submit(VIDEOS, body);
    expect(outcome.type).toBe('in-doubt');
  });

  it('retries (not charged) when the connection is refused', async () => {
    const port = await closedPort();
    const outcome = await client(`http://127.0.0.1:${port}`).submit(VIDEOS, body);
    expect(outcome).toMatchObject({ type: 'retryable', mayHaveCharged: false, retrySafe: true });
    expect(outcome.type === 'retryable' && outcome.reason).toMatch(/ECONNREFUSED/);
  });

  it('retries (not charged) when the TLS handshake stalls past the connect timeout', async () => {
    const tcp = await startSilentTcpServer();
    cleanups.push(tcp.close);
    const outcome = await client(`https://127.0.0.1:${tcp.port}`, { timeouts: { connectMs: 150 } }).submit(
      VIDEOS,
      body,
    );
    expect(outcome).toMatchObject({ type: 'retryable', mayHaveCharged: false });
    expect(outcome.type === 'retryable' && outcome.reason).toMatch(/UND_ERR_CONNECT_TIMEOUT/);
  });

  it('consumes every answer body, so one connection serves many requests', async () => {
    const s = await server((req, res) =>
      req.method === 'POST'
        ? sendJson(res, 400, { code: 400, msg: 'prompt: required' })
        : sendJson(res, 200, { code: 0, msg: 'ok', data: { count: 10 } }),
    );
    // One connection allowed: a request could only reuse it if the previous answer was read to the end.
    const c = client(s.url, { maxConnections: 1 });
    for (let i = 0; i < 5; i++) {
      await c.submit(VIDEOS, body);
      await c.getBalance();
    }
    expect(s.requests).toHaveLength(10);
    expect(s.connections()).toBe(1);
  });

  it('reports each exchange to onRequest without headers', async () => {
    let t = 1_000;
    const s = await server((req, res, b) => {
      t += 10; // the server takes 10 ms of the fake clock
      answering(200, { code: 0, msg: 'ok', data: { count: 3 } })(req, res, b);
    });
    const events: ApiRequestEvent[] = [];
    const c = client(s.url, { onRequest: (e) => events.push(e), now: () => t });
    await c.getBalance();
    expect(events).toEqual([
      { method: 'GET', path: '/api/v1/user/tokens', status: 200, sent: true, durationMs: 10 },
    ]);
  });

  it('passes the x-request-id header to the outcome and the event', async () => {
    const s = await server((_req, res) => {
      const text = JSON.stringify({ code: 400, msg: 'prompt: required' });
      res.writeHead(400, { 'content-type': 'application/json', 'x-request-id': 'req-77' });
      res.end(text);
    });
    const events: ApiRequestEvent[] = [];
    const outcome = await client(s.url, { onRequest: (e) => events.push(e) }).submit(VIDEOS, body);
    expect(outcome).toMatchObject({ type: 'rejected', message: 'prompt: required', requestId: 'req-77' });
    expect(events[0]?.requestId).toBe('req-77');
  });
});

describe('knowing whether the request was sent', () => {
  const post = (origin: string) => ({
    origin,
    path: VIDEOS,
    method: 'POST' as const,
    headers: { 'content-type': 'application/json' },
    body: Buffer.from(JSON.stringify(body)),
    headersTimeout: 150,
  });
  const agent = () => {
    const a = new Agent({ connect: { timeout: 500 } });
    cleanups.push(() => a.close());
    return a;
  };
  const sentOf = (answer: ApiAnswer) => (answer.kind === 'network' ? answer.sent : 'response');

  it('connection refused: not sent', async () => {
    const port = await closedPort();
    const answer = await exchange(agent(), post(`http://127.0.0.1:${port}`), 1024);
    expect(sentOf(answer)).toBe(false);
  });

  it('server reads the body, then destroys the socket: sent', async () => {
    const s = await server((req) => req.socket.destroy());
    const answer = await exchange(agent(), post(s.url), 1024);
    expect(sentOf(answer)).toBe(true);
  });

  it('headers timeout after the body: sent', async () => {
    const s = await server(() => {});
    const answer = await exchange(agent(), post(s.url), 1024);
    expect(answer.kind === 'network' && (answer.error as { code?: string }).code).toBe(
      'UND_ERR_HEADERS_TIMEOUT',
    );
    expect(sentOf(answer)).toBe(true);
  });

  it('an answer larger than the limit is cut off after sending', async () => {
    const s = await server(answering(200, { code: 0, msg: 'x'.repeat(5000) }));
    const answer = await exchange(agent(), post(s.url), 1024);
    expect(answer.kind === 'network' && answer.sent).toBe(true);
  });
});

describe('getJob and getBalance', () => {
  it('polls jobs/detail by img_uuid and returns the record', async () => {
    const record = { img_uuid: uuid, status: 'processing', json: null };
    const s = await server(answering(200, { code: 0, msg: 'ok', data: record }));
    const outcome = await client(s.url).getJob(uuid);
    expect(outcome).toEqual({ type: 'ok', value: record });
    expect(s.requests[0]?.url).toBe(`/api/v1/jobs/detail?img_uuid=${uuid}`);
    expect(s.requests[0]?.method).toBe('GET');
  });

  it('encodes an odd img_uuid in the query', async () => {
    const s = await server(answering(404, { code: 404, msg: 'not found' }));
    const outcome = await client(s.url).getJob('a b&c');
    expect(outcome.type).toBe('not-found');
    expect(s.requests[0]?.url).toBe('/api/v1/jobs/detail?img_uuid=a%20b%26c');
  });

  it.each<[string, string, Handler]>([
    ['a 401', 'unauthorized', answering(401, { code: 401, msg: 'Token is required' })],
    ['a 500', 'retryable', answering(500, { code: 500, msg: '' })],
    ['a reset', 'retryable', (req) => req.socket.destroy()],
  ])('getJob maps %s to %s', async (_name, type, handler) => {
    const s = await server(handler);
    expect((await client(s.url).getJob(uuid)).type).toBe(type);
  });

  it('reads the balance', async () => {
    const s = await server(answering(200, { code: 0, msg: 'ok', data: { count: 1000 } }));
    expect(await client(s.url).getBalance()).toEqual({ type: 'ok', value: 1000 });
    expect(s.requests[0]?.url).toBe('/api/v1/user/tokens');
    expect(s.requests[0]?.headers.authorization).toBe(`Bearer ${KEY}`);
  });
});

describe('errors a server cannot produce (MockAgent)', () => {
  it.each([['ENOTFOUND'], ['EAI_AGAIN']])('a DNS failure (%s) is retryable and not charged', async (code) => {
    const mock = new MockAgent();
    mock.disableNetConnect();
    cleanups.push(() => mock.close());
    mock
      .get('https://api.example.test')
      .intercept({ path: VIDEOS, method: 'POST' })
      .replyWithError(Object.assign(new Error(`getaddrinfo ${code} api.example.test`), { code }));
    const outcome = await client('https://api.example.test', { dispatcher: mock }).submit(VIDEOS, body);
    expect(outcome).toMatchObject({ type: 'retryable', mayHaveCharged: false, retrySafe: true });
  });
});

describe('the API key never reaches the events, and the edges can redact the outcomes', () => {
  const paths: [string, Handler][] = [
    ['a 500 page echoing the header', echoing(500, (a) => `<html>debug: authorization=${a}</html>`)],
    [
      'a 400 message echoing the header',
      (req, res) => sendJson(res, 400, { code: 400, msg: `bad ${req.headers.authorization}` }),
    ],
    [
      'a 401 echoing the key',
      (req, res) => sendJson(res, 401, { code: 401, msg: `Token Error ${req.headers.authorization}` }),
    ],
    [
      'a 101 echoing the key',
      (req, res) => sendJson(res, 200, { code: 101, msg: `quota of ${req.headers.authorization}` }),
    ],
    ['a 502 echoing the key', echoing(502, (a) => a)],
    [
      'a record echoing the key',
      (req, res) =>
        sendJson(res, 200, {
          code: 0,
          msg: 'ok',
          data: { img_uuid: uuid, status: req.headers.authorization, json: null },
        }),
    ],
    ['a reset', (req) => req.socket.destroy()],
    ['a 200 echoing the key as text', echoing(200, (a) => a)],
  ];

  it.each(paths)('%s', async (_name, handler) => {
    const s = await server(handler);
    const events: ApiRequestEvent[] = [];
    const c = client(s.url, { onRequest: (e) => events.push(e) });
    const outcomes = [await c.submit(VIDEOS, body), await c.getJob(uuid), await c.getBalance()];
    expect(s.requests.length).toBe(3);
    expect(JSON.stringify(events)).not.toContain(KEY);
    // Outcomes keep the server's words as they came; whatever prints or stores them redacts.
    const redact = createRedactor(KEY);
    const printed = redact(JSON.stringify(outcomes));
    expect(printed).not.toContain(KEY);
    expect(printed).not.toContain(encodeURIComponent(KEY));
  });

  it('on network errors and headers timeouts', async () => {
    const port = await closedPort();
    const s = await server(() => {});
    for (const c of [
      client(`http://127.0.0.1:${port}`),
      client(s.url, { timeouts: { submitHeadersMs: 100, readHeadersMs: 100 } }),
    ]) {
      const outcomes = [await c.submit(VIDEOS, body), await c.getJob(uuid), await c.getBalance()];
      expect(JSON.stringify(outcomes)).not.toContain(KEY);
    }
  });

  it.each<[string, Parameters<typeof createApiClient>[0]]>([
    ['a bad base URL', { baseUrl: 'not a url', apiKey: KEY }],
    ['a file: base URL', { baseUrl: 'file:///etc', apiKey: KEY }],
    ['a key with a line break', { baseUrl: 'http://127.0.0.1:1', apiKey: `${KEY}\nx` }],
    ['a key with a space', { baseUrl: 'http://127.0.0.1:1', apiKey: `Bearer ${KEY}` }],
    ['a bad timeout', { baseUrl: 'http://127.0.0.1:1', apiKey: KEY, timeouts: { connectMs: -1 } }],
  ])('in the error for %s', (_name, options) => {
    let caught: unknown;
    try {
      createApiClient(options);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(Error);
    expect(String(caught)).not.toContain(KEY);
    expect(String(caught)).toMatch(/^ApiSettingsError: (baseUrl|apiKey|timeouts\.connectMs): must be /);
  });

  it('in the errors of bad arguments', async () => {
    const c = client('http://127.0.0.1:1');
    await expect(c.getJob('')).rejects.toThrow(/^imgUuid: must be a non-empty string, got ""$/);
    // @ts-expect-error: a path outside the API on purpose
    await expect(c.submit('/etc/passwd', body)).rejects.toThrow(
      /^endpoint: must be a path under \/api\/v1\//,
    );
  });
});
