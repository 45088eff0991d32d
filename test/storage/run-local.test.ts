// `run` with local inputs over real HTTP: refused without storage before any POST (the embedded sandbox of
// `--sandbox` keeps them itself); with
// s3rver, each file uploaded once, the sandbox fetches the presigned links, and a second run uploads nothing.

import { readFileSync } from 'node:fs';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeWav } from '../../src/media/synth.js';
import { startSandbox } from '../../src/sandbox/server.js';
import { cli } from '../helpers/cli.js';
import { S3_KEY_ID, S3_SECRET, startS3, type TestS3 } from '../helpers/s3.js';

let s3: TestS3;
let dir: string;
beforeAll(async () => {
  s3 = await startS3();
  dir = await mkdtemp(join(tmpdir(), 'mb-run-local-'));
  await writeFile(join(dir, 'song.wav'), makeWav(6));
  await writeFile(join(dir, 'voice.wav'), makeWav(3));
  for (const name of ['a', 'b', 'c', 'd', 'e', 'f']) {
    await writeFile(
      join(dir, `${name}.yaml`),
      `version: 1\nname: local-${name}\ntasks:\n  - id: cover\n    model: voice-cover\n    input: { audio_url: "file:song.wav", reference_audio_url: "file:voice.wav" }\n`,
    );
  }
});
afterAll(async () => {
  await s3.close();
  await rm(dir, { recursive: true, force: true });
});

describe('run with local inputs', () => {
  it('without storage, against a service (not the embedded sandbox): one line saying how to configure it, exit 1, nothing sent', async () => {
    // A sandbox of its own stands for the real service: it cannot be handed files, as --sandbox's can.
    const service = await startSandbox({ port: 0, speed: 0, apiKey: 'service-key-0123' });
    try {
      const env = { MEDIABATCH_API_KEY: 'service-key-0123', MEDIABATCH_BASE_URL: service.baseUrl };
      const run = await cli(['run', 'a.yaml', '--yes', '--state', 'a.db'], { cwd: dir, env });
      expect(run.stderr).toContain(
        'this manifest has local file: inputs and run must upload them: add storage: { url: s3://bucket/prefix } to mediabatch.config.yaml',
      );
      expect(run.code).toBe(1);
      expect(run.stdout).not.toContain('Charged');
      expect(service.state().jobs).toHaveLength(0);
    } finally {
      await service.close();
    }
  });

  it('without storage, with --sandbox: the embedded sandbox keeps the files and the run says so', async () => {
    const run = await cli(
      ['run', 'f.yaml', '--sandbox', '--sandbox-speed', '0', '--yes', '--state', 'f.db'],
      {
        cwd: dir,
        env: { MEDIABATCH_POLL_SCALE: '0.01' },
      },
    );
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
    expect(run.stdout).toContain(
      'Local inputs: kept by the embedded sandbox and linked from it (a run on the real service uploads them to the bucket of storage: in mediabatch.config.yaml)',
    );
    expect(run.stdout).toContain('Charged 0.12 tokens');
  });

  it('wrong credentials: one line, exit 5, nothing charged, the secret nowhere', async () => {
    const sentinel = 'SENTINEL-run-secret-93ab';
    const env = {
      MEDIABATCH_STORAGE_URL: `s3://${s3.bucket}/mb`,
      MEDIABATCH_STORAGE_ENDPOINT: s3.endpoint,
      AWS_ACCESS_KEY_ID: 'WRONGKEY',
      AWS_SECRET_ACCESS_KEY: sentinel,
    };
    const run = await cli(['run', 'd.yaml', '--sandbox', '--yes', '--state', 'w.db'], { cwd: dir, env });
    expect(run.stderr).toMatch(
      /storage credentials refused by http:\/\/127\.0\.0\.1:\d+ for bucket mediabatch-test \(HTTP 403\)/,
    );
    expect(run.code).toBe(5);
    expect(run.stdout).not.toContain('Charged');
    expect(run.stdout + run.stderr).not.toContain(sentinel);
    expect(readFileSync(join(dir, 'w.db')).includes(sentinel)).toBe(false);
  });

  it('with storage: uploads each file once, the sandbox gets working links; a second run uploads nothing', async () => {
    const env = {
      MEDIABATCH_STORAGE_URL: `s3://${s3.bucket}/mb`,
      MEDIABATCH_STORAGE_ENDPOINT: s3.endpoint,
      AWS_ACCESS_KEY_ID: S3_KEY_ID,
      AWS_SECRET_ACCESS_KEY: S3_SECRET,
    };
    const first = await cli(
      ['run', 'b.yaml', '--sandbox', '--sandbox-speed', '0', '--yes', '--state', 'b.db'],
      { cwd: dir, env },
    );
    expect(first.stdout + first.stderr).toMatch(/Upload 2\/2: .* uploaded/);
    expect(first.code, first.stdout + first.stderr).toBe(0);
    const second = await cli(
      ['run', 'c.yaml', '--sandbox', '--sandbox-speed', '0', '--yes', '--state', 'c.db'],
      { cwd: dir, env },
    );
    expect(second.stdout).not.toMatch(/ uploaded$/m);
    expect(second.stdout).toContain('already in the bucket');
    expect(second.code, second.stderr).toBe(0);
    // With the first run's state file, another manifest's run does not even ask the bucket: it is recorded.
    const third = await cli(
      ['run', 'e.yaml', '--sandbox', '--sandbox-speed', '0', '--yes', '--state', 'b.db'],
      { cwd: dir, env },
    );
    expect(third.code, third.stderr).toBe(0);
    expect(third.stdout).toMatch(/Upload 2\/2: .* already in the bucket \(uploaded by an earlier run\)/);
    const uploads = new Database(join(dir, 'b.db'), { readonly: true })
      .prepare('SELECT key, bytes FROM uploads')
      .all() as Array<{ key: string; bytes: number }>;
    expect(uploads).toHaveLength(2);
    for (const row of uploads) expect(row.key).toMatch(/^mb\/inputs\/[0-9a-f]{64}\.\w+$/);
  });

  it('a resumed run signs its links anew: links that expired between runs are never sent', async () => {
    await writeFile(
      join(dir, 'two.yaml'),
      `version: 1\nname: two\ntasks:\n  - id: "cover-{{index}}"\n    model: voice-cover\n    repeat: 2\n    input: { audio_url: "file:song.wav", reference_audio_url: "file:voice.wav", pitch_shift: "{{index}}" }\n`,
    );
    // Links live 2 s; the sandbox fetches them at submission (s3rver refuses an expired one with 403).
    const env = {
      MEDIABATCH_STORAGE_URL: `s3://${s3.bucket}/mb`,
      MEDIABATCH_STORAGE_ENDPOINT: s3.endpoint,
      MEDIABATCH_LINK_TTL: '2s',
      AWS_ACCESS_KEY_ID: S3_KEY_ID,
      AWS_SECRET_ACCESS_KEY: S3_SECRET,
    };
    const args = ['run', 'two.yaml', '--sandbox', '--sandbox-speed', '0', '--yes', '--state', 'two.db'];
    const first = await cli([...args, '--only', 'cover-1'], { cwd: dir, env });
    expect(first.code, first.stderr).toBe(4);
    await new Promise((r) => setTimeout(r, 2_500));
    const second = await cli(args, { cwd: dir, env });
    expect(second.code, second.stderr).toBe(0);
    const rows = new Database(join(dir, 'two.db'), { readonly: true })
      .prepare("SELECT task_id, state, body FROM tasks WHERE run_id = 'two' ORDER BY seq")
      .all() as Array<{ task_id: string; state: string; body: string }>;
    expect(rows.map((r) => [r.task_id, r.state])).toEqual([
      ['cover-1', 'done'],
      ['cover-2', 'done'],
    ]);
    // What is stored is the file, never a link that would expire.
    for (const row of rows) expect(JSON.parse(row.body).audio_url).toBe('file:song.wav');
  });

  it('a chained task with a local input is priced exactly: the file is measured through its link', async () => {
    await cp(join('test', 'fixtures', 'media', 'av-10s.mp4'), join(dir, 'presenter.mp4'));
    await writeFile(
      join(dir, 'chain.yaml'),
      `version: 1\nname: chain-local\ntasks:\n  - id: voice\n    model: speech-v3\n    input: { text: "Hello from Acme, where every mug is made by hand, slowly, in our workshop." }\n  - id: avatar\n    model: ai-talking-avatar-video\n    after: voice\n    input: { video_url: "file:presenter.mp4", audio_url: "{{after.audio}}", resolution: 540p }\n`,
    );
    const env = {
      MEDIABATCH_STORAGE_URL: `s3://${s3.bucket}/mb`,
      MEDIABATCH_STORAGE_ENDPOINT: s3.endpoint,
      AWS_ACCESS_KEY_ID: S3_KEY_ID,
      AWS_SECRET_ACCESS_KEY: S3_SECRET,
    };
    const run = await cli(
      ['run', 'chain.yaml', '--sandbox', '--sandbox-speed', '0', '--yes', '--state', 'chain.db'],
      {
        cwd: dir,
        env,
      },
    );
    expect(run.code, run.stderr).toBe(0);
    const [avatar] = new Database(join(dir, 'chain.db'), { readonly: true })
      .prepare("SELECT est_min, est_max, est_basis, cost, body FROM tasks WHERE task_id = 'avatar'")
      .all() as Array<{ est_min: number; est_max: number; est_basis: string; cost: number; body: string }>;
    // Normal mode bills the shorter of the local 10 s video and the speech: both measured, so exact.
    expect(avatar?.est_min).toBe(avatar?.est_max);
    expect(avatar?.est_basis).toMatch(/measured/);
    expect(avatar?.cost).toBe(avatar?.est_max);
    expect(JSON.parse(avatar?.body ?? '{}').video_url).toBe('file:presenter.mp4');
  });
});
