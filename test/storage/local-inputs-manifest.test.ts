// manifests/local-inputs.yaml end to end: validates, runs against the embedded sandbox and s3rver
// (each local file uploaded once, the API given working links), and a second run uploads nothing.
import { existsSync } from 'node:fs';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStorage } from '../../src/storage/index.js';
import { cli } from '../helpers/cli.js';
import { S3_KEY_ID, S3_SECRET, startS3, type TestS3 } from '../helpers/s3.js';

let s3: TestS3;
let dir: string;
beforeAll(async () => {
  s3 = await startS3();
  dir = await mkdtemp(join(tmpdir(), 'mb-local-manifest-'));
  await cp('manifests/local-inputs.yaml', join(dir, 'local-inputs.yaml'));
  await cp('manifests/local', join(dir, 'local'), { recursive: true });
});
afterAll(async () => {
  await s3.close();
  await rm(dir, { recursive: true, force: true });
});

describe('manifests/local-inputs.yaml', () => {
  it('validates without storage', async () => {
    const run = await cli(['validate', 'local-inputs.yaml'], { cwd: dir });
    expect(run.code, run.stdout + run.stderr).toBe(0);
  });

  it('runs end to end: four local files uploaded once, all tasks done; a second run uploads nothing', async () => {
    const env = {
      MEDIABATCH_STORAGE_URL: `s3://${s3.bucket}/mb`,
      MEDIABATCH_STORAGE_ENDPOINT: s3.endpoint,
      AWS_ACCESS_KEY_ID: S3_KEY_ID,
      AWS_SECRET_ACCESS_KEY: S3_SECRET,
    };
    const args = ['run', 'local-inputs.yaml', '--sandbox', '--sandbox-speed', '0', '--yes'];
    const first = await cli([...args, '--state', 'a.db'], { cwd: dir, env });
    expect(first.code, first.stdout + first.stderr).toBe(0);
    expect(first.stdout.match(/^ {2}Upload \d\/4: .* uploaded$/gm)).toHaveLength(4);
    expect(first.stdout).toMatch(/4 done/);
    // The results and the reports are in the bucket, under <prefix>/<run>/; nothing in a local folder.
    expect(existsSync(join(dir, 'out'))).toBe(false);
    const storage = createStorage(s3.config('mb'), { env });
    try {
      for (const key of [
        'swap-ana/1.mp4',
        'swap-ben/1.mp4',
        'mascot-dance/1.mp4',
        'jingle-narrator/1.wav',
        'report.md',
        'index.html',
      ]) {
        expect(await storage.size(`mb/local-inputs/${key}`), key).toBeGreaterThan(0);
      }
    } finally {
      storage.destroy();
    }
    const second = await cli([...args, '--state', 'b.db', '--run-id', 'again'], { cwd: dir, env });
    expect(second.code, second.stdout + second.stderr).toBe(0);
    expect(second.stdout.match(/already in the bucket$/gm)).toHaveLength(4);
  });
});
