// Local inputs and a bucket output through the library: `run()` (and the scheduler, which shares runUnattended) uploads local
// inputs and puts the results in the bucket, like the CLI; without a bucket, local inputs are refused.
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run, startSandbox } from '../../src/index.js';
import { makeWav } from '../../src/media/synth.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { createStorage } from '../../src/storage/index.js';
import { startS3, type TestS3 } from '../helpers/s3.js';

let s3: TestS3;
let sandbox: Sandbox;
let dir: string;
let restore: () => void;
beforeAll(async () => {
  s3 = await startS3();
  restore = s3.useCredentials();
  sandbox = await startSandbox({ port: 0, speed: 0 });
  dir = await mkdtemp(join(tmpdir(), 'mb-lib-bucket-'));
  await writeFile(join(dir, 'voice.wav'), makeWav(4));
  await writeFile(
    join(dir, 'm.yaml'),
    `version: 1\nname: lib\noutput: storage\ntasks:\n  - id: cover\n    model: voice-cover\n    input: { audio_url: "${sandbox.baseUrl}/_sandbox/media/song.mp3", reference_audio_url: "file:voice.wav" }\n`,
  );
});
afterAll(async () => {
  restore();
  await sandbox.close();
  await s3.close();
  await rm(dir, { recursive: true, force: true });
});

describe('run() with a bucket', () => {
  it('uploads the local input, runs, and puts the result and the report in the bucket', async () => {
    const outcome = await run('m.yaml', {
      cwd: dir,
      baseUrl: sandbox.baseUrl,
      apiKey: 'sandbox-key',
      stateFile: 'state.db',
      timeScale: 0.01,
      storage: s3.config('mb'),
    });
    expect(outcome.kind).toBe('ran');
    expect(outcome.exitCode).toBe(0);
    expect(existsSync(join(dir, 'out'))).toBe(false);
    const storage = createStorage(s3.config('mb'));
    try {
      expect(await storage.size('mb/lib/cover/1.mp3')).toBeGreaterThan(0);
      expect(await storage.size('mb/lib/report.json')).toBeGreaterThan(0);
    } finally {
      storage.destroy();
    }
  });

  it('refuses local inputs and output: storage without a bucket, naming what to set', async () => {
    await expect(
      run('m.yaml', { cwd: dir, baseUrl: sandbox.baseUrl, apiKey: 'sandbox-key', stateFile: 'other.db' }),
    ).rejects.toThrow(/output: storage puts the results in the bucket of storage:/);
  });
});
