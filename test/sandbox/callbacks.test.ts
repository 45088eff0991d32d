// Status-change callbacks: one per change to processing, success and failed, retried up to 3 times.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, openSandbox, PATHS } from './helpers.js';

const receivers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((close) => close()));
  await closeAll();
});

interface Received {
  status: string;
  // biome-ignore lint/suspicious/noExplicitAny: the envelope as it arrived; tests assert its shape
  body: any;
}

/** A loopback receiver whose `answer` decides each reply from the attempt number (1-based). */
async function receiver(
  answer: (attempt: number) => number | 'hang',
): Promise<{ url: string; received: Received[] }> {
  const received: Received[] = [];
  let attempt = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let text = '';
    req.on('data', (chunk) => {
      text += chunk;
    });
    req.on('end', () => {
      const body = JSON.parse(text);
      received.push({ status: body.data.status, body });
      const reply = answer(++attempt);
      if (reply !== 'hang') res.writeHead(reply).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receivers.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, received };
}

describe('callbacks', () => {
  it('carries the wire form of jobs/detail under the quirks in force', async () => {
    const hook = await receiver(() => 200);
    const { sandbox, api, clock } = await openSandbox({
      quirks: ['completed', 'string-numbers', 'request-id'],
    });
    await api.submit(PATHS.images, { model: 'flat-image', prompt: 'x', custom_callback_url: hook.url });
    clock.advance(20);
    sandbox.advance();
    await sandbox.callbacksSettled();
    expect(hook.received.map((r) => r.status)).toEqual(['processing', 'completed']);
    const done = hook.received[1]?.body;
    expect(done).toMatchObject({
      code: '0',
      msg: null,
      request_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
    });
    expect(typeof done.data.duration).toBe('string');
    // The sandbox's own view keeps the spec's status.
    expect(sandbox.state().jobs[0]?.callbacks.map((c) => c.status)).toEqual(['processing', 'success']);
  });

  it('sends processing then success, each with the job record, in order', async () => {
    const hook = await receiver(() => 200);
    const { sandbox, api, clock } = await openSandbox();
    const { body } = await api.submit(PATHS.images, {
      model: 'flat-image',
      prompt: 'x',
      custom_callback_url: hook.url,
    });
    clock.advance(20);
    sandbox.advance();
    await sandbox.callbacksSettled();
    expect(hook.received.map((r) => r.status)).toEqual(['processing', 'success']);
    const success = hook.received[1]?.body;
    expect(success).toEqual((await api.poll(body.data.img_uuid)).body);
    expect(sandbox.state().jobs[0]?.callbacks).toEqual([
      { status: 'processing', outcome: 'delivered', attempts: [{ at: expect.any(String), statusCode: 200 }] },
      { status: 'success', outcome: 'delivered', attempts: [{ at: expect.any(String), statusCode: 200 }] },
    ]);
  });

  it('retries a receiver that fails twice, and delivers on the third attempt', async () => {
    const hook = await receiver((n) => (n <= 2 ? 500 : 200));
    const { sandbox, api } = await openSandbox({ speed: 0, failRate: 1 });
    await api.submit(PATHS.images, { model: 'flat-image', prompt: 'x', custom_callback_url: hook.url });
    sandbox.advance();
    await sandbox.callbacksSettled();
    expect(hook.received.map((r) => r.status)).toEqual(['processing', 'processing', 'processing', 'failed']);
    const [processing, failed] = sandbox.state().jobs[0]?.callbacks ?? [];
    expect(processing?.attempts.map((a) => a.statusCode)).toEqual([500, 500, 200]);
    expect(processing?.outcome).toBe('delivered');
    expect(failed).toMatchObject({ status: 'failed', outcome: 'delivered' });
  });

  it('drops a notification after 1 attempt and 3 retries', async () => {
    const hook = await receiver(() => 503);
    const { sandbox, api } = await openSandbox({ speed: 0 });
    await api.submit(PATHS.images, { model: 'flat-image', prompt: 'x', custom_callback_url: hook.url });
    sandbox.advance();
    await sandbox.callbacksSettled();
    expect(hook.received).toHaveLength(8);
    expect(sandbox.state().jobs[0]?.callbacks.map((c) => [c.outcome, c.attempts.length])).toEqual([
      ['dropped', 4],
      ['dropped', 4],
    ]);
  });

  it('gives up on an attempt that gets no answer within the timeout', async () => {
    const hook = await receiver((n) => (n === 1 ? 'hang' : 200));
    const { sandbox, api } = await openSandbox({ speed: 0, callbackTimeoutMs: 200 });
    await api.submit(PATHS.images, { model: 'flat-image', prompt: 'x', custom_callback_url: hook.url });
    sandbox.advance();
    await sandbox.callbacksSettled();
    const [processing] = sandbox.state().jobs[0]?.callbacks ?? [];
    expect(processing?.attempts).toEqual([
      { at: expect.any(String), error: 'no answer within 200 ms' },
      { at: expect.any(String), statusCode: 200 },
    ]);
  });

  it('records a refused connection as an attempt', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const { sandbox, api } = await openSandbox({ speed: 0 });
    await api.submit(PATHS.images, {
      model: 'flat-image',
      prompt: 'x',
      custom_callback_url: `http://127.0.0.1:${port}/hook`,
    });
    sandbox.advance();
    await sandbox.callbacksSettled();
    const [processing] = sandbox.state().jobs[0]?.callbacks ?? [];
    expect(processing?.outcome).toBe('dropped');
    expect(processing?.attempts[0]?.error).toMatch(/ECONNREFUSED|refused/);
  });

  it.each([
    [
      'inside args',
      { model: 'flat-image', prompt: 'x' },
      (url: string) => ({ args: { custom_callback_url: url } }),
    ],
    [
      "under stream-2-0-fast's alias",
      { model: 'stream-2-0-fast', prompt: 'x', duration: 4 },
      (url: string) => ({ callback_url: url }),
    ],
  ])('takes the callback URL %s', async (_name, body, callback) => {
    const hook = await receiver(() => 200);
    const { sandbox, api } = await openSandbox({ speed: 0 });
    const path = body.model === 'flat-image' ? PATHS.images : PATHS.videos;
    expect((await api.submit(path, { ...body, ...callback(hook.url) })).body.code).toBe(0);
    sandbox.advance();
    await sandbox.callbacksSettled();
    expect(hook.received.map((r) => r.status)).toEqual(['processing', 'success']);
    expect(sandbox.state().jobs[0]?.callback_url).toBe(hook.url);
  });

  it('sends callbacks without being polled, on its own timer', async () => {
    const hook = await receiver(() => 200);
    const { api } = await openSandbox({ speed: 0, tickMs: 20 });
    await api.submit(PATHS.images, { model: 'flat-image', prompt: 'x', custom_callback_url: hook.url });
    await expect.poll(() => hook.received.length, { timeout: 2000 }).toBe(2);
  });
});
