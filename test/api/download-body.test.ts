// The body of a result link read through undici's dispatch with our own handler (issue 28: no stream
// between the socket and the ring). What the reading loop relies on: every byte in order whatever the
// taker's waits, a failure heard whenever it happened, and an abort that stops the request at once.
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from 'undici';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { dispatchGet } from '../../src/api/download-body.js';
import { type Handler, startServer } from './servers.js';

let dispatcher: Agent;
const cleanups: (() => Promise<void>)[] = [];
const data = randomBytes(3 * 1024 * 1024 + 777);
const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

beforeEach(() => {
  dispatcher = new Agent({ keepAliveTimeout: 1000 });
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await dispatcher.close();
});

async function url(handler: Handler): Promise<URL> {
  const s = await startServer(handler);
  cleanups.push(s.close);
  return new URL(s.url);
}

async function send(res: ServerResponse, bytes: Buffer): Promise<void> {
  res.on('error', () => {});
  for (let at = 0; at < bytes.length; at += 65_521) {
    if (!res.write(bytes.subarray(at, at + 65_521))) await once(res, 'drain');
  }
  res.end();
}

it('gives every byte in order while the taker makes it wait at every other chunk', async () => {
  const link = await url((_req, res) => {
    res.writeHead(200, { 'content-length': data.length });
    void send(res, data);
  });
  const response = await dispatchGet(dispatcher, link, { timeoutMs: 5000 });
  expect(response.statusCode).toBe(200);
  expect(response.headers['content-length']).toBe(String(data.length));
  const got: Buffer[] = [];
  let n = 0;
  await response.body.consume((chunk) => {
    got.push(Buffer.from(chunk));
    return n++ % 2 === 0 ? sleep(2) : undefined;
  });
  expect(sha256(Buffer.concat(got))).toBe(sha256(data));
});

it('a body stopped before anyone reads it (the deadline) fails the read that comes later: it never hangs', async () => {
  const link = await url((_req, res) => {
    res.writeHead(200, { 'content-length': data.length });
    void send(res, data);
  });
  const response = await dispatchGet(dispatcher, link, { timeoutMs: 5000 });
  const late = new Error('too slow');
  response.body.destroy(late);
  await expect(response.body.consume(() => undefined)).rejects.toBe(late);
});

it('a taker that throws stops the transfer with its own error', async () => {
  const link = await url((_req, res) => {
    res.writeHead(200, { 'content-length': data.length });
    void send(res, data);
  });
  const response = await dispatchGet(dispatcher, link, { timeoutMs: 5000 });
  const refused = new Error('too much');
  await expect(
    response.body.consume(() => {
      throw refused;
    }),
  ).rejects.toBe(refused);
});

it('an abort while the server has not answered stops the request with the signal’s reason', async () => {
  const link = await url(() => {});
  const stop = new AbortController();
  const asked = dispatchGet(dispatcher, link, { timeoutMs: 5000, signal: stop.signal });
  setTimeout(() => stop.abort(new Error('stopped by the user')), 50);
  await expect(asked).rejects.toThrow('stopped by the user');
});
