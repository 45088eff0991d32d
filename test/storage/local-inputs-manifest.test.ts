// manifests/local-inputs.yaml end to end, as the "Done when" says: it validates and plans without
// a bucket (exact prices, the jingle measured on the disk, nothing uploaded), runs against the sandbox and
// s3rver (each local file uploaded once, the API given working links, the results and the reports in the
// bucket, every charge exactly the planned price by the sandbox's own books), and a second run uploads
// nothing. The sandbox runs in-process so its books can be read; the manifest's {{sandbox}} address is
// pointed at it, as `run --sandbox` does for the embedded one.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Sandbox, startSandbox } from '../../src/sandbox/server.js';
import { createStorage } from '../../src/storage/index.js';
import { cli } from '../helpers/cli.js';
import { S3_KEY_ID, S3_SECRET, startS3, type TestS3 } from '../helpers/s3.js';

const BALANCE = 1000;
let s3: TestS3;
let dir: string;
let sandbox: Sandbox;
beforeAll(async () => {
  s3 = await startS3();
  sandbox = await startSandbox({ port: 0, speed: 0, seed: 18, apiKey: 'sandbox-key', balance: BALANCE });
  dir = await mkdtemp(join(tmpdir(), 'mb-local-manifest-'));
  const text = readFileSync('manifests/local-inputs.yaml', 'utf8');
  expect(text).toContain('sandbox: http://127.0.0.1:8787');
  await writeFile(
    join(dir, 'local-inputs.yaml'),
    text.replace('sandbox: http://127.0.0.1:8787', `sandbox: ${sandbox.baseUrl}`),
  );
  await cp('manifests/local', join(dir, 'local'), { recursive: true });
});
afterAll(async () => {
  await sandbox.close();
  await s3.close();
  await rm(dir, { recursive: true, force: true });
});

const storageEnv = () => ({
  MEDIABATCH_STORAGE_URL: `s3://${s3.bucket}/mb`,
  MEDIABATCH_STORAGE_ENDPOINT: s3.endpoint,
  AWS_ACCESS_KEY_ID: S3_KEY_ID,
  AWS_SECRET_ACCESS_KEY: S3_SECRET,
});
const runEnv = () => ({
  ...storageEnv(),
  MEDIABATCH_API_KEY: 'sandbox-key',
  MEDIABATCH_BASE_URL: sandbox.baseUrl,
  MEDIABATCH_POLL_SCALE: '0.01',
});

/** Planned tokens per task id, from `plan --json`. */
let planned: Map<string, { min: number; max: number; basis: string }>;

describe('manifests/local-inputs.yaml', () => {
  it('validates without storage, counting its four local files', async () => {
    const run = await cli(['validate', 'local-inputs.yaml'], { cwd: dir });
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toBe(
      'local-inputs.yaml: valid, 4 tasks (2 video-face-swap, 1 ai_dance_move, 1 voice-cover)\n  4 local files (file:): `run` uploads them to the bucket of storage: in mediabatch.config.yaml (or MEDIABATCH_STORAGE_URL) and refuses without one\n',
    );
  });

  it('plans without storage: every price exact, the jingle measured on the disk, nothing uploaded', async () => {
    const run = await cli(['plan', 'local-inputs.yaml', '--json'], { cwd: dir });
    expect(run.code, run.stderr).toBe(0);
    const plan = JSON.parse(run.stdout) as {
      tasks: Array<{ id: string; estimate: { min: number; max: number; basis: string } }>;
    };
    planned = new Map(plan.tasks.map((t) => [t.id, t.estimate]));
    for (const [id, e] of planned) expect(e.min, id).toBe(e.max);
    expect(planned.get('jingle-narrator')).toMatchObject({
      max: 0.12,
      basis: '6 s (measured) × 0.02 tokens',
    });
    expect(existsSync(join(s3.dir, s3.bucket, 'mb'))).toBe(false);
    // For people: the same plan says what run will need.
    const text = await cli(['plan', 'local-inputs.yaml'], { cwd: dir });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(
      '4 local files (file:): `run` uploads them to the bucket of storage: in mediabatch.config.yaml (or MEDIABATCH_STORAGE_URL) and refuses without one.\nNothing was submitted.\n',
    );
    expect(text.stdout).toMatch(
      /^jingle-narrator +voice-cover +0\.12 +\$0\.0024 +6 s \(measured\) × 0\.02 tokens$/m,
    );
  });

  it('runs: four files uploaded once, links that work, each charge the planned price, results and reports in the bucket; a second run uploads nothing', async () => {
    const args = ['run', 'local-inputs.yaml', '--yes'];
    const first = await cli([...args, '--state', 'a.db'], { cwd: dir, env: runEnv() });
    expect(first.code, first.stdout + first.stderr).toBe(0);
    expect(first.stdout.match(/^ {2}Upload \d\/4: .* uploaded$/gm)).toHaveLength(4);
    expect(first.stdout).toMatch(/4 done/);
    expect(
      readdirSync(join(s3.dir, s3.bucket, 'mb', 'inputs')).filter((f) => f.endsWith('._S3rver_object')),
    ).toHaveLength(4);

    // The sandbox's books: four jobs, each charged what plan said, the balance down by the sum.
    const state = sandbox.state();
    const rows = new Database(join(dir, 'a.db'), { readonly: true })
      .prepare("SELECT task_id, img_uuid, cost FROM tasks WHERE run_id = 'local-inputs'")
      .all() as Array<{ task_id: string; img_uuid: string; cost: number }>;
    expect(rows).toHaveLength(4);
    let total = 0;
    for (const row of rows) {
      const job = state.jobs.find((j) => j.img_uuid === row.img_uuid);
      expect(job?.cost, row.task_id).toBe(planned.get(row.task_id)?.max);
      expect(row.cost, row.task_id).toBe(job?.cost);
      total += job?.cost ?? 0;
    }
    expect(state.balance).toBeCloseTo(BALANCE - total, 6);

    // Results and reports under <prefix>/<run>/, nothing in a local folder; the gallery links are relative.
    expect(existsSync(join(dir, 'out'))).toBe(false);
    const storage = createStorage(s3.config('mb'), { env: storageEnv() });
    try {
      for (const key of [
        'swap-ana/1.mp4',
        'swap-ana/job.json',
        'swap-ben/1.mp4',
        'mascot-dance/1.mp4',
        'jingle-narrator/1.wav',
        'report.md',
        'report.json',
        'report.csv',
        'index.html',
      ]) {
        expect(await storage.size(`mb/local-inputs/${key}`), key).toBeGreaterThan(0);
      }
      const gallery = (await storage.getBytes('mb/local-inputs/index.html')).toString('utf8');
      expect(gallery).toContain('"p":"swap-ana/1.mp4"');
      expect(gallery).not.toContain('s3://');
    } finally {
      storage.destroy();
    }

    const second = await cli([...args, '--state', 'b.db', '--run-id', 'again'], { cwd: dir, env: runEnv() });
    expect(second.code, second.stdout + second.stderr).toBe(0);
    expect(second.stdout.match(/^ {2}Upload \d\/4: .* already in the bucket$/gm)).toHaveLength(4);
    expect(second.stdout).not.toMatch(/ uploaded$/m);
  });
});
