// The pieces of a bucket output that a loopback S3 server cannot show. s3rver does not list
// multipart uploads, so the abort of a killed run's unfinished uploads is shown with a scripted bucket.
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ObjectPutError } from '../../src/api/download.js';
import { displayPath } from '../../src/cli/format.js';
import { EXIT } from '../../src/exit-codes.js';
import { abortUnfinishedUploads, bucketPut, objectUrl } from '../../src/results/bucket.js';
import { resolveOutput, runLocation } from '../../src/results/output.js';
import { type Storage, StorageError } from '../../src/storage/index.js';

function scripted(over: Partial<Storage>): Storage {
  return { config: { bucket: 'b', prefix: 'p', region: 'auto', linkTtlSeconds: 60 }, ...over } as Storage;
}

describe('a bucket output', () => {
  it('aborts every unfinished multipart upload under the run, and only there', async () => {
    const aborted: string[] = [];
    let listed = '';
    const storage = scripted({
      listIncomplete: async (prefix) => {
        listed = prefix;
        return [
          { key: 'p/run/a/1.mp4', uploadId: 'u1' },
          { key: 'p/run/b/1.mp4', uploadId: 'u2' },
        ];
      },
      abort: async (u) => {
        aborted.push(u.uploadId);
        // The server could not abort the second one: counted apart, not an error.
        return u.uploadId !== 'u2';
      },
    });
    expect(await abortUnfinishedUploads({ storage, runKey: 'p/run' })).toEqual({ aborted: 1, left: 1 });
    expect(listed).toBe('p/run/');
    expect(aborted).toEqual(['u1', 'u2']);
  });

  it('reports the bucket’s trouble as ours, not the result link’s', async () => {
    const storage = scripted({
      putStream: async () => {
        throw new StorageError('storage refused the credentials', EXIT.unauthorized);
      },
    });
    const put = bucketPut({ storage, runKey: 'p/run' });
    await expect(put('p/run/a/1.png', Readable.from([Buffer.from('x')]), {})).rejects.toBeInstanceOf(
      ObjectPutError,
    );
    expect(objectUrl({ storage, runKey: 'p/run' }, 'p/run/a/1.png')).toBe('s3://b/p/run/a/1.png');
  });

  it('names the run’s folder in a bucket, and makes output: storage the account’s bucket', () => {
    expect(runLocation('s3://b/out/', 'nightly')).toBe('s3://b/out/nightly');
    expect(runLocation('/srv/out', 'nightly')).toBe('/srv/out/nightly');
    const account = {
      bucket: 'acct',
      prefix: 'mb',
      region: 'auto',
      linkTtlSeconds: 60,
      endpoint: 'https://r2.example',
    };
    expect(resolveOutput('storage', account, {})).toEqual({ output: 's3://acct/mb', bucket: account });
    expect(resolveOutput('s3://other/res', account, {}).bucket).toEqual({
      ...account,
      bucket: 'other',
      prefix: 'res',
    });
    expect(resolveOutput('/srv/out', account, {})).toEqual({ output: '/srv/out' });
    expect(() => resolveOutput('storage', undefined, {})).toThrow(
      /output: storage puts the results in the bucket of storage:/,
    );
    // No storage: url, but the endpoint and region in the environment (MinIO, R2): used, not AWS.
    const minio = { MEDIABATCH_STORAGE_ENDPOINT: 'http://minio.local:9000', MEDIABATCH_STORAGE_REGION: 'eu' };
    expect(resolveOutput('s3://res/x', undefined, minio).bucket).toEqual({
      bucket: 'res',
      prefix: 'x',
      region: 'eu',
      endpoint: 'http://minio.local:9000',
      linkTtlSeconds: 86400,
    });
    expect(resolveOutput('s3://res/x', undefined, { AWS_REGION: 'us-west-2' }).bucket).toEqual({
      bucket: 'res',
      prefix: 'x',
      region: 'us-west-2',
      linkTtlSeconds: 86400,
    });
    expect(() =>
      resolveOutput('s3://res/x', undefined, { MEDIABATCH_STORAGE_ENDPOINT: 'minio.local:9000' }),
    ).toThrow('MEDIABATCH_STORAGE_ENDPOINT must be an http or https URL, got "minio.local:9000"');
  });
});

describe('where a bucket run is shown', () => {
  // In a real terminal the working folder is the process's: relative() would make `s3://b/p` into
  // `s3:/b/p`. In-process CLI tests run elsewhere than the process's folder and never saw it.
  // run, status and report share this one function (src/cli/format.ts).
  it('prints s3://bucket/prefix/run as it is, from the process folder too', () => {
    expect(displayPath(process.cwd(), 's3://b/p/run-1')).toBe('s3://b/p/run-1');
    expect(displayPath(process.cwd(), 's3://b/p/run-1/report.md')).toBe('s3://b/p/run-1/report.md');
    expect(displayPath(process.cwd(), `${process.cwd()}/out/run-1`)).toBe('out/run-1');
  });
});
