// Kill -9 while results stream into a bucket (12 MB videos in multipart uploads among small images), then the same command again, until the run ends:
// no task charged twice, and every done task's objects complete in the bucket (sizes as recorded); a
// cut-off upload never counts as a result. The runner is a child process; the sandbox and s3rver outlive it.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { createStorage } from '../../src/storage/index.js';
import { type ProxiedSandbox, startProxiedSandbox } from '../helpers/charge-proxy.js';
import { runWithKills, seeded } from '../helpers/child.js';
import { diskTmpdir } from '../helpers/memory-tmp.js';
import { S3_KEY_ID, S3_SECRET, startS3, type TestS3 } from '../helpers/s3.js';

const TASKS = 10;
const CLIPS = 6;
const MAX_KILLS = 5;

let dir: string;
let sandbox: ProxiedSandbox;
let s3: TestS3;

beforeAll(async () => {
  // On disk, not in memory with the other tests' folders: the kills' moments (up to 600 ms after the run
  // says what it will submit) were set against a state whose commits wait for the disk. In memory the
  // runner has sent every clip by then, and five kills left all six in doubt in 3 runs of 6.
  dir = await mkdtemp(join(diskTmpdir(), 'mb-bucket-crash-'));
  // Each video result is 12 MB: above the 8 MiB part size, so it goes up to the bucket in parts.
  sandbox = await startProxiedSandbox([
    '--speed',
    '0',
    '--seed',
    '3',
    '--latency',
    '20',
    '--video-padding',
    '12000000',
  ]);
  s3 = await startS3();
});

afterAll(async () => {
  await sandbox?.close();
  await s3?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('results in a bucket: kill -9 at random moments', () => {
  it('never charges twice; every done task has whole objects in the bucket', async () => {
    const tasks = [
      {
        id: 'shot-{{index}}',
        model: 'flat-image',
        repeat: TASKS,
        input: { prompt: 'bucket crash shot {{index}}' },
      },
      {
        id: 'clip-{{index}}',
        model: 'studio-2-6',
        repeat: CLIPS,
        input: { prompt: 'bucket crash clip {{index}}', duration: 5, resolution: '720p' },
      },
    ];
    await writeFile(
      join(dir, 'crash.yaml'),
      stringify({ version: 1, name: 'crash', concurrency: 4, output: `s3://${s3.bucket}/out`, tasks }),
    );
    const env = {
      ...sandbox.env(),
      MEDIABATCH_STORAGE_URL: `s3://${s3.bucket}/mb`,
      MEDIABATCH_STORAGE_ENDPOINT: s3.endpoint,
      AWS_ACCESS_KEY_ID: S3_KEY_ID,
      AWS_SECRET_ACCESS_KEY: S3_SECRET,
    };
    const random = seeded(18);
    const codes = await runWithKills({
      args: ['--state', 'state.db', 'run', 'crash.yaml', '--yes'],
      cwd: dir,
      env,
      random,
      maxKills: MAX_KILLS,
      maxDelayMs: 600,
    });
    expect(codes.filter((c) => c === 'SIGKILL').length).toBeGreaterThanOrEqual(2);

    const db = new Database(join(dir, 'state.db'), { readonly: true, fileMustExist: true });
    const rows = db.prepare("SELECT task_id, state, body FROM tasks WHERE run_id = 'crash'").all() as Array<{
      task_id: string;
      state: string;
      body: string;
    }>;
    const files = db.prepare("SELECT task_id, path, bytes FROM files WHERE run_id = 'crash'").all() as Array<{
      task_id: string;
      path: string;
      bytes: number;
    }>;
    db.close();
    const byKey = sandbox.proxy.jobsByKey();
    const done = new Set<string>();
    const storage = createStorage(s3.config('out'), { env });
    try {
      for (const task of rows) {
        const prompt = (JSON.parse(task.body) as { prompt: string }).prompt;
        expect((byKey.get(prompt) ?? []).length, task.task_id).toBeLessThanOrEqual(1);
        expect(['done', 'in_doubt'], task.task_id).toContain(task.state);
        if (task.state !== 'done') continue;
        done.add(task.task_id);
        const own = files.filter((f) => f.task_id === task.task_id);
        expect(own.length, task.task_id).toBe(1);
        for (const f of own) {
          expect(await storage.size(f.path.slice(`s3://${s3.bucket}/`.length))).toBe(f.bytes);
          if (task.task_id.startsWith('clip-')) expect(f.bytes).toBeGreaterThan(12_000_000);
        }
        expect(await storage.size(`out/crash/${task.task_id}/job.json`)).toBeGreaterThan(0);
      }
    } finally {
      storage.destroy();
    }
    expect([...done].filter((id) => id.startsWith('clip-')).length).toBeGreaterThan(0);
  }, 90_000);
});
