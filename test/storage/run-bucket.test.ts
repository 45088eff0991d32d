// Results straight into a bucket. `output: s3://bucket/prefix` (or `output: storage`) puts each
// result file, job.json and the reports under `<prefix>/<run>/<task>/` as on disk, with nothing in a local
// output folder; a second run finds the run complete. Over real HTTP: the sandbox and s3rver on loopback.
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox } from '../../src/sandbox/server.js';
import { createStorage } from '../../src/storage/index.js';
import { cli } from '../helpers/cli.js';
import { S3_KEY_ID, S3_SECRET, startS3, type TestS3 } from '../helpers/s3.js';

let s3: TestS3;
let dir: string;
beforeAll(async () => {
  s3 = await startS3();
  dir = await mkdtemp(join(tmpdir(), 'mb-run-bucket-'));
});
afterAll(async () => {
  await s3.close();
  await rm(dir, { recursive: true, force: true });
});

const env = () => ({
  MEDIABATCH_STORAGE_URL: `s3://${s3.bucket}/mb`,
  MEDIABATCH_STORAGE_ENDPOINT: s3.endpoint,
  AWS_ACCESS_KEY_ID: S3_KEY_ID,
  AWS_SECRET_ACCESS_KEY: S3_SECRET,
});

const manifest = (name: string, output: string) => `version: 1
name: ${name}
output: ${output}
tasks:
  - id: "still-{{index}}"
    model: flat-image
    repeat: 2
    input: { prompt: "a mug {{index}}" }
  - id: hero
    model: oc-maker
    input: { prompt: "a mascot as JSON with name and oc_prompt", image_render_model: render-a }
  - id: line
    model: speech-v3
    input: { text: "Hello from the bucket." }
`;

describe('run with results in a bucket', () => {
  it('puts every result, job.json and the reports under <prefix>/<run>/, nothing on the local disk', async () => {
    await writeFile(join(dir, 'b.yaml'), manifest('to-bucket', `s3://${s3.bucket}/results`));
    const run = await cli(
      ['run', 'b.yaml', '--sandbox', '--sandbox-speed', '0', '--yes', '--state', 'b.db'],
      {
        cwd: dir,
        env: env(),
      },
    );
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`Files: s3://${s3.bucket}/results/to-bucket`);
    expect(run.stdout).toContain(`Report: s3://${s3.bucket}/results/to-bucket/report.md`);
    expect(existsSync(join(dir, 'out'))).toBe(false);
    expect(existsSync(join(dir, 's3:'))).toBe(false);

    const storage = createStorage(s3.config('results'), { env: env() });
    try {
      const files = new Database(join(dir, 'b.db'), { readonly: true })
        .prepare('SELECT task_id, path, bytes, sha256 FROM files ORDER BY task_id, idx')
        .all() as Array<{ task_id: string; path: string; bytes: number; sha256: string }>;
      expect(files.map((f) => f.path)).toEqual([
        `s3://${s3.bucket}/results/to-bucket/hero/1.png`,
        `s3://${s3.bucket}/results/to-bucket/line/1.mp3`,
        `s3://${s3.bucket}/results/to-bucket/still-1/1.png`,
        `s3://${s3.bucket}/results/to-bucket/still-2/1.png`,
      ]);
      for (const f of files) {
        const key = f.path.slice(`s3://${s3.bucket}/`.length);
        expect(await storage.size(key)).toBe(f.bytes);
      }
      for (const key of [
        'hero/job.json',
        'hero/sheet.json',
        'still-1/job.json',
        'report.json',
        'report.csv',
        'report.md',
        'index.html',
      ]) {
        expect(await storage.size(`results/to-bucket/${key}`), key).toBeGreaterThan(0);
      }
      const report = JSON.parse(
        (await storage.getBytes('results/to-bucket/report.json')).toString('utf8'),
      ) as {
        tasks: Array<{ id: string; status: string; files: Array<{ path: string }> }>;
      };
      // Paths relative to the run's folder, as on disk: the gallery works when the prefix is served.
      expect(report.tasks.find((t) => t.id === 'still-1')?.files.map((f) => f.path)).toEqual([
        'still-1/1.png',
      ]);
      expect(report.tasks.every((t) => t.status === 'done')).toBe(true);
      const gallery = (await storage.getBytes('results/to-bucket/index.html')).toString('utf8');
      expect(gallery).toContain('"p":"still-1/1.png"');
      // The oc-maker card shows its character sheet, read from the task's folder in the bucket.
      const sheet = JSON.parse(
        (await storage.getBytes('results/to-bucket/hero/sheet.json')).toString('utf8'),
      ) as { name: string };
      expect(gallery).toContain(`"sh":{"name":${JSON.stringify(sheet.name)}`);
    } finally {
      storage.destroy();
    }

    const again = await cli(
      ['run', 'b.yaml', '--sandbox', '--sandbox-speed', '0', '--yes', '--state', 'b.db'],
      {
        cwd: dir,
        env: env(),
      },
    );
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('is already complete');

    // `mediabatch report` writes the report into the bucket again, and prints it; no local folder.
    const report = await cli(['report', 'to-bucket', '--state', 'b.db'], { cwd: dir, env: env() });
    expect(report.code, report.stderr).toBe(0);
    expect(report.stdout).toContain('# Cost report: run `to-bucket`');
    expect(report.stderr).toContain(`in s3://${s3.bucket}/results/to-bucket`);
    expect(existsSync(join(dir, 's3:'))).toBe(false);
  });

  it('output: storage is the bucket of storage:, and refused without one, before anything is sent', async () => {
    await writeFile(join(dir, 's.yaml'), manifest('to-storage', 'storage'));
    // Against a service (a sandbox of its own, not --sandbox's, which sends such results to out/ instead).
    const service = await startSandbox({ port: 0, speed: 0, apiKey: 'service-key-0123' });
    try {
      const refused = await cli(['run', 's.yaml', '--yes', '--state', 's0.db'], {
        cwd: dir,
        env: { MEDIABATCH_API_KEY: 'service-key-0123', MEDIABATCH_BASE_URL: service.baseUrl },
      });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(
        'output: storage puts the results in the bucket of storage: in mediabatch.config.yaml, and none is set',
      );
      expect(service.state().jobs).toHaveLength(0);
    } finally {
      await service.close();
    }
    const run = await cli(
      ['run', 's.yaml', '--sandbox', '--sandbox-speed', '0', '--yes', '--state', 's.db'],
      {
        cwd: dir,
        env: env(),
      },
    );
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const storage = createStorage(s3.config('mb'), { env: env() });
    try {
      expect(await storage.size('mb/to-storage/still-2/1.png')).toBeGreaterThan(0);
      expect(await storage.size('mb/to-storage/report.md')).toBeGreaterThan(0);
    } finally {
      storage.destroy();
    }
  });

  it('a bucket that does not exist: one line before anything is charged', async () => {
    await writeFile(join(dir, 'n.yaml'), manifest('nowhere', 's3://no-such-bucket/x'));
    const run = await cli(
      ['run', 'n.yaml', '--sandbox', '--sandbox-speed', '0', '--yes', '--state', 'n.db'],
      {
        cwd: dir,
        env: env(),
      },
    );
    expect(run.code).toBe(1);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr).toMatch(/no-such-bucket/);
    expect(run.stdout).not.toContain('Charged');
  });
});
