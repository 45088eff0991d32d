// Uploads of local inputs over real HTTP, with a proxy in front of s3rver that counts and breaks PUTs:
//  - a folder of ten photos goes up four at a time (the bound), one line of progress per file;
//  - a PUT the server keeps refusing (503) is retried, by the SDK and then by us, and the run goes on;
//  - a file that never goes up stops the run before its first POST: one line, nothing charged;
//  - an object the state database remembers but the bucket lost (a lifecycle rule) is uploaded again.
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Sandbox, startSandbox } from '../../src/sandbox/server.js';
import { cli } from '../helpers/cli.js';
import { S3_KEY_ID, S3_SECRET, startS3, type TestS3 } from '../helpers/s3.js';

const PHOTOS = 10;
const BALANCE = 1000;
let s3: TestS3;
let dir: string;
let sandbox: Sandbox;
let proxy: PutProxy;

interface PutProxy {
  endpoint: string;
  /** PUT requests seen (attempts), and the most at once. */
  puts: number;
  maxInFlight: number;
  /** Answer 503 to the PUTs this says (called with the key and how many PUTs of it came before). */
  refuse: (key: string, earlier: number) => boolean;
  reset(): void;
  close(): Promise<void>;
}

/** Forwards everything to s3rver (the Host header kept, so signatures hold); PUTs are slowed, counted, maybe refused. */
async function startPutProxy(target: string): Promise<PutProxy> {
  const to = new URL(target);
  const perKey = new Map<string, number>();
  let inFlight = 0;
  const state = {
    puts: 0,
    maxInFlight: 0,
    refuse: (_key: string, _earlier: number) => false,
  };
  const server: Server = createServer((req, res) => {
    const put = req.method === 'PUT';
    const key = (req.url ?? '').split('?')[0] ?? '';
    const forward = () => {
      const upstream = request(
        { host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          answer.on('end', () => {
            if (put) inFlight--;
          });
        },
      );
      req.pipe(upstream);
    };
    if (!put) return forward();
    state.puts++;
    inFlight++;
    state.maxInFlight = Math.max(state.maxInFlight, inFlight);
    const earlier = perKey.get(key) ?? 0;
    perKey.set(key, earlier + 1);
    const refused = state.refuse(key, earlier);
    // Slow enough that the pool's bound, not the speed of loopback, decides how many are under way.
    setTimeout(() => {
      if (!refused) return forward();
      req.resume();
      inFlight--;
      res.writeHead(503, { 'content-type': 'application/xml' });
      res.end('<?xml version="1.0"?><Error><Code>SlowDown</Code><Message>Slow down</Message></Error>');
    }, 80);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return Object.assign(state, {
    endpoint: `http://127.0.0.1:${port}`,
    reset() {
      state.puts = 0;
      state.maxInFlight = 0;
      state.refuse = () => false;
      perKey.clear();
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  });
}

beforeAll(async () => {
  s3 = await startS3();
  proxy = await startPutProxy(s3.endpoint);
  sandbox = await startSandbox({ port: 0, speed: 0, seed: 18, apiKey: 'sandbox-key', balance: BALANCE });
  dir = await mkdtemp(join(tmpdir(), 'mb-upload-pool-'));
  await mkdir(join(dir, 'faces'));
  const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  for (let i = 1; i <= PHOTOS; i++) {
    await writeFile(
      join(dir, 'faces', `p${String(i).padStart(2, '0')}.png`),
      Buffer.concat([png, randomBytes(2000)]),
    );
  }
  const manifest = (name: string) =>
    `version: 1\nname: ${name}\ntasks:\n  - id: "swap-{{row.stem}}"\n    model: video-face-swap\n    foreach: faces/*.png\n    input: { reference_video: "${sandbox.baseUrl}/_sandbox/media/talking-head.mp4", reference_img: "file:{{row.path}}", start_time: 0, end_time: 2 }\n`;
  for (const name of ['pool', 'broken', 'again']) await writeFile(join(dir, `${name}.yaml`), manifest(name));
});
afterAll(async () => {
  await sandbox.close();
  await proxy.close();
  await s3.close();
  await rm(dir, { recursive: true, force: true });
});

const env = (prefix: string) => ({
  MEDIABATCH_API_KEY: 'sandbox-key',
  MEDIABATCH_BASE_URL: sandbox.baseUrl,
  MEDIABATCH_POLL_SCALE: '0.01',
  MEDIABATCH_STORAGE_URL: `s3://${s3.bucket}/${prefix}`,
  MEDIABATCH_STORAGE_ENDPOINT: proxy.endpoint,
  AWS_ACCESS_KEY_ID: S3_KEY_ID,
  AWS_SECRET_ACCESS_KEY: S3_SECRET,
});

describe('uploading a folder of photos', () => {
  it('four at a time, a progress line per file; a refused PUT is retried and the run goes on, quietly', async () => {
    proxy.reset();
    let first: string | undefined;
    // The first file's first two PUTs fail. The SDK does not retry a request whose body is a stream (and
    // would console.warn about it, into the run's display): our own retry does, after 250 and 500 ms.
    proxy.refuse = (key, earlier) => {
      first ??= key;
      return key === first && earlier < 2;
    };
    const warn = vi.spyOn(console, 'warn');
    const started = Date.now();
    const run = await cli(['run', 'pool.yaml', '--yes', '--state', 'pool.db'], {
      cwd: dir,
      env: env('pool'),
    });
    const ms = Date.now() - started;
    expect(run.code, run.stdout + run.stderr).toBe(0);
    const lines = run.stdout.match(/^ {2}Upload \d+\/10: faces\/p\d\d\.png uploaded$/gm) ?? [];
    expect(lines).toHaveLength(PHOTOS);
    expect(lines.map((l) => Number(/Upload (\d+)\//.exec(l)?.[1]))).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(proxy.maxInFlight).toBe(4);
    expect(proxy.puts).toBe(PHOTOS + 2);
    expect(warn).not.toHaveBeenCalled();
    warn.mockRestore();
    expect(sandbox.state().jobs.filter((j) => j.model === 'video-face-swap')).toHaveLength(PHOTOS);
    console.log(`10 photos, 2 refused PUTs: run in ${ms} ms`);
  });

  it('a file that never goes up: one line, exit 1, before the first POST', async () => {
    proxy.reset();
    let first: string | undefined;
    proxy.refuse = (key) => {
      first ??= key;
      return key === first;
    };
    const before = sandbox.state();
    const run = await cli(['run', 'broken.yaml', '--yes', '--state', 'broken.db'], {
      cwd: dir,
      env: env('broken'),
    });
    expect(run.code).toBe(1);
    expect(run.stderr.trimEnd().split('\n')).toEqual([
      expect.stringMatching(
        /^mediabatch: storage error from http:\/\/127\.0\.0\.1:\d+ for bucket mediabatch-test: SlowDown \(HTTP 503\)$/,
      ),
    ]);
    const after = sandbox.state();
    expect(after.requests.submit).toBe(before.requests.submit);
    expect(after.balance).toBe(before.balance);
  });

  it('objects the state database remembers but the bucket lost are uploaded again', async () => {
    proxy.reset();
    // The first run's objects, deleted behind our back (s3rver keeps each object as files named after its key).
    const bucketDir = join(s3.dir, s3.bucket, 'pool', 'inputs');
    const gone = await readdir(bucketDir);
    expect(gone.length).toBeGreaterThanOrEqual(PHOTOS);
    for (const f of gone) rmSync(join(bucketDir, f));
    const run = await cli(['run', 'again.yaml', '--yes', '--state', 'pool.db'], {
      cwd: dir,
      env: env('pool'),
    });
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout.match(/^ {2}Upload \d+\/10: .* uploaded$/gm)).toHaveLength(PHOTOS);
    expect(proxy.puts).toBe(PHOTOS);
    // And with the objects there, a third manifest uploads nothing: the database and the bucket agree.
    proxy.reset();
    await writeFile(
      join(dir, 'third.yaml'),
      readFileSync(join(dir, 'again.yaml'), 'utf8').replace('name: again', 'name: third'),
    );
    const third = await cli(['run', 'third.yaml', '--yes', '--state', 'pool.db'], {
      cwd: dir,
      env: env('pool'),
    });
    expect(third.code, third.stderr).toBe(0);
    expect(third.stdout.match(/already in the bucket \(uploaded by an earlier run\)$/gm)).toHaveLength(
      PHOTOS,
    );
    expect(proxy.puts).toBe(0);
  });
});
