// What the real service (or what stands in front of it) may do on the wire: compressed bodies, a
// byte order mark, Retry-After, 429s. Real loopback HTTP; time is a fake clock.
import type { ServerResponse } from 'node:http';
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { type ApiClient, type ApiClientOptions, createApiClient } from '../../src/api/client.js';
import { type Handler, startServer, type TestServer } from './servers.js';

const KEY = 'SENTINEL-KEY-7d1e0c9b44';
const VIDEOS = '/api/v1/videos/generations';
const uuid = '0b6f7c4e-8f4e-4a39-9a53-2b1f2d7f0e11';
const body = { model: 'flow22_spicy', prompt: 'a cat', resolution: '480p' };
const balanceOf = (count: unknown) => JSON.stringify({ code: 0, msg: 'ok', data: { count } });

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function server(handler: Handler): Promise<TestServer> {
  const s = await startServer(handler);
  cleanups.push(s.close);
  return s;
}

function client(baseUrl: string, extra: Partial<ApiClientOptions> = {}): ApiClient {
  const c = createApiClient({ baseUrl, apiKey: KEY, ...extra });
  cleanups.push(() => c.close());
  return c;
}

function send(
  res: ServerResponse,
  status: number,
  bytes: Buffer,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': bytes.length, ...headers });
  res.end(bytes);
}

/** A fake wall clock whose sleeps move it forward at once, and a log of what was slept. */
function fakeTime(start: number) {
  const clock = { t: start, slept: [] as number[] };
  return {
    clock,
    now: () => clock.t,
    sleep: async (ms: number) => {
      clock.slept.push(ms);
      const deadline = clock.t + ms;
      await Promise.resolve();
      clock.t = Math.max(clock.t, deadline);
    },
  };
}

describe('compressed and decorated bodies', () => {
  const json = Buffer.from(balanceOf(1234.5));
  it.each<[string, Buffer, Record<string, string>]>([
    ['gzip', gzipSync(json), { 'content-encoding': 'gzip' }],
    ['deflate (zlib)', deflateSync(json), { 'content-encoding': 'deflate' }],
    ['deflate (raw)', deflateRawSync(json), { 'content-encoding': 'deflate' }],
    ['br', brotliCompressSync(json), { 'content-encoding': 'br' }],
    ['gzip then br', brotliCompressSync(gzipSync(json)), { 'content-encoding': 'gzip, br' }],
    ['identity', json, { 'content-encoding': 'identity' }],
    ['a UTF-8 BOM', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), json]), {}],
    [
      'gzip with a BOM inside',
      gzipSync(Buffer.concat([Buffer.from('\uFEFF'), json])),
      { 'content-encoding': 'gzip' },
    ],
    ['JSON sent as text/html', json, { 'content-type': 'text/html' }],
  ])('reads %s', async (_name, bytes, headers) => {
    const s = await server((_req, res) => send(res, 200, bytes, headers));
    expect(await client(s.url).getBalance()).toEqual({ type: 'ok', value: 1234.5 });
    expect(s.requests[0]?.headers['accept-encoding']).toBe('gzip, deflate, br');
  });

  it('accepts a gzip-compressed submission', async () => {
    const answer = gzipSync(JSON.stringify({ code: 0, msg: 'Success', data: { img_uuid: uuid, cost: '5' } }));
    const s = await server((_req, res) => send(res, 200, answer, { 'content-encoding': 'gzip' }));
    expect(await client(s.url).submit(VIDEOS, body)).toMatchObject({
      type: 'accepted',
      imgUuid: uuid,
      cost: 5,
    });
  });

  // 16 MiB of spaces: about 16 kB on the wire, four times the 4 MiB the client keeps.
  const bomb = gzipSync(Buffer.alloc(16 * 1024 * 1024, 0x20), { level: 9 });

  it('cuts a gzip bomb off: a read is retried, a submission is in doubt', async () => {
    expect(bomb.length).toBeLessThan(64 * 1024);
    const s = await server((_req, res) => send(res, 200, bomb, { 'content-encoding': 'gzip' }));
    const c = client(s.url);
    const read = await c.getBalance();
    expect(read).toMatchObject({ type: 'retryable' });
    expect(read.type === 'retryable' && read.reason).toBe(
      'the API answer exceeded 4194304 bytes (MEDIABATCH_RESPONSE_TOO_LARGE)',
    );
    expect(await c.submit(VIDEOS, body)).toMatchObject({ type: 'in-doubt', mayHaveCharged: true });
  });

  it.each<[string, Buffer, Record<string, string>, string]>([
    [
      'an unknown content-encoding',
      Buffer.from(balanceOf(1)),
      { 'content-encoding': 'zstd' },
      'content-encoding zstd is not supported',
    ],
    [
      'a corrupt gzip body',
      Buffer.from('not gzip at all'),
      { 'content-encoding': 'gzip' },
      'corrupt gzip body',
    ],
  ])(
    'marks %s unreadable: a read is retried, a submission is in doubt',
    async (_name, bytes, headers, why) => {
      const s = await server((_req, res) => send(res, 200, bytes, headers));
      const c = client(s.url);
      expect(await c.getBalance()).toEqual({
        type: 'retryable',
        reason: `HTTP 200 with a body that cannot be read (${why})`,
        unreadable: true,
      });
      expect(await c.submit(VIDEOS, body)).toMatchObject({
        type: 'in-doubt',
        reason: `HTTP 200 with a body that cannot be read (${why}); the request may have been charged`,
      });
    },
  );
});

describe('Retry-After', () => {
  const T0 = Date.UTC(2025, 0, 15, 12, 0, 0);

  it.each<[string, string, number]>([
    ['delta-seconds', '2', 2_000],
    ['an HTTP-date', new Date(T0 + 30_000).toUTCString(), 30_000],
    ['a date in the past', new Date(T0 - 30_000).toUTCString(), 0],
    ['a value past the 10 min cap', '86400', 600_000],
  ])('as %s closes the gate of reads for that long, not of submissions', async (_name, value, ms) => {
    let throttled = true;
    const s = await server((req, res) => {
      if (throttled) {
        throttled = false;
        send(res, 429, Buffer.from('{"code":429,"msg":"Too Many Requests"}'), { 'retry-after': value });
      } else if (req.method === 'POST') {
        send(res, 200, Buffer.from(JSON.stringify({ code: 0, data: { img_uuid: uuid, cost: 1 } })));
      } else {
        send(res, 200, Buffer.from(balanceOf(7)));
      }
    });
    const time = fakeTime(T0);
    const c = client(s.url, { now: time.now, sleep: time.sleep });

    const first = await c.getBalance();
    expect(first).toMatchObject({ type: 'retryable', throttled: true, retryAfterMs: ms });
    expect(c.throttleState()).toEqual({
      submitsPerSecond: null,
      until: ms > 0 ? T0 + ms : null,
      submitUntil: null,
      readUntil: ms > 0 ? T0 + ms : null,
    });

    // Submissions are another class: they go at once.
    expect(await c.submit(VIDEOS, body)).toMatchObject({ type: 'accepted' });
    expect(time.clock.slept).toEqual([]);

    // Two reads from two tasks: both wait for the same gate, then both are sent.
    const [a, b] = await Promise.all([c.getBalance(), c.getBalance()]);
    expect([a, b]).toEqual([
      { type: 'ok', value: 7 },
      { type: 'ok', value: 7 },
    ]);
    expect(time.clock.slept).toEqual(ms > 0 ? [ms, ms] : []);
    expect(s.requests).toHaveLength(4);
  });

  it('a 503 with Retry-After on a submission is a throttled retry, not a doubt', async () => {
    const s = await server((_req, res) =>
      send(res, 503, Buffer.from('<html>down for maintenance</html>'), { 'retry-after': '120' }),
    );
    const time = fakeTime(T0);
    const c = client(s.url, { now: time.now, sleep: time.sleep });
    expect(await c.submit(VIDEOS, body)).toMatchObject({
      type: 'retryable',
      throttled: true,
      retryAfterMs: 120_000,
      mayHaveCharged: false,
    });
    expect(c.throttleState().submitUntil).toBe(T0 + 120_000);
  });

  it('close() releases a request waiting for the gate, unsent', async () => {
    let calls = 0;
    const s = await server((_req, res) => {
      calls++;
      send(res, 429, Buffer.from('{"code":429}'), { 'retry-after': '600' });
    });
    const c = createApiClient({ baseUrl: s.url, apiKey: KEY });
    expect((await c.getBalance()).type).toBe('retryable');
    // Submissions are the other class: this one is sent.
    expect((await c.submit(VIDEOS, body)).type).toBe('retryable');
    const pending = c.getBalance();
    await c.close();
    expect(await pending).toEqual({
      type: 'retryable',
      reason: 'cancelled while waiting for the API to accept requests again (MEDIABATCH_THROTTLE_ABORTED)',
    });
    expect(calls).toBe(2);
  });

  it('an aborted signal gives a submission back unsent and retryable', async () => {
    const s = await server((_req, res) =>
      send(res, 429, Buffer.from('{"code":429}'), { 'retry-after': '60' }),
    );
    const time = fakeTime(T0);
    const c = client(s.url, { now: time.now, sleep: time.sleep });
    await c.submit(VIDEOS, body);
    const stop = new AbortController();
    stop.abort();
    expect(await c.submit(VIDEOS, body, { signal: stop.signal })).toMatchObject({
      type: 'retryable',
      mayHaveCharged: false,
      reason:
        'cancelled while waiting for the API to accept requests again (MEDIABATCH_THROTTLE_ABORTED) before the request was sent',
    });
    expect(s.requests).toHaveLength(1);
  });
});

describe('slowing submissions down after 429s', () => {
  it('halves the rate on 429s and spaces the next submissions', async () => {
    let refuse = 4;
    const s = await server((_req, res) => {
      if (refuse > 0) {
        refuse--;
        send(res, 429, Buffer.from('{"code":429,"msg":"rate limited"}'));
      } else {
        send(
          res,
          200,
          Buffer.from(JSON.stringify({ code: 0, msg: 'Success', data: { img_uuid: uuid, cost: 1 } })),
        );
      }
    });
    const time = fakeTime(1_000_000);
    const c = client(s.url, { now: time.now, sleep: time.sleep });

    // Four tasks at once, all refused: 4 per second halved once to 2 (one burst, one halving).
    const burst = await Promise.all([1, 2, 3, 4].map(() => c.submit(VIDEOS, body)));
    expect(burst.map((o) => o.type === 'retryable' && o.throttled)).toEqual([true, true, true, true]);
    expect(c.throttleState().submitsPerSecond).toBe(2);

    // The next two go 500 ms apart.
    const next = await Promise.all([c.submit(VIDEOS, body), c.submit(VIDEOS, body)]);
    expect(next.map((o) => o.type)).toEqual(['accepted', 'accepted']);
    expect(time.clock.slept).toEqual([500, 1000]);

    // Reads are not slowed.
    time.clock.slept.length = 0;
    await c.getJob(uuid);
    expect(time.clock.slept).toEqual([]);

    // A minute without 429: no limit any more.
    time.clock.t += 60_000;
    expect(c.throttleState().submitsPerSecond).toBeNull();
  });
});

describe('the API key', () => {
  it.each([['ok'], ['sandbox'], ['1234567']])('refuses %j as too short, without quoting it', (apiKey) => {
    expect(() => createApiClient({ baseUrl: 'http://127.0.0.1:1', apiKey })).toThrow(
      `apiKey: MEDIABATCH_API_KEY is too short (${apiKey.length} characters); a real API key has at least 8`,
    );
  });

  it('accepts 8 characters', () => {
    const c = client('http://127.0.0.1:1', { apiKey: '12345678' });
    expect(c.baseUrl).toBe('http://127.0.0.1:1');
  });

  // A key that is also a word of the answers: redacting outcomes once turned them into '[redacted]'.
  it.each<[string, Handler, (c: ApiClient) => Promise<unknown>, unknown]>([
    [
      'retryable',
      (_req, res) => send(res, 500, Buffer.from('{"code":500,"msg":"retryable"}')),
      (c) => c.getBalance(),
      { type: 'retryable', reason: 'HTTP 500 with code 500 (retryable)' },
    ],
    [
      'accepted',
      (_req, res) =>
        send(
          res,
          200,
          Buffer.from(
            JSON.stringify({ code: 0, msg: 'accepted', data: { img_uuid: 'accepted-1', cost: 2 } }),
          ),
        ),
      (c) => c.submit(VIDEOS, body),
      { type: 'accepted', imgUuid: 'accepted-1', cost: 2, mayHaveCharged: true, retrySafe: false },
    ],
    [
      'img_uuid',
      (_req, res) =>
        send(
          res,
          200,
          Buffer.from(JSON.stringify({ code: 0, data: { img_uuid: uuid, status: 'success', json: null } })),
        ),
      (c) => c.getJob(uuid),
      { type: 'ok', value: { img_uuid: uuid, status: 'success', json: null } },
    ],
  ])('a key %j does not corrupt the answer', async (apiKey, handler, call, expected) => {
    const s = await server(handler);
    expect(await call(client(s.url, { apiKey }))).toEqual(expected);
  });
});
