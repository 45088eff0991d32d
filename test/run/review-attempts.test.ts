// Choosing results (docs/review.md): a re-roll keeps the result it replaces. A process that dies after recording the
// re-roll and before moving the earlier files leaves them for the next run, which moves them before it
// sends the re-roll (never overwritten, never forgotten); a run whose output is a bucket keeps the earlier
// result under <task>/attempt-N/ in the bucket, copied server-side. Real sandbox over HTTP (money from its
// /_sandbox/state), a real SQLite file, s3rver for the bucket, the CLI in-process.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { makeRunEnv, type RunEnv, type TaskDecl } from '../helpers/run-env.js';
import { startS3, type TestS3 } from '../helpers/s3.js';

let env: RunEnv | undefined;
let s3: TestS3 | undefined;
afterEach(async () => {
  await env?.close();
  await s3?.close();
  env = undefined;
  s3 = undefined;
});

async function jobsAndBalance(e: RunEnv): Promise<{ jobs: number; balance: number }> {
  const answer = await request(`${e.sandbox.baseUrl}/_sandbox/state`);
  const state = (await answer.body.json()) as { balance: number; jobs: unknown[] };
  return { jobs: state.jobs.length, balance: state.balance };
}

const sha = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

const STILL: TaskDecl[] = [{ id: 'still', model: 'flat-image', review: true, input: { prompt: 'a mug' } }];

describe('a re-roll keeps the earlier result', () => {
  it('after a process died between recording the re-roll and moving the files, the next run moves them before sending', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: STILL, budget: 100 });
    expect((await env.run(['run', file, '--yes'])).code).toBe(4);
    const runDir = join(env.dir, 'out', 'batch');
    const first = await env.files('out/batch/still');
    expect(first).toContain('1.png');
    const firstSha = new Map(first.map((f) => [f, sha(join(runDir, 'still', f))]));

    // What `review --reroll` records, and nothing after it: the process died before moving anything.
    const store = openStore(env.db);
    const outcome = store.reviews.decide('batch', 'still', { verdict: 'reroll', by: 'ana' });
    store.close();
    expect(outcome).toMatchObject({ ok: true, attempt: 2 });
    expect(await env.files('out/batch/still')).toEqual(first);
    // The earlier result's rows are what the next run finishes the move with.
    expect(env.query<{ path: string }>('SELECT path FROM files WHERE task_id = ?', 'still')).toEqual([
      { path: join(runDir, 'still', '1.png') },
    ]);

    const before = await jobsAndBalance(env);
    expect((await env.run(['run', file, '--yes'])).code).toBe(4);
    const after = await jobsAndBalance(env);
    expect(after.jobs).toBe(before.jobs + 1);
    const files = await env.files('out/batch/still');
    // Every earlier file kept, byte for byte, at attempt-1/; the newest result at still/.
    for (const [name, digest] of firstSha) expect(sha(join(runDir, 'still', 'attempt-1', name))).toBe(digest);
    expect(files).toContain('1.png');
    expect(files).toContain('job.json');
    const job = JSON.parse(readFileSync(join(runDir, 'still', 'job.json'), 'utf8')) as {
      job: { img_uuid?: string };
    };
    const earlierJob = JSON.parse(readFileSync(join(runDir, 'still', 'attempt-1', 'job.json'), 'utf8')) as {
      job: { img_uuid?: string };
    };
    expect(job.job.img_uuid).not.toBe(earlierJob.job.img_uuid);
    // The rows now name the new result only.
    const rows = env.query<{ path: string }>('SELECT path FROM files WHERE task_id = ?', 'still');
    expect(rows.map((r) => r.path)).toEqual([join(runDir, 'still', '1.png')]);
    // And a third run sends nothing and moves nothing.
    expect((await env.run(['run', file, '--yes'])).code).toBe(4);
    expect((await jobsAndBalance(env)).jobs).toBe(after.jobs);
    expect(await env.files('out/batch/still')).toEqual(files);
  });

  it('in a bucket, under <task>/attempt-N/, copied server-side before the re-roll is sent', async () => {
    s3 = await startS3();
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: STILL, budget: 100, output: `s3://${s3.bucket}/results` });
    const bucketEnv = {
      env: {
        MEDIABATCH_STORAGE_ENDPOINT: s3.endpoint,
        AWS_ACCESS_KEY_ID: 'S3RVER',
        AWS_SECRET_ACCESS_KEY: 'S3RVER',
      },
    };
    const e = env;
    const run = (args: string[]) => e.run(args, bucketEnv);
    expect((await run(['run', file, '--yes'])).code).toBe(4);
    // s3rver keeps each object's bytes in `<key>._S3rver_object`.
    const object = (key: string) => join(s3?.dir ?? '', s3?.bucket ?? '', `${key}._S3rver_object`);
    const firstPng = sha(object('results/batch/still/1.png'));
    const firstJob = readFileSync(object('results/batch/still/job.json'), 'utf8');

    const asked = await run(['review', 'batch', '--reroll', 'still', '--yes']);
    expect({ code: asked.code, stderr: asked.stderr }).toEqual({ code: 0, stderr: '' });
    const before = await jobsAndBalance(env);
    expect((await run(['run', file, '--yes'])).code).toBe(4);
    expect((await jobsAndBalance(env)).jobs).toBe(before.jobs + 1);

    expect(sha(object('results/batch/still/attempt-1/1.png'))).toBe(firstPng);
    expect(readFileSync(object('results/batch/still/attempt-1/job.json'), 'utf8')).toBe(firstJob);
    // The newest result is at still/: a job of its own.
    const newest = JSON.parse(readFileSync(object('results/batch/still/job.json'), 'utf8')) as {
      job: { img_uuid?: string };
    };
    expect(newest.job.img_uuid).not.toBe(
      (JSON.parse(firstJob) as { job: { img_uuid?: string } }).job.img_uuid,
    );
    expect(env.query<{ path: string }>('SELECT path FROM files WHERE task_id = ?', 'still')).toEqual([
      { path: `s3://${s3.bucket}/results/batch/still/1.png` },
    ]);
  });
});
