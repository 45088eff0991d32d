// A large result is hashed and written on a thread of its own (from 16 MB): the same guarantees as the
// small path (the digest of exactly the bytes written, no temporary file left by any failure), and a
// thread that dies fails the download cleanly. The bucket sink shares the reading loop: its own digest
// is compared with the download's.
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import type { Worker } from 'node:worker_threads';
import { Agent } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  type DownloadOptions,
  downloadResult,
  downloadResultToObject,
  type ObjectPut,
  SYNC_EVERY_BYTES,
  THREAD_MIN_BYTES,
} from '../../src/api/download.js';
import { writerThreads } from '../../src/api/download-writer.js';
import { cannotMount, mountTmpfs } from '../util/mount.js';
import { type Handler, startServer, type TestServer } from './servers.js';

let dir: string;
let dispatcher: Agent;
const cleanups: (() => Promise<void>)[] = [];

// Over the thread's threshold and over one early write-back, and no multiple of any block size.
const data = randomBytes(Math.max(THREAD_MIN_BYTES, SYNC_EVERY_BYTES) + 3 * 1024 * 1024 + 12_345);
const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mediabatch-download-thread-'));
  dispatcher = new Agent({ keepAliveTimeout: 1000 });
});
afterEach(async () => {
  writerThreads.started = undefined;
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
  maxBytes: 256 * 1024 * 1024,
  timeoutMs: 10_000,
  dispatcher,
  ...extra,
});

/** Sends `bytes` in pieces with backpressure, then ends (or, with `cutAt`, drops the connection there). */
async function send(res: ServerResponse, bytes: Buffer, cutAt = bytes.length): Promise<void> {
  res.on('error', () => {});
  for (let at = 0; at < cutAt; at += 65_521) {
    if (!res.write(bytes.subarray(at, Math.min(at + 65_521, cutAt)))) await once(res, 'drain');
  }
  if (cutAt < bytes.length) res.socket?.destroy();
  else res.end();
}

const serve =
  (cutAt?: number): Handler =>
  (_req, res) => {
    res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': data.length });
    void send(res, data, cutAt).catch(() => {});
  };

/** Every thread the downloads start, with a promise of its end. */
function watchThreads(): { ended: Promise<number>[] } {
  const ended: Promise<number>[] = [];
  writerThreads.started = (worker: Worker) => {
    ended.push(new Promise((resolve) => worker.once('exit', resolve)));
  };
  return { ended };
}

const filesIn = async (folder: string) => (await readdir(folder, { recursive: true })).sort();

describe('downloadResult: a large result on the writing thread', () => {
  it('is written byte for byte, with the digest of the bytes written, and the thread ends', async () => {
    const threads = watchThreads();
    const s = await server(serve());
    const dest = join(dir, 'clip.mp4');
    const result = await downloadResult(s.url, dest, options());
    expect(result).toMatchObject({
      ok: true,
      bytes: data.length,
      sha256: sha256(data),
      path: dest,
      kind: 'video',
    });
    expect(sha256(await readFile(dest))).toBe(sha256(data));
    expect(await filesIn(dir)).toEqual(['clip.mp4']);
    expect(threads.ended).toHaveLength(1);
    await threads.ended[0];
  });

  it('works from a script run as `node --input-type=module -e`, whose flags the thread must not inherit', async () => {
    const s = await server(serve());
    const dest = join(dir, 'clip.mp4');
    const module = join(import.meta.dirname, '..', '..', 'src', 'api', 'download.ts');
    const script = `const { downloadResult } = await import(${JSON.stringify(module)});
const result = await downloadResult(${JSON.stringify(s.url)}, ${JSON.stringify(dest)}, { maxBytes: ${data.length}, timeoutMs: 30000 });
process.stdout.write(JSON.stringify(result));`;
    // tsx only to read the TypeScript sources; the flag under test is --input-type=module.
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script],
      { cwd: join(import.meta.dirname, '..', '..') },
    );
    expect(JSON.parse(stdout)).toMatchObject({
      ok: true,
      bytes: data.length,
      sha256: sha256(data),
      path: dest,
    });
    expect(sha256(await readFile(dest))).toBe(sha256(data));
  });

  it('a small result is written without a thread', async () => {
    const threads = watchThreads();
    const small = data.subarray(0, 1024 * 1024);
    const s = await server((_req, res) => {
      res.writeHead(200, { 'content-length': small.length });
      res.end(small);
    });
    const result = await downloadResult(s.url, join(dir, 'one.png'), options());
    expect(result).toMatchObject({ ok: true, sha256: sha256(small) });
    expect(threads.ended).toHaveLength(0);
  });

  it('never runs more writing threads than cores: the downloads beyond write on the main thread', async () => {
    let alive = 0;
    let most = 0;
    writerThreads.started = (worker) => {
      alive++;
      most = Math.max(most, alive);
      worker.once('exit', () => alive--);
    };
    const s = await server(serve());
    const count = availableParallelism() + 2;
    const results = await Promise.all(
      Array.from({ length: count }, (_, i) => downloadResult(s.url, join(dir, `${i}.mp4`), options())),
    );
    expect(results.map((r) => r.ok && r.sha256)).toEqual(Array(count).fill(sha256(data)));
    expect(most).toBe(availableParallelism());
    expect(await filesIn(dir)).toHaveLength(count);
  });

  it('a thread that dies in the middle fails the download cleanly and leaves no temporary file', async () => {
    writerThreads.started = (worker) => {
      // Dies right after its first block is written, while the body is still arriving.
      worker.once('message', () => void worker.terminate());
    };
    const s = await server(serve());
    const dest = join(dir, 'clip.mp4');
    const result = await downloadResult(s.url, dest, options());
    expect(result).toEqual({
      ok: false,
      type: 'disk',
      retrySafe: false,
      local: true,
      localCode: 'EUNKNOWN',
      message: `cannot write ${dest}: the thread writing the file stopped (exit code 1)`,
    });
    expect(await filesIn(dir)).toEqual([]);
  });

  it('a thread that fails with an error fails the download the same way', async () => {
    writerThreads.started = (worker) => {
      worker.once('message', () => void worker.emit('error', new Error('out of memory')));
    };
    const s = await server(serve());
    const dest = join(dir, 'clip.mp4');
    const result = await downloadResult(s.url, dest, options());
    expect(result).toMatchObject({
      ok: false,
      type: 'disk',
      message: `cannot write ${dest}: the thread writing the file stopped (out of memory)`,
    });
    expect(await filesIn(dir)).toEqual([]);
  });

  it('a body cut off after several blocks is truncated, leaves nothing, and its thread ends', async () => {
    const threads = watchThreads();
    const s = await server(serve(THREAD_MIN_BYTES / 2 + 7));
    const result = await downloadResult(s.url, join(dir, 'cut.mp4'), options());
    expect(result).toMatchObject({ ok: false, type: 'truncated', retrySafe: true });
    expect(await filesIn(dir)).toEqual([]);
    expect(threads.ended).toHaveLength(1);
    await threads.ended[0];
  });

  it('a download stopped by its signal leaves nothing', async () => {
    const stop = new AbortController();
    const s = await server((_req, res) => {
      res.writeHead(200, { 'content-length': data.length });
      res.on('error', () => {});
      res.write(data.subarray(0, 4 * 1024 * 1024), () => stop.abort());
    });
    const result = await downloadResult(s.url, join(dir, 'stop.mp4'), options({ signal: stop.signal }));
    expect(result.ok).toBe(false);
    expect(await filesIn(dir)).toEqual([]);
  });
});

describe.skipIf(cannotMount !== undefined)('downloadResult: the writing thread meets a full disk', () => {
  it('ENOSPC on the thread says what to free and leaves no partial file', async () => {
    const mountPoint = join(dir, 'disk');
    await mkdir(mountPoint);
    const unmount = mountTmpfs(mountPoint, 1024);
    try {
      const s = await server(serve());
      const dest = join(mountPoint, 'clip.mp4');
      const result = await downloadResult(s.url, dest, options());
      expect(result).toEqual({
        ok: false,
        type: 'disk',
        retrySafe: false,
        local: true,
        localCode: 'ENOSPC',
        message: `no space left on device writing ${dest}: free space, then run again`,
      });
      expect(await filesIn(mountPoint)).toEqual([]);
    } finally {
      unmount();
    }
  });
});

/** A put that reads the whole stream like a bucket and reports the digest it computed (or `lie`). */
function bucket(lie?: (bytes: Buffer) => Buffer): { put: ObjectPut; stored: Map<string, Buffer> } {
  const stored = new Map<string, Buffer>();
  const put: ObjectPut = async (name: string, body: Readable) => {
    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(chunk as Buffer);
    const bytes = Buffer.concat(chunks);
    stored.set(name, bytes);
    return { location: `s3://b/${name}`, sha256: sha256(lie ? lie(bytes) : bytes) };
  };
  return { put, stored };
}

describe('downloadResultToObject: the same reading loop into a bucket', () => {
  it('streams the result into the object, named by its type, with the digest of the bytes stored', async () => {
    const s = await server(serve());
    const { put, stored } = bucket();
    const result = await downloadResultToObject(s.url, 'run/t1/1.png', put, options({ detectType: true }));
    expect(result).toMatchObject({
      ok: true,
      bytes: data.length,
      sha256: sha256(data),
      path: 's3://b/run/t1/1.mp4',
    });
    expect(sha256(stored.get('run/t1/1.mp4') ?? Buffer.alloc(0))).toBe(sha256(data));
  });

  it('a bucket that received other bytes than were downloaded is detected: the result is not done', async () => {
    const s = await server(serve());
    // The bucket lost one byte on the way (a bug between the download and the upload).
    const { put } = bucket((bytes) => bytes.subarray(1));
    const result = await downloadResultToObject(s.url, 'run/t1/1.mp4', put, options());
    expect(result).toEqual({
      ok: false,
      type: 'disk',
      retrySafe: true,
      local: true,
      message: `the bucket received other bytes than were downloaded for run/t1/1.mp4 (SHA-256 ${sha256(data.subarray(1))}, downloaded ${sha256(data)}); it will be fetched again`,
    });
  });

  it('a body over the cap stops the upload; the put sees its body fail', async () => {
    const s = await server((_req, res) => {
      res.writeHead(200, { 'content-type': 'video/mp4' });
      void send(res, data).catch(() => {});
    });
    let putFailed: unknown;
    const put: ObjectPut = async (_name, body) => {
      try {
        for await (const _chunk of body) {
          // read like a bucket
        }
      } catch (error) {
        putFailed = error;
        throw error;
      }
      return { location: 'never' };
    };
    const result = await downloadResultToObject(
      s.url,
      'big.mp4',
      put,
      options({ maxBytes: 5 * 1024 * 1024 }),
    );
    expect(result).toMatchObject({
      ok: false,
      type: 'too-large',
      message: `result file exceeded the limit of ${5 * 1024 * 1024} bytes; download stopped`,
    });
    expect(putFailed).toBeInstanceOf(Error);
  });
});
