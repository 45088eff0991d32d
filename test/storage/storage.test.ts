// The storage module against a real S3 server on loopback (s3rver): PUT/GET, put-if-absent, presigned
// links (working and expired), multipart with checksum, abandoned multipart uploads, and the one-line
// errors for wrong credentials, a missing bucket and an unreachable endpoint.
import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { Readable } from 'node:stream';
import { CreateMultipartUploadCommand, S3Client, UploadPartCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/exit-codes.js';
import { createStorage, StorageError } from '../../src/storage/index.js';
import { S3_KEY_ID, S3_SECRET, startS3, type TestS3 } from '../helpers/s3.js';

let s3: TestS3;
let restore: () => void;

beforeAll(async () => {
  s3 = await startS3();
  restore = s3.useCredentials();
});
afterAll(async () => {
  restore();
  await s3.close();
});

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('storage against s3rver', () => {
  it('puts a file once by its SHA-256 and serves it through a presigned GET link', async () => {
    const storage = createStorage(s3.config('p1'));
    await storage.check();
    const body = Buffer.from('a face, honestly');
    const key = storage.inputKey(sha(body), '.jpg');
    expect(key).toBe(`p1/inputs/${sha(body)}.jpg`);
    const first = await storage.putIfAbsent(key, () => body, body.length, 'image/jpeg');
    const second = await storage.putIfAbsent(key, () => body, body.length, 'image/jpeg');
    expect([first.uploaded, second.uploaded]).toEqual([true, false]);
    const link = await storage.link(key);
    expect(link).toContain('X-Amz-Expires=3600');
    expect(link).not.toContain(S3_SECRET + '/');
    const res = await fetch(link);
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(body);
    storage.destroy();
  });

  it('a link signed longer ago than link_ttl no longer works; a fresh one does', async () => {
    const storage = createStorage(s3.config('p2', { linkTtlSeconds: 60 }), {
      now: () => new Date(Date.now() - 120_000),
    });
    const body = Buffer.from('voice sample');
    const key = storage.inputKey(sha(body), '.wav');
    await storage.putIfAbsent(key, () => body, body.length);
    expect((await fetch(await storage.link(key))).status).toBe(403);
    const fresh = createStorage(s3.config('p2', { linkTtlSeconds: 60 }));
    expect((await fetch(await fresh.link(key))).status).toBe(200);
    storage.destroy();
    fresh.destroy();
  });

  it('public_base gives plain links below the prefix, with no signature', async () => {
    const storage = createStorage(s3.config('p3', { publicBase: 'https://media.example.org/mb' }));
    expect(await storage.link('p3/inputs/abc.jpg')).toBe('https://media.example.org/mb/inputs/abc.jpg');
    storage.destroy();
  });

  it('streams a large result in multipart and reports its size and SHA-256', async () => {
    const storage = createStorage(s3.config('p4'), { partSize: 5 * 1024 * 1024 });
    const body = randomBytes(11 * 1024 * 1024 + 123);
    const out = await storage.putStream(
      'p4/r1/t1/out.mp4',
      Readable.from([body.subarray(0, 7e6), body.subarray(7e6)]),
      {
        expectedBytes: body.length,
      },
    );
    expect(out).toEqual({ key: 'p4/r1/t1/out.mp4', bytes: body.length, sha256: sha(body) });
    expect(sha(await storage.getBytes('p4/r1/t1/out.mp4'))).toBe(sha(body));
    expect(await storage.listIncomplete('p4/')).toEqual([]);
    storage.destroy();
  });

  it('a multipart upload a killed run left unfinished is no object: the result reads as absent', async () => {
    const storage = createStorage(s3.config('p5'));
    const raw = new S3Client({
      region: 'us-east-1',
      endpoint: s3.endpoint,
      forcePathStyle: true,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    const started = await raw.send(
      new CreateMultipartUploadCommand({ Bucket: s3.bucket, Key: 'p5/r1/t1/out.mp4' }),
    );
    await raw.send(
      new UploadPartCommand({
        Bucket: s3.bucket,
        Key: 'p5/r1/t1/out.mp4',
        UploadId: started.UploadId,
        PartNumber: 1,
        Body: randomBytes(5 * 1024 * 1024),
      }),
    );
    // s3rver cannot list multipart uploads (real S3, R2 and MinIO can): the list is empty rather than
    // an error, and the unfinished upload is not an object, so a resumed run sees the result as absent.
    const left = await storage.listIncomplete('p5/');
    for (const u of left) await storage.abort(u);
    expect(await storage.listIncomplete('p5/')).toEqual([]);
    expect(await storage.size('p5/r1/t1/out.mp4')).toBeUndefined();
    raw.destroy();
    storage.destroy();
  });

  it('wrong credentials: one line, exit 5, the secret nowhere in it', async () => {
    const sentinel = 'SENTINEL-secret-4f9a2b';
    const back = s3.useCredentials('WRONGKEY', sentinel);
    try {
      const storage = createStorage(s3.config('p6'));
      const error = await storage.check().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StorageError);
      const e = error as StorageError;
      expect(e.exitCode).toBe(EXIT.unauthorized);
      expect(e.message).toMatch(
        /^storage credentials refused by http:\/\/127\.0\.0\.1:\d+ for bucket mediabatch-test \(HTTP 403\); set AWS_ACCESS_KEY_ID/,
      );
      expect(e.message).not.toContain('\n');
      expect(JSON.stringify(e) + String(e.stack)).not.toContain(sentinel);
      const put = await storage.putIfAbsent('p6/x', () => Buffer.from('x'), 1).catch((x: unknown) => x);
      expect((put as StorageError).exitCode).toBe(EXIT.unauthorized);
      storage.destroy();
    } finally {
      back();
      s3.useCredentials(S3_KEY_ID, S3_SECRET);
    }
  });

  it('a bucket that does not exist: one line, exit 1, from check and from a put', async () => {
    const storage = createStorage({ ...s3.config('p7'), bucket: 'no-such-bucket' });
    const error = (await storage.check().catch((e: unknown) => e)) as StorageError;
    expect(error.message).toMatch(
      /^bucket no-such-bucket does not exist at http:\/\/127\.0\.0\.1:\d+; create it or fix storage\.url$/,
    );
    expect(error.exitCode).toBe(EXIT.invalid);
    const put = (await storage
      .putIfAbsent('p7/x', () => Buffer.from('x'), 1)
      .catch((e: unknown) => e)) as StorageError;
    expect(put.message).toMatch(/^bucket no-such-bucket does not exist/);
    storage.destroy();
  });

  it('an unreachable endpoint: one line naming it, exit 1', async () => {
    const port = await new Promise<number>((resolve) => {
      const srv = createServer();
      srv.listen(0, '127.0.0.1', () => {
        const p = (srv.address() as { port: number }).port;
        srv.close(() => resolve(p));
      });
    });
    const storage = createStorage({ ...s3.config('p8'), endpoint: `http://127.0.0.1:${port}` });
    const error = (await storage.check().catch((e: unknown) => e)) as StorageError;
    expect(error.message).toBe(
      `cannot reach the storage endpoint http://127.0.0.1:${port} (ECONNREFUSED); check storage.endpoint and your network`,
    );
    expect(error.exitCode).toBe(EXIT.invalid);
    storage.destroy();
  });
});
