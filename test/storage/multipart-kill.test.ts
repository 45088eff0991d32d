// kill -9 in the middle of a multipart result upload, then the same command again: nothing uploaded twice, nothing lost.
// Deterministic, not left to a random moment: a proxy in front of s3rver holds the first part of the first
// multipart upload and the test kills the run right then. s3rver cannot list multipart uploads, so the
// proxy answers ListMultipartUploads itself from the uploads it saw begin and end; everything else goes to
// s3rver (the Host header kept, so signatures hold), except aborts, which s3rver cannot do: the proxy
// answers them as AWS does, or refuses them as s3rver does. Then: the resumed run aborts the cut-off upload
// (or, where the server cannot, goes on without: it is no object), fetches the result again into a new
// one, and the task is done once, charged once by the sandbox's books, its object whole in the bucket with
// the size and SHA-256 the state database recorded.
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox } from '../../src/sandbox/server.js';
import { createStorage } from '../../src/storage/index.js';
import { spawnCli } from '../helpers/child.js';
import { S3_KEY_ID, S3_SECRET, startS3, type TestS3 } from '../helpers/s3.js';

const BALANCE = 1000;
const CLIP_BYTES = 12_000_000; // above the 8 MiB part size: the result goes up in parts

interface MultipartProxy {
  endpoint: string;
  /** Multipart uploads begun and neither completed nor aborted: uploadId -> key. */
  open: Map<string, string>;
  completed: string[];
  aborted: string[];
  /** Called once, when the first part of the first multipart upload arrives (and is held, never sent on). */
  onFirstPart?: () => void;
  /**
   * How AbortMultipartUpload is answered: 204 as AWS, R2 and MinIO do (the upload is then gone), or 405
   * as s3rver itself does (it cannot abort). Either way the request is not sent on.
   */
  abortStatus: 204 | 405;
  close(): Promise<void>;
}

async function body(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function startMultipartProxy(target: string, bucket: string): Promise<MultipartProxy> {
  const to = new URL(target);
  const held: ServerResponse[] = [];
  let partSeen = false;
  const proxy: MultipartProxy = {
    endpoint: '',
    open: new Map(),
    completed: [],
    aborted: [],
    abortStatus: 204,
    close: async () => {
      for (const res of held) res.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const forward = (req: IncomingMessage, payload: Buffer) =>
    new Promise<{ status: number; headers: IncomingMessage['headers']; body: Buffer }>((resolve, reject) => {
      const upstream = request(
        { host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers },
        (answer) => {
          body(answer).then(
            (b) => resolve({ status: answer.statusCode ?? 502, headers: answer.headers, body: b }),
            reject,
          );
        },
      );
      upstream.on('error', reject);
      upstream.end(payload);
    });
  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://proxy');
    const key = decodeURIComponent(url.pathname.slice(`/${bucket}/`.length));
    const uploadId = url.searchParams.get('uploadId');
    if (
      req.method === 'GET' &&
      url.pathname.replace(/\/$/, '') === `/${bucket}` &&
      url.searchParams.has('uploads')
    ) {
      const prefix = url.searchParams.get('prefix') ?? '';
      const uploads = [...proxy.open]
        .filter(([, k]) => k.startsWith(prefix))
        .map(
          ([id, k]) =>
            `<Upload><Key>${k}</Key><UploadId>${id}</UploadId><Initiated>2026-01-01T00:00:00.000Z</Initiated></Upload>`,
        )
        .join('');
      res.writeHead(200, { 'content-type': 'application/xml' });
      res.end(
        `<?xml version="1.0" encoding="UTF-8"?><ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>${bucket}</Bucket><Prefix>${prefix}</Prefix><MaxUploads>1000</MaxUploads><IsTruncated>false</IsTruncated>${uploads}</ListMultipartUploadsResult>`,
      );
      return;
    }
    if (req.method === 'PUT' && uploadId !== null && !partSeen) {
      // The first part: held, never forwarded; the run is killed while it waits for the answer.
      partSeen = true;
      // The run that sent it is killed: its connection resets, which is expected here.
      req.on('error', () => undefined);
      req.resume();
      held.push(res);
      proxy.onFirstPart?.();
      return;
    }
    if (req.method === 'DELETE' && uploadId !== null) {
      req.resume();
      if (proxy.abortStatus === 204) {
        proxy.open.delete(uploadId);
        proxy.aborted.push(uploadId);
        res.writeHead(204);
        res.end();
      } else {
        res.writeHead(405, { 'content-type': 'application/xml' });
        res.end('<?xml version="1.0"?><Error><Code>MethodNotAllowed</Code><Message>no</Message></Error>');
      }
      return;
    }
    let answer: Awaited<ReturnType<typeof forward>>;
    try {
      answer = await forward(req, await body(req));
    } catch {
      // The killed run's other requests (a second part under way) end with its connection.
      res.destroy();
      return;
    }
    if (answer.status < 300) {
      if (req.method === 'POST' && url.searchParams.has('uploads')) {
        const id = /<UploadId>([^<]+)<\/UploadId>/.exec(answer.body.toString('utf8'))?.[1];
        if (id) proxy.open.set(id, key);
      } else if (req.method === 'POST' && uploadId !== null) {
        proxy.open.delete(uploadId);
        proxy.completed.push(uploadId);
      }
    }
    res.writeHead(answer.status, answer.headers);
    res.end(answer.body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  proxy.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return proxy;
}

let s3: TestS3;
let dir: string;
const closers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  s3 = await startS3();
  dir = await mkdtemp(join(tmpdir(), 'mb-multipart-kill-'));
});
afterAll(async () => {
  for (const close of closers) await close();
  await s3.close();
  await rm(dir, { recursive: true, force: true });
});

describe('kill -9 during a multipart result upload', () => {
  it.each([
    { server: 'that aborts (AWS, R2, MinIO)', abortStatus: 204 as const },
    { server: 'that cannot abort (s3rver)', abortStatus: 405 as const },
  ])(
    'a server $server: the resumed run uploads the result whole; nothing is charged twice',
    async ({ abortStatus }) => {
      const proxy = await startMultipartProxy(s3.endpoint, s3.bucket);
      proxy.abortStatus = abortStatus;
      const sandbox = await startSandbox({
        port: 0,
        speed: 0,
        seed: 18,
        apiKey: 'sandbox-key',
        balance: BALANCE,
        videoPaddingBytes: CLIP_BYTES,
      });
      closers.push(proxy.close, sandbox.close);
      const run = `clip-${abortStatus}`;
      await writeFile(
        join(dir, `${run}.yaml`),
        `version: 1\nname: ${run}\noutput: s3://${s3.bucket}/out\ntasks:\n  - id: clip\n    model: studio-2-6\n    input: { prompt: "a mug turning slowly", duration: 5, resolution: 720p }\n`,
      );
      const env = {
        MEDIABATCH_API_KEY: 'sandbox-key',
        MEDIABATCH_BASE_URL: sandbox.baseUrl,
        MEDIABATCH_POLL_SCALE: '0.01',
        // An s3:// output takes the endpoint (and region) of storage:, here from the environment.
        MEDIABATCH_STORAGE_URL: `s3://${s3.bucket}/inputs-unused`,
        MEDIABATCH_STORAGE_ENDPOINT: proxy.endpoint,
        AWS_ACCESS_KEY_ID: S3_KEY_ID,
        AWS_SECRET_ACCESS_KEY: S3_SECRET,
      };
      const args = ['--state', `${run}.db`, 'run', `${run}.yaml`, '--yes'];
      const killed = spawnCli(args, { cwd: dir, env });
      proxy.onFirstPart = () => killed.proc.kill('SIGKILL');
      expect(await killed.exited, killed.stderr()).toBe('SIGKILL');
      // Killed with a multipart upload begun under the run's prefix and not finished.
      const key = `out/${run}/clip/1.mp4`;
      const [cut, ...more] = [...proxy.open.keys()];
      expect(more).toEqual([]);
      expect(proxy.open.get(cut ?? '')).toBe(key);
      const stateOf = () =>
        new Database(join(dir, `${run}.db`), { readonly: true })
          .prepare("SELECT state FROM tasks WHERE task_id = 'clip'")
          .pluck()
          .get();
      expect(stateOf()).not.toBe('done');

      const resumed = spawnCli(args, { cwd: dir, env });
      expect(await resumed.exited, resumed.stdout() + resumed.stderr()).toBe(0);
      expect(resumed.stderr()).toBe('');
      expect(proxy.completed).toHaveLength(1);
      if (abortStatus === 204) {
        expect(proxy.aborted).toEqual([cut]);
        expect(proxy.open.size).toBe(0);
      } else {
        // Left as it was, and harmless: never an object, so never read as the result.
        expect([...proxy.open.keys()]).toEqual([cut]);
      }

      const state = sandbox.state();
      expect(state.jobs).toHaveLength(1);
      expect(state.balance).toBeCloseTo(BALANCE - (state.jobs[0]?.cost ?? 0), 6);
      const db = new Database(join(dir, `${run}.db`), { readonly: true });
      const task = db.prepare("SELECT state, cost FROM tasks WHERE task_id = 'clip'").get();
      const file = db.prepare("SELECT path, bytes, sha256 FROM files WHERE task_id = 'clip'").get() as {
        path: string;
        bytes: number;
        sha256: string;
      };
      db.close();
      expect(task).toEqual({ state: 'done', cost: state.jobs[0]?.cost });
      expect(file.path).toBe(`s3://${s3.bucket}/${key}`);
      expect(file.bytes).toBeGreaterThan(CLIP_BYTES);
      const storage = createStorage(s3.config('out'), { env });
      try {
        const stored = await storage.getBytes(key);
        expect(stored.length).toBe(file.bytes);
        expect(createHash('sha256').update(stored).digest('hex')).toBe(file.sha256);
        expect(await storage.size(`out/${run}/clip/job.json`)).toBeGreaterThan(0);
      } finally {
        storage.destroy();
      }
    },
    30_000,
  );
});
