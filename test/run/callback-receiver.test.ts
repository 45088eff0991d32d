import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CALLBACK_PATH,
  type CallbackHint,
  type CallbackReceiver,
  callbackKey,
  callbackUrlFor,
  newCallbackToken,
  parseListen,
  type ReceiverTimeouts,
  startCallbackReceiver,
} from '../../src/run/callbacks.js';

let receiver: CallbackReceiver | undefined;
afterEach(async () => {
  await receiver?.close();
  receiver = undefined;
});

async function start(
  hints: CallbackHint[],
  token = 'tok-abcdefghijklmnop',
  settled?: (hint: CallbackHint) => Promise<boolean>,
) {
  const tasks = new Map([[callbackKey('hero-mug'), 'hero-mug']]);
  receiver = await startCallbackReceiver({
    host: '127.0.0.1',
    port: 0,
    token,
    taskForKey: (key) => tasks.get(key),
    onHint: (hint) => {
      hints.push(hint);
      return settled?.(hint);
    },
  });
  return receiver;
}

const body = (status: string, imgUuid = 'uuid-1') =>
  JSON.stringify({ code: 0, msg: 'success', data: { img_uuid: imgUuid, status, json: null } });

async function post(url: string, payload: string, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: payload,
  });
  await response.arrayBuffer();
  return response.status;
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

describe('callback receiver', () => {
  it('answers 200 and passes a hint for a known task with the right token', async () => {
    const hints: CallbackHint[] = [];
    const r = await start(hints);
    const url = callbackUrlFor(r.localUrl, 'tok-abcdefghijklmnop', 'hero-mug');
    expect(await post(url, body('processing'))).toBe(200);
    await settle();
    expect(hints).toEqual([{ taskId: 'hero-mug', imgUuid: 'uuid-1', status: 'processing' }]);
  });

  it('refuses a wrong token with 404 and passes nothing on', async () => {
    const hints: CallbackHint[] = [];
    const r = await start(hints);
    expect(await post(callbackUrlFor(r.localUrl, 'tok-abcdefghijklmnoX', 'hero-mug'), body('success'))).toBe(
      404,
    );
    expect(await post(callbackUrlFor(r.localUrl, 'short', 'hero-mug'), body('success'))).toBe(404);
    await settle();
    expect(hints).toEqual([]);
    expect(r.stats.ignored).toBe(2);
  });

  it('answers 200 to an unknown task but ignores it', async () => {
    const hints: CallbackHint[] = [];
    const r = await start(hints);
    expect(
      await post(callbackUrlFor(r.localUrl, 'tok-abcdefghijklmnop', 'someone-else'), body('success')),
    ).toBe(200);
    await settle();
    expect(hints).toEqual([]);
  });

  it('deduplicates by img_uuid plus status', async () => {
    const hints: CallbackHint[] = [];
    const r = await start(hints);
    const url = callbackUrlFor(r.localUrl, 'tok-abcdefghijklmnop', 'hero-mug');
    for (const status of ['processing', 'processing', 'success', 'success', 'processing']) {
      expect(await post(url, body(status))).toBe(200);
    }
    await settle();
    expect(hints.map((h) => h.status)).toEqual(['processing', 'success']);
  });

  it("deduplicates per task: a body naming another task's job does not use up that job's callback", async () => {
    const hints: CallbackHint[] = [];
    const tasks = new Map([
      [callbackKey('hero-mug'), 'hero-mug'],
      [callbackKey('hero-cap'), 'hero-cap'],
    ]);
    receiver = await startCallbackReceiver({
      host: '127.0.0.1',
      port: 0,
      token: 'tok-abcdefghijklmnop',
      taskForKey: (key) => tasks.get(key),
      onHint: (hint) => {
        hints.push(hint);
        return undefined;
      },
    });
    const forged = callbackUrlFor(receiver.localUrl, 'tok-abcdefghijklmnop', 'hero-mug');
    const genuine = callbackUrlFor(receiver.localUrl, 'tok-abcdefghijklmnop', 'hero-cap');
    expect(await post(forged, body('success', 'uuid-of-cap'))).toBe(200);
    expect(await post(genuine, body('success', 'uuid-of-cap'))).toBe(200);
    await settle();
    expect(hints.map((h) => h.taskId)).toEqual(['hero-mug', 'hero-cap']);
  });

  it('forgets a claim the runner could not confirm, so the genuine callback still gets through', async () => {
    const hints: CallbackHint[] = [];
    // The first `success` is forged (the job is still processing); the second is the service's own.
    let confirmed = false;
    const r = await start(
      hints,
      'tok-abcdefghijklmnop',
      async (hint) => hint.status !== 'success' || confirmed,
    );
    const url = callbackUrlFor(r.localUrl, 'tok-abcdefghijklmnop', 'hero-mug');
    expect(await post(url, body('success'))).toBe(200);
    await settle();
    confirmed = true;
    expect(await post(url, body('success'))).toBe(200);
    await settle();
    expect(await post(url, body('success'))).toBe(200);
    await settle();
    expect(hints.map((h) => h.status)).toEqual(['success', 'success']);
    expect(r.stats).toEqual({ received: 3, ignored: 1, hints: 2 });
  });

  it('refuses a 10 MB body without passing anything on', async () => {
    const hints: CallbackHint[] = [];
    const r = await start(hints);
    const url = callbackUrlFor(r.localUrl, 'tok-abcdefghijklmnop', 'hero-mug');
    const huge = JSON.stringify({
      data: { img_uuid: 'uuid-1', status: 'success', pad: 'x'.repeat(10 * 1024 * 1024) },
    });
    expect(await post(url, huge)).toBe(413);
    expect(await post(url, '{not json')).toBe(400);
    await settle();
    expect(hints).toEqual([]);
  });

  it('gives every run its own unguessable token', () => {
    const tokens = new Set(Array.from({ length: 100 }, () => newCallbackToken()));
    expect(tokens.size).toBe(100);
    for (const t of tokens) expect(t).toMatch(/^[A-Za-z0-9_-]{32}$/);
  });
});

/** A raw TCP client: what it received, and a promise that resolves when the server ends the socket. */
async function rawClient(localUrl: string, send: string) {
  const { hostname, port } = new URL(localUrl);
  const socket: Socket = connect({ host: hostname, port: Number(port) });
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let received = '';
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1');
  });
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  if (send !== '') socket.write(send);
  return { socket, closed, received: () => received };
}

/** `promise`, or 'late' if it has not settled within `ms` (a bound on hanging, not a timing claim). */
function within<T>(promise: Promise<T>, ms: number): Promise<T | 'late'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

describe('callback receiver under slow or stuck clients', () => {
  const half = `POST ${CALLBACK_PATH}/tok/key HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n`;

  it('close() ends at once while clients hold sockets open: half a request, nothing sent, kept alive', async () => {
    const r = await start([]);
    const stuck = await rawClient(r.localUrl, half);
    const silent = await rawClient(r.localUrl, '');
    const kept = await rawClient(
      r.localUrl,
      `POST ${CALLBACK_PATH}/x/y HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(kept.received()).toMatch(/^HTTP\/1\.1 404/);
    receiver = undefined;
    expect(await within(r.close(), 1_000)).toBeUndefined();
    expect(await within(Promise.all([stuck.closed, silent.closed, kept.closed]), 1_000)).not.toBe('late');
  });

  it('drops a client that never finishes its headers', async () => {
    const r = await startWith({ headers: 200, request: 300, idle: 5_000 });
    const stuck = await rawClient(r.localUrl, half.replace('Content-Length: 100\r\n', ''));
    expect(await within(stuck.closed, 3_000)).toBeUndefined();
    expect(stuck.received()).toMatch(/^(HTTP\/1\.1 408|$)/);
  });

  it('drops a client that sends headers but never the body', async () => {
    const r = await startWith({ headers: 200, request: 300, idle: 5_000 });
    const stuck = await rawClient(r.localUrl, `${half}\r\n{"code":`);
    expect(await within(stuck.closed, 3_000)).toBeUndefined();
  });

  it('drops a connection that sends nothing', async () => {
    const r = await startWith({ idle: 200 });
    const silent = await rawClient(r.localUrl, '');
    expect(await within(silent.closed, 3_000)).toBeUndefined();
  });
});

async function startWith(timeouts: Partial<ReceiverTimeouts>) {
  receiver = await startCallbackReceiver({
    host: '127.0.0.1',
    port: 0,
    token: 'tok-abcdefghijklmnop',
    taskForKey: () => undefined,
    onHint: () => undefined,
    timeouts,
  });
  return receiver;
}

describe('parseListen', () => {
  it.each([
    ['127.0.0.1:8080', { host: '127.0.0.1', port: 8080 }],
    ['localhost:0', { host: 'localhost', port: 0 }],
    ['[::1]:9000', { host: '::1', port: 9000 }],
  ])('%s', (value, expected) => {
    expect(parseListen(value)).toEqual(expected);
  });

  it.each(['8080', 'host:', 'host:99999', ':80'])('refuses %j', (value) => {
    expect(() => parseListen(value)).toThrow(/^--listen: must be host:port/);
  });
});
