import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Agent } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type DownloadOptions, downloadResult } from '../../src/api/download.js';
import { closedPort, type Handler, startServer, type TestServer } from './servers.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

let dir: string;
let dispatcher: Agent;
const cleanups: (() => Promise<void>)[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mediabatch-download-'));
  dispatcher = new Agent({ keepAliveTimeout: 1000 });
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await dispatcher.close();
  await rm(dir, { recursive: true, force: true });
});

async function server(handler: Handler): Promise<TestServer> {
  const s = await startServer(handler);
  cleanups.push(s.close);
  return s;
}

const options = (extra: Partial<DownloadOptions> = {}): DownloadOptions => ({
  maxBytes: 1024 * 1024,
  timeoutMs: 5000,
  dispatcher,
  ...extra,
});

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

const serveBytes =
  (data: Buffer, headers: Record<string, string | number> = {}): Handler =>
  (_req, res) => {
    res.writeHead(200, { 'content-type': 'image/png', 'content-length': data.length, ...headers });
    res.end(data);
  };

const status =
  (code: number, text = ''): Handler =>
  (_req, res) => {
    res.writeHead(code, { 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };

/** Writes `total` bytes in chunks with backpressure, without ever holding them all. */
async function streamBytes(res: ServerResponse, total: number, chunk: Buffer): Promise<void> {
  let left = total;
  while (left > 0) {
    const piece = left >= chunk.length ? chunk : chunk.subarray(0, left);
    left -= piece.length;
    if (!res.write(piece)) await once(res, 'drain');
  }
  res.end();
}

const filesIn = async (folder: string) => (await readdir(folder, { recursive: true })).sort();

describe('downloadResult', () => {
  it('writes the file under its final name and returns its size and sha256', async () => {
    const data = Buffer.from('PNG-bytes-'.repeat(1000));
    const s = await server(serveBytes(data));
    const dest = join(dir, 'task-1', '1.png');
    const result = await downloadResult(`${s.url}/files/x.png?sig=abc`, dest, options());
    expect(result).toEqual({ ok: true, bytes: data.length, sha256: sha256(data) });
    expect(await readFile(dest)).toEqual(data);
    expect(await filesIn(dir)).toEqual(['task-1', 'task-1/1.png']);
  });

  it('accepts a body without Content-Length (chunked)', async () => {
    const s = await server(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'audio/mpeg' });
      await streamBytes(res, 300_000, Buffer.alloc(7000, 1));
    });
    const result = await downloadResult(s.url, join(dir, 'a.mp3'), options());
    expect(result).toMatchObject({ ok: true, bytes: 300_000 });
  });

  it('replaces a stale .part left by a crash', async () => {
    const dest = join(dir, 'x.png');
    await writeFile(`${dest}.part`, 'old junk that is longer than the new file');
    const s = await server(serveBytes(Buffer.from('new')));
    expect(await downloadResult(s.url, dest, options())).toMatchObject({ ok: true, bytes: 3 });
    expect(await readFile(dest, 'utf8')).toBe('new');
    expect(await filesIn(dir)).toEqual(['x.png']);
  });

  it('follows a redirect to another http link', async () => {
    const data = Buffer.from('moved');
    const s = await server((req, res) => {
      if (req.url === '/old') {
        res.writeHead(302, { location: '/new', 'content-length': 0 });
        res.end();
      } else serveBytes(data)(req, res, '');
    });
    expect(await downloadResult(`${s.url}/old`, join(dir, 'r.png'), options())).toMatchObject({
      ok: true,
      bytes: 5,
    });
  });

  it.each([
    ['file:///etc/passwd'],
    ['data:image/png;base64,AAAA'],
    ['ftp://example.org/x.png'],
    ['javascript:alert(1)'],
    ['not a url'],
  ])('refuses %s without touching the disk', async (url) => {
    const result = await downloadResult(url, join(dir, 'x.png'), options());
    expect(result).toMatchObject({ ok: false, type: 'bad-url', retrySafe: false });
    expect(await filesIn(dir)).toEqual([]);
  });

  it('refuses a redirect to a file: link', async () => {
    const s = await server((_req, res) => {
      res.writeHead(301, { location: 'file:///etc/passwd', 'content-length': 0 });
      res.end();
    });
    const result = await downloadResult(s.url, join(dir, 'x.png'), options());
    expect(result).toMatchObject({ ok: false, type: 'bad-url' });
    expect(await filesIn(dir)).toEqual([]);
  });

  it.each<[number, string, boolean]>([
    [403, 'expired', false],
    [410, 'expired', false],
    [404, 'http-error', false],
    [500, 'http-error', true],
    [503, 'http-error', true],
    [429, 'http-error', true],
  ])('HTTP %i is %s (retry safe: %s) and leaves nothing on disk', async (code, type, retrySafe) => {
    const s = await server(status(code, '<Error>Request has expired</Error>'));
    const result = await downloadResult(
      `${s.url}/x.png?X-Amz-Signature=secret`,
      join(dir, 'x.png'),
      options(),
    );
    expect(result).toMatchObject({ ok: false, type, retrySafe, httpStatus: code });
    expect(result.ok === false && result.message).not.toContain('secret');
    expect(await filesIn(dir)).toEqual([]);
  });

  it('refuses a file whose Content-Length is over the cap without reading it', async () => {
    let written = 0;
    const s = await server(async (_req, res) => {
      res.writeHead(200, { 'content-length': 50 * 1024 * 1024 });
      const chunk = Buffer.alloc(64 * 1024);
      res.on('error', () => {});
      for (let i = 0; i < 800 && !res.destroyed; i++) {
        written += chunk.length;
        if (!res.write(chunk)) await Promise.race([once(res, 'drain'), once(res, 'close')]);
      }
    });
    const result = await downloadResult(s.url, join(dir, 'big.mp4'), options({ maxBytes: 1024 * 1024 }));
    expect(result).toMatchObject({ ok: false, type: 'too-large', retrySafe: false });
    expect(await filesIn(dir)).toEqual([]);
    expect(written).toBeLessThan(50 * 1024 * 1024);
  });

  it('stops a chunked download once it passes the cap and removes the .part', async () => {
    const s = await server(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'video/mp4' });
      res.on('error', () => {});
      await streamBytes(res, 5 * 1024 * 1024, Buffer.alloc(64 * 1024, 7)).catch(() => {});
    });
    const result = await downloadResult(s.url, join(dir, 'big.mp4'), options({ maxBytes: 1024 * 1024 }));
    expect(result).toMatchObject({ ok: false, type: 'too-large' });
    expect(await filesIn(dir)).toEqual([]);
  });

  it('reports a body cut short of its Content-Length as truncated', async () => {
    const s = await server((_req, res) => {
      res.writeHead(200, { 'content-length': 100_000 });
      res.write(Buffer.alloc(40_000, 3));
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const result = await downloadResult(s.url, join(dir, 'cut.png'), options());
    expect(result).toMatchObject({ ok: false, type: 'truncated', retrySafe: true });
    expect(result.ok === false && result.message).toMatch(/of 100000 bytes/);
    expect(await filesIn(dir)).toEqual([]);
  });

  it('reports a size other than the expected one as truncated', async () => {
    const s = await server(serveBytes(Buffer.alloc(900)));
    const result = await downloadResult(s.url, join(dir, 'x.png'), options({ expectedBytes: 1000 }));
    expect(result).toMatchObject({ ok: false, type: 'truncated', retrySafe: true });
    expect(result.ok === false && result.message).toMatch(/got 900 bytes, expected 1000/);
    expect(await filesIn(dir)).toEqual([]);
  });

  it('reports a refused connection as a retryable network failure', async () => {
    const port = await closedPort();
    const result = await downloadResult(`http://127.0.0.1:${port}/x.png`, join(dir, 'x.png'), options());
    expect(result).toMatchObject({ ok: false, type: 'network', retrySafe: true });
    expect(await filesIn(dir)).toEqual([]);
  });

  it('reports a server that never answers as a retryable network failure', async () => {
    const s = await server(() => {});
    const result = await downloadResult(s.url, join(dir, 'x.png'), options({ timeoutMs: 100 }));
    expect(result).toMatchObject({ ok: false, type: 'network', retrySafe: true });
  });

  it('reports a destination it cannot write as a disk failure', async () => {
    const blocker = join(dir, 'not-a-folder');
    await writeFile(blocker, 'x');
    const s = await server(serveBytes(Buffer.from('data')));
    const result = await downloadResult(s.url, join(blocker, 'x.png'), options());
    expect(result).toMatchObject({ ok: false, type: 'disk', retrySafe: false });
  });

  it('streams a large file with flat memory', async () => {
    const total = 64 * 1024 * 1024;
    const chunk = Buffer.alloc(64 * 1024, 0xab);
    const s = await server(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': total });
      await streamBytes(res, total, chunk);
    });
    const expected = createHash('sha256');
    for (let i = 0; i < total / chunk.length; i++) expected.update(chunk);

    // Live memory, not garbage awaiting collection: collect before each sample.
    const live = () => {
      gc();
      const m = process.memoryUsage();
      return m.heapUsed + m.arrayBuffers;
    };
    const baseline = live();
    let peak = 0;
    const sampler = setInterval(() => {
      peak = Math.max(peak, live() - baseline);
    }, 20);
    const dest = join(dir, 'big.mp4');
    const result = await downloadResult(
      s.url,
      dest,
      options({ maxBytes: 100 * 1024 * 1024, timeoutMs: 30_000 }),
    );
    clearInterval(sampler);

    expect(result).toEqual({ ok: true, bytes: total, sha256: expected.digest('hex') });
    expect((await stat(dest)).size).toBe(total);
    // Buffering the file would hold 64 MB; streaming holds a few chunks at a time.
    expect(peak).toBeLessThan(total / 4);
  });
});

describe('downloadResult options', () => {
  it.each<[Partial<DownloadOptions>, RegExp]>([
    [{ maxBytes: 0 }, /^maxBytes: must be a positive number, got 0$/],
    [{ timeoutMs: Number.NaN }, /^timeoutMs: must be a positive number, got NaN$/],
  ])('refuses %j', async (extra, message) => {
    await expect(downloadResult('http://127.0.0.1:1/x', join(dir, 'x'), options(extra))).rejects.toThrow(
      message,
    );
  });
});
