// A real S3-speaking server on loopback (s3rver) for tests: port 0, a temp folder, one bucket, and the
// credentials s3rver accepts (S3RVER/S3RVER) put into the standard AWS environment variables, which is
// where the storage module's default credential chain reads them.
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// @ts-expect-error s3rver ships no types
import S3rver from 's3rver';
import type { StorageConfig } from '../../src/storage/config.js';

export const S3_KEY_ID = 'S3RVER';
export const S3_SECRET = 'S3RVER';

export interface TestS3 {
  endpoint: string;
  bucket: string;
  dir: string;
  /** A storage config for this server, with the given prefix. */
  config(prefix?: string, extra?: Partial<StorageConfig>): StorageConfig;
  /**
   * Makes s3rver accept another key pair (besides S3RVER/S3RVER), so a test can run with a sentinel
   * secret and look for it everywhere afterwards. s3rver keeps its accounts in one process-wide registry.
   */
  addCredentials(id: string, secret: string): void;
  /** Sets AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY for the default chain; returns a restore function. */
  useCredentials(id?: string, secret?: string): () => void;
  close(): Promise<void>;
}

export async function startS3(bucket = 'mediabatch-test'): Promise<TestS3> {
  const dir = await mkdtemp(join(tmpdir(), 'mb-s3-'));
  // biome-ignore lint/suspicious/noExplicitAny: s3rver is untyped JavaScript
  const server: any = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: dir,
    configureBuckets: [{ name: bucket }],
  });
  const address = (await server.run()) as AddressInfo;
  const endpoint = `http://127.0.0.1:${address.port}`;
  return {
    endpoint,
    bucket,
    dir,
    config: (prefix = 'mb', extra = {}) => ({
      bucket,
      prefix,
      endpoint,
      region: 'us-east-1',
      linkTtlSeconds: 3600,
      ...extra,
    }),
    addCredentials(id, secret) {
      // biome-ignore lint/suspicious/noExplicitAny: s3rver's account model is untyped JavaScript
      const account: any = createRequire(import.meta.url)('s3rver/lib/models/account.js');
      account.DUMMY_ACCOUNT.createKeyPair(id, secret);
    },
    useCredentials(id = S3_KEY_ID, secret = S3_SECRET) {
      const saved = {
        AWS_ACCESS_KEY_ID: process.env['AWS_ACCESS_KEY_ID'],
        AWS_SECRET_ACCESS_KEY: process.env['AWS_SECRET_ACCESS_KEY'],
        AWS_PROFILE: process.env['AWS_PROFILE'],
      };
      process.env['AWS_ACCESS_KEY_ID'] = id;
      process.env['AWS_SECRET_ACCESS_KEY'] = secret;
      delete process.env['AWS_PROFILE'];
      return () => {
        for (const [k, v] of Object.entries(saved)) {
          if (v === undefined) delete process.env[k];
          else process.env[k] = v;
        }
      };
    },
    async close() {
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
