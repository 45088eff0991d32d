// `mediabatch run` with local inputs, the money read from the sandbox's own books (/_sandbox/state, here
// its in-process twin) rather than from our output: the sandbox and s3rver on loopback, the CLI in-process.
//  - every way of writing a local input reaches the API as a working link (`{ file: path }`, and the
//    frame list of stream-2-0-fast, whose items are not top-level fields), and a local song is billed
//    for the length plan measured on the disk;
//  - storage that refuses (wrong credentials, a bucket that does not exist) stops the run before any
//    POST: one line, its exit code, not one submission, the balance untouched;
//  - a sentinel key id and secret appear nowhere we write: output, the log file, the state database,
//    the objects in the bucket (results, job.json, reports, gallery).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeWav } from '../../src/media/synth.js';
import { type Sandbox, startSandbox } from '../../src/sandbox/server.js';
import { cli } from '../helpers/cli.js';
import { S3_KEY_ID, S3_SECRET, startS3, type TestS3 } from '../helpers/s3.js';

const BALANCE = 1000;
let s3: TestS3;
let dir: string;
let sandbox: Sandbox;

beforeAll(async () => {
  s3 = await startS3();
  dir = await mkdtemp(join(tmpdir(), 'mb-local-money-'));
  await writeFile(join(dir, 'song.wav'), makeWav(12));
  await writeFile(join(dir, 'voice.wav'), makeWav(4));
  await copyFile('manifests/local/faces/ana.png', join(dir, 'first.png'));
  await copyFile('manifests/local/faces/ben.png', join(dir, 'last.png'));
  await writeFile(
    join(dir, 'local.yaml'),
    `version: 1
name: local
tasks:
  - id: cover
    model: voice-cover
    input: { audio_url: "file:song.wav", reference_audio_url: { file: voice.wav } }
  - id: frames
    model: stream-2-0-fast
    input: { prompt: "from one face to the other", duration: 4, image_url: { file: first.png }, image_end_url: "file:last.png" }
`,
  );
});
afterAll(async () => {
  await s3.close();
  await rm(dir, { recursive: true, force: true });
});

/** A fresh sandbox per test: its books start at BALANCE with no job. */
async function freshSandbox(): Promise<Sandbox> {
  await sandbox?.close();
  sandbox = await startSandbox({ port: 0, speed: 0, seed: 18, apiKey: 'sandbox-key', balance: BALANCE });
  return sandbox;
}
afterAll(() => sandbox?.close());

function env(extra: Record<string, string> = {}): Record<string, string> {
  return {
    MEDIABATCH_API_KEY: 'sandbox-key',
    MEDIABATCH_BASE_URL: sandbox.baseUrl,
    MEDIABATCH_POLL_SCALE: '0.01',
    MEDIABATCH_STORAGE_URL: `s3://${s3.bucket}/mb`,
    MEDIABATCH_STORAGE_ENDPOINT: s3.endpoint,
    AWS_ACCESS_KEY_ID: S3_KEY_ID,
    AWS_SECRET_ACCESS_KEY: S3_SECRET,
    ...extra,
  };
}

const isLink = (value: unknown) =>
  typeof value === 'string' &&
  value.startsWith(`${s3.endpoint}/${s3.bucket}/mb/inputs/`) &&
  value.includes('X-Amz-Signature=');

describe('run with local inputs: what the API receives and what it charges', () => {
  it('{ file: path } and frame lists go out as presigned links; the local song is billed as plan measured it', async () => {
    await freshSandbox();
    const plan = await cli(['plan', 'local.yaml', '--json'], { cwd: dir, env: env() });
    expect(plan.code, plan.stderr).toBe(0);
    const planned = JSON.parse(plan.stdout) as {
      tasks: Array<{ id: string; estimate: { min: number; max: number } }>;
    };
    // 12 s measured on the disk × 0.02 tokens: exact, before anything is uploaded.
    expect(planned.tasks.find((t) => t.id === 'cover')?.estimate).toMatchObject({ min: 0.24, max: 0.24 });

    const run = await cli(['run', 'local.yaml', '--yes', '--state', 'a.db'], { cwd: dir, env: env() });
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout.match(/^ {2}Upload \d\/4: .* uploaded$/gm)).toHaveLength(4);

    const state = sandbox.state();
    expect(state.jobs).toHaveLength(2);
    const cover = state.jobs.find((j) => j.model === 'voice-cover');
    const frames = state.jobs.find((j) => j.model === 'stream-2-0-fast');
    const coverRequest = cover?.request as Record<string, unknown>;
    expect(isLink(coverRequest['audio_url'])).toBe(true);
    expect(isLink(coverRequest['reference_audio_url'])).toBe(true);
    const frameLinks = (frames?.request as Record<string, unknown> | undefined)?.['image_urls'] as unknown[];
    expect(frameLinks).toHaveLength(2);
    expect(frameLinks.every(isLink)).toBe(true);
    // The sandbox measured the song through its link: the same 12 s, so the same price as the plan.
    expect(cover?.cost).toBe(0.24);
    expect(state.balance).toBeCloseTo(BALANCE - (cover?.cost ?? 0) - (frames?.cost ?? 0), 6);
    const rows = new Database(join(dir, 'a.db'), { readonly: true })
      .prepare("SELECT task_id, cost, body FROM tasks WHERE run_id = 'local' ORDER BY task_id")
      .all() as Array<{ task_id: string; cost: number; body: string }>;
    expect(rows.map((r) => [r.task_id, r.cost])).toEqual([
      ['cover', cover?.cost],
      ['frames', frames?.cost],
    ]);
    // Stored as the manifest says (one form), never as a link that expires.
    expect(JSON.parse(rows[1]?.body ?? '{}').image_urls).toEqual(['file:first.png', 'file:last.png']);
  });

  const CREDENTIALS_REFUSED =
    /^mediabatch: storage credentials refused by http:\/\/127\.0\.0\.1:\d+ for bucket (mediabatch-test|results-bucket-gone) \(HTTP 403\); set AWS_ACCESS_KEY_ID\/AWS_SECRET_ACCESS_KEY or AWS_PROFILE$/;
  const WRONG = { AWS_ACCESS_KEY_ID: 'WRONGKEYID', AWS_SECRET_ACCESS_KEY: 'wrong-secret-value' };
  it.each<{ what: string; output?: string; extra: Record<string, string>; code: number; line: RegExp }>([
    {
      what: 'local inputs, no storage configured',
      extra: { MEDIABATCH_STORAGE_URL: '' },
      code: 1,
      line: /^mediabatch: this manifest has local file: inputs and run must upload them: add storage: \{ url: s3:\/\/bucket\/prefix \} to mediabatch\.config\.yaml \(or set MEDIABATCH_STORAGE_URL\) with AWS credentials in the environment$/,
    },
    { what: 'local inputs, wrong credentials', extra: WRONG, code: 5, line: CREDENTIALS_REFUSED },
    {
      what: 'local inputs, a bucket that does not exist',
      extra: { MEDIABATCH_STORAGE_URL: 's3://no-such-bucket/mb' },
      code: 1,
      line: /^mediabatch: bucket no-such-bucket does not exist at http:\/\/127\.0\.0\.1:\d+; create it or fix storage\.url$/,
    },
    {
      what: 'results to a bucket, wrong credentials',
      output: 's3://mediabatch-test/results',
      extra: WRONG,
      code: 5,
      line: CREDENTIALS_REFUSED,
    },
    {
      what: 'results to a bucket that does not exist',
      output: 's3://results-bucket-gone/results',
      extra: {},
      code: 1,
      line: /^mediabatch: bucket results-bucket-gone does not exist at http:\/\/127\.0\.0\.1:\d+; create it or fix storage\.url$/,
    },
  ])(
    '$what: one line, exit $code, not one submission, the balance untouched',
    async ({ output, extra, code, line }) => {
      await freshSandbox();
      // A manifest (so a run and an output folder) of its own for each case; a bucket output has no local input.
      const name = `refused-${Math.random().toString(36).slice(2, 8)}`;
      const text = output
        ? `version: 1\nname: ${name}\noutput: ${output}\ntasks:\n  - id: still\n    model: flat-image\n    input: { prompt: "a mug" }\n`
        : readFileSync(join(dir, 'local.yaml'), 'utf8').replace('name: local', `name: ${name}`);
      await writeFile(join(dir, `${name}.yaml`), text);
      const run = await cli(['run', `${name}.yaml`, '--yes', '--state', `${name}.db`], {
        cwd: dir,
        env: env(extra),
      });
      expect(run.code).toBe(code);
      expect(run.stderr.trimEnd().split('\n')).toEqual([expect.stringMatching(line)]);
      const state = sandbox.state();
      expect(state.requests.submit).toBe(0);
      expect(state.jobs).toEqual([]);
      expect(state.balance).toBe(BALANCE);
    },
  );
});

describe('storage credentials are never written down', () => {
  it('a sentinel key id and secret: absent from output, log, state database and every object in the bucket', async () => {
    await freshSandbox();
    const keyId = 'SENTINELKEYID0018';
    const secret = 'SENTINEL-secret-0018-never-write-me';
    s3.addCredentials(keyId, secret);
    await writeFile(
      join(dir, 'secret.yaml'),
      readFileSync(join(dir, 'local.yaml'), 'utf8').replace(
        'name: local',
        `name: secret\noutput: s3://${s3.bucket}/out`,
      ),
    );
    const e = env({ AWS_ACCESS_KEY_ID: keyId, AWS_SECRET_ACCESS_KEY: secret });
    const args = ['--log-file', 'run.log', '--log-level', 'debug', '--state', 's.db'];
    const run = await cli([...args, 'run', 'secret.yaml', '--yes'], { cwd: dir, env: e });
    expect(run.code, run.stdout + run.stderr).toBe(0);
    const report = await cli([...args, 'report', 'secret'], { cwd: dir, env: e });
    expect(report.code, report.stderr).toBe(0);
    const status = await cli([...args, 'status', 'secret', '--json'], { cwd: dir, env: e });
    expect(status.code, status.stderr).toBe(0);

    // Every file written: the log, the database (and its WAL), and s3rver's own folder, where each
    // object (results, job.json, report.json/csv/md, index.html) and its metadata lie as plain files.
    const written = [
      join(dir, 'run.log'),
      ...['s.db', 's.db-wal', 's.db-shm'].map((f) => join(dir, f)).filter((f) => exists(f)),
      ...filesUnder(s3.dir),
    ];
    expect(written.some((f) => f.endsWith('report.md') || f.includes('report.md'))).toBe(true);
    expect(readFileSync(join(dir, 'run.log'), 'utf8').length).toBeGreaterThan(0);
    for (const text of [run.stdout, run.stderr, report.stdout, report.stderr, status.stdout]) {
      expect(text).not.toContain(secret);
      expect(text).not.toContain(keyId);
    }
    for (const file of written) {
      const bytes = readFileSync(file);
      expect(bytes.includes(secret), file).toBe(false);
      expect(bytes.includes(keyId), file).toBe(false);
    }
  });
});

function exists(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

function filesUnder(root: string): string[] {
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => join(d.parentPath, d.name));
}
