// The `storage:` section and its environment overrides, as `loadConfig` reads them.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { scrub } from '../../src/util/secrets.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function load(yaml: string | undefined, env: NodeJS.ProcessEnv = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'mb-cfg-'));
  dirs.push(dir);
  if (yaml !== undefined) await writeFile(join(dir, 'mediabatch.config.yaml'), yaml);
  return loadConfig({ cwd: dir, env });
}

describe('storage config', () => {
  it('reads bucket, prefix, endpoint, region, link_ttl and public_base', async () => {
    const config = await load(
      'storage:\n  url: s3://my-bucket/mediabatch/\n  endpoint: https://acc.r2.cloudflarestorage.com\n  region: auto\n  link_ttl: 36h\n  public_base: https://media.example.org/mb/\n',
    );
    expect(config.storage).toEqual({
      bucket: 'my-bucket',
      prefix: 'mediabatch',
      endpoint: 'https://acc.r2.cloudflarestorage.com',
      region: 'auto',
      linkTtlSeconds: 36 * 3600,
      publicBase: 'https://media.example.org/mb',
    });
  });

  it('is absent without a url; the environment configures or overrides it', async () => {
    expect((await load(undefined)).storage).toBeUndefined();
    const config = await load('storage:\n  url: s3://a/b\n', {
      MEDIABATCH_STORAGE_URL: 's3://other',
      MEDIABATCH_STORAGE_ENDPOINT: 'http://127.0.0.1:9000',
      AWS_REGION: 'eu-west-1',
    });
    expect(config.storage).toEqual({
      bucket: 'other',
      prefix: '',
      endpoint: 'http://127.0.0.1:9000',
      region: 'eu-west-1',
      linkTtlSeconds: 24 * 3600,
    });
  });

  it('a bad link_ttl or url is one line naming the file', async () => {
    const ttl = await load('storage:\n  url: s3://a\n  link_ttl: forever\n').catch((e: unknown) => e);
    expect(ttl).toBeInstanceOf(ConfigError);
    expect((ttl as Error).message).toBe(
      'mediabatch.config.yaml: storage link_ttl must be a duration such as 30m, 24h or 7d (at most 7d), got "forever"',
    );
    const tooLong = await load('storage:\n  url: s3://a\n  link_ttl: 8d\n').catch((e: unknown) => e);
    expect((tooLong as Error).message).toMatch(/at most 7d\), got "8d"$/);
    const url = (await load('storage:\n  url: https://a\n').catch((e: unknown) => e)) as ConfigError;
    expect(url.details).toEqual([
      'mediabatch.config.yaml:2:8  storage.url: must be s3://bucket or s3://bucket/prefix, got "https://a"',
    ]);
    const key = (await load('storage:\n  url: s3://a\n  acl: public\n').catch(
      (e: unknown) => e,
    )) as ConfigError;
    expect(key.details).toEqual([
      'mediabatch.config.yaml:3:3  storage.acl: unknown key; known keys are: url, endpoint, region, link_ttl, public_base',
    ]);
  });

  it('the AWS secret key is scrubbed from any text', async () => {
    await load(undefined, { AWS_SECRET_ACCESS_KEY: 'SENTINEL-aws-secret-77' });
    expect(scrub('oops SENTINEL-aws-secret-77 leaked')).toBe('oops [redacted] leaked');
  });
});
