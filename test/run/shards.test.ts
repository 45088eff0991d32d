// Issue 26, end to end with real processes: three shards of one run started at once against one sandbox
// and one s3rver bucket, each with its own state file; one of them killed with SIGKILL in the middle and
// started again with its own command; then `report --merge` of the three. The money comes from the
// sandbox's /_sandbox/state, the results from the bucket, the codes and lines from the processes.
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import Database from 'better-sqlite3';
import { chromium } from 'playwright-core';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { Report } from '../../src/report/schema.js';
import type { SandboxState } from '../../src/sandbox/server.js';
import { CHROMIUM } from '../helpers/browser.js';
import { type Child, spawnCli, spawnSandbox } from '../helpers/child.js';
import { S3_KEY_ID, S3_SECRET, startS3, type TestS3 } from '../helpers/s3.js';

const IMAGES = 24;
const CHAINS = 4;
const TASKS = IMAGES + 2 * CHAINS;

let dir: string;
let sandbox: Child;
let baseUrl: string;
let s3: TestS3;
let s3client: S3Client;
let env: Record<string, string>;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mb-shards-'));
  // Jobs take a little while (speed 0.05) and one in ten fails (refunded): the kill lands mid-run, and
  // the merged report has refunds to add up.
  const started = await spawnSandbox(['--speed', '0.05', '--seed', '26', '--fail-rate', '0.1']);
  sandbox = started.child;
  baseUrl = started.baseUrl;
  s3 = await startS3();
  s3client = new S3Client({
    endpoint: s3.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: S3_KEY_ID, secretAccessKey: S3_SECRET },
  });
  env = {
    MEDIABATCH_API_KEY: 'sandbox-key',
    MEDIABATCH_BASE_URL: baseUrl,
    MEDIABATCH_POLL_SCALE: '0.02',
    MEDIABATCH_STORAGE_ENDPOINT: s3.endpoint,
    AWS_ACCESS_KEY_ID: S3_KEY_ID,
    AWS_SECRET_ACCESS_KEY: S3_SECRET,
  };
  const tasks = [
    { id: 'img-{{index}}', model: 'flat-image', repeat: IMAGES, input: { prompt: 'shard image {{index}}' } },
    {
      id: 'up-{{index}}',
      model: 'flat-image',
      repeat: CHAINS,
      input: { prompt: 'shard upstream {{index}}' },
    },
    {
      id: 'down-{{index}}',
      model: 'flat-image',
      repeat: CHAINS,
      after: 'up-{{index}}',
      input: { prompt: 'shard downstream {{index}} of {{after.img_uuid}}' },
    },
  ];
  await writeFile(
    join(dir, 'wide.yaml'),
    stringify({
      version: 1,
      name: 'wide',
      concurrency: 2,
      budget: 100,
      output: `s3://${s3.bucket}/out`,
      tasks,
    }),
  );
  // The same tasks with a budget the whole run would exceed (each image costs 0.2): every share too.
  await writeFile(
    join(dir, 'tight.yaml'),
    stringify({ version: 1, name: 'tight', concurrency: 2, budget: 3, output: 'out', tasks }),
  );
}, 60_000);

afterAll(async () => {
  s3client?.destroy();
  sandbox?.proc.kill('SIGTERM');
  await sandbox?.exited;
  await s3?.close();
  await rm(dir, { recursive: true, force: true });
});

async function sandboxState(): Promise<SandboxState> {
  const res = await request(`${baseUrl}/_sandbox/state`);
  return (await res.body.json()) as SandboxState;
}

function shardArgs(i: number, extra: string[] = []): string[] {
  return ['--state', `shard-${i}.db`, 'run', 'wide.yaml', '--yes', '--shard', `${i}/3`, ...extra];
}

function tasksOf(i: number): Array<{ task_id: string; state: string }> {
  const db = new Database(join(dir, `shard-${i}.db`), { readonly: true, fileMustExist: true });
  try {
    return db.prepare('SELECT task_id, state FROM tasks').all() as Array<{ task_id: string; state: string }>;
  } finally {
    db.close();
  }
}

/** Resolves once the shard's state file has some tasks sent and some still pending. */
async function midRun(i: number, child: Child): Promise<boolean> {
  for (let n = 0; n < 600; n++) {
    if (child.proc.exitCode !== null) return false;
    try {
      const rows = tasksOf(i);
      const sent = rows.filter((r) => r.state !== 'pending').length;
      if (sent >= 2 && rows.some((r) => r.state === 'pending')) return true;
    } catch {
      // The state file is not there yet.
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return false;
}

async function bucketKeys(prefix: string): Promise<string[]> {
  const keys: string[] = [];
  let token: string | undefined;
  do {
    const page = await s3client.send(
      new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix, ContinuationToken: token }),
    );
    for (const o of page.Contents ?? []) if (o.Key) keys.push(o.Key);
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return keys;
}

async function bucketText(key: string): Promise<string> {
  const res = await s3client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: key }));
  return (await res.Body?.transformToString('utf8')) ?? '';
}

/** The ids of the cards the gallery shows in Debian's chromium (32 cards fit in its first page of 48). */
async function galleryCardIds(html: string): Promise<string[]> {
  const file = join(dir, 'merged-gallery.html');
  await writeFile(file, html);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  try {
    const page = await browser.newPage();
    await page.goto(pathToFileURL(file).href);
    await page.waitForSelector('#grid .card');
    const ids = await page.$$eval('#grid .card', (els) => els.map((el) => el.getAttribute('data-id') ?? ''));
    return ids.sort();
  } finally {
    await browser.close();
  }
}

async function cli(args: string[]): Promise<{ code: number | string; stdout: string; stderr: string }> {
  const child = spawnCli(args, { cwd: dir, env });
  const code = await child.exited;
  return { code, stdout: child.stdout(), stderr: child.stderr() };
}

describe('three shards of one run on one sandbox and one bucket', () => {
  it('sends every task once, keeps chains whole, survives kill -9, and merges into one report', async () => {
    const children = [1, 2, 3].map((i) => spawnCli(shardArgs(i), { cwd: dir, env }));
    expect(await midRun(2, children[1] as Child)).toBe(true);
    (children[1] as Child).proc.kill('SIGKILL');
    const codes = await Promise.all(children.map((c) => c.exited));
    expect(codes[1]).toBe('SIGKILL');
    for (const i of [0, 2]) expect([0, 2], children[i]?.stderr()).toContain(codes[i]);
    const killedAt = tasksOf(2).filter((t) => t.state === 'done').length;
    expect(killedAt).toBeLessThan(tasksOf(2).length);

    // Its own command again: it resumes (nothing sent twice) and finishes.
    const again = await cli(shardArgs(2));
    expect([0, 2], again.stderr).toContain(again.code);
    expect(again.stdout).toContain('Shard 2 of 3:');

    // Every task in exactly one shard, and sent exactly once across the shards.
    const shards = [1, 2, 3].map((i) => tasksOf(i));
    const all = shards.flat().map((t) => t.task_id);
    expect(all.length).toBe(TASKS);
    expect(new Set(all).size).toBe(TASKS);
    for (const s of shards) expect(s.length).toBeGreaterThan(0);
    const state = await sandboxState();
    const inDoubt = shards.flat().filter((t) => t.state === 'in_doubt').length;
    const prompts = state.jobs.map((j) => (j.request as { prompt: string }).prompt);
    expect(new Set(prompts).size).toBe(prompts.length);
    expect(state.requests.submit).toBe(state.jobs.length);
    // Each task's request once, but for downstreams blocked by a failed upstream (never sent) and a task
    // the kill left in doubt (sent or not: never sent again).
    const promptOf = (id: string) =>
      id
        .replace(/^img-/, 'shard image ')
        .replace(/^up-/, 'shard upstream ')
        .replace(/^down-/, 'shard downstream ');
    for (const t of shards.flat()) {
      const sent = prompts.filter(
        (p) => p === promptOf(t.task_id) || p.startsWith(`${promptOf(t.task_id)} of `),
      );
      if (t.state === 'blocked') expect(sent, t.task_id).toEqual([]);
      else if (t.state === 'in_doubt') expect(sent.length, t.task_id).toBeLessThanOrEqual(1);
      else expect(sent.length, t.task_id).toBe(1);
    }
    const blocked = shards.flat().filter((t) => t.state === 'blocked').length;
    expect(state.requests.submit).toBeLessThanOrEqual(TASKS - blocked);
    expect(state.requests.submit).toBeGreaterThanOrEqual(TASKS - blocked - inDoubt);

    // Chains whole: each downstream in its upstream's shard.
    for (let k = 1; k <= CHAINS; k++) {
      const home = shards.findIndex((s) => s.some((t) => t.task_id === `up-${k}`));
      expect(
        shards[home]?.some((t) => t.task_id === `down-${k}`),
        `chain ${k}`,
      ).toBe(true);
    }

    // Every done task's result in the shared prefix, once (one folder per task).
    const done = shards.flat().filter((t) => t.state === 'done');
    const keys = await bucketKeys('out/wide/');
    const results = keys.filter((k) => /^out\/wide\/[^/]+\/1\.png$/.test(k));
    expect(results.sort()).toEqual(done.map((t) => `out/wide/${t.task_id}/1.png`).sort());
    for (const i of [1, 2, 3]) expect(keys).toContain(`out/wide/report.shard-${i}-of-3.json`);

    // One report for the run: totals are the sandbox's charges and refunds, every task once.
    const merged = await cli(['report', '--merge', `s3://${s3.bucket}/out/wide`]);
    expect(merged.code, merged.stderr).toBe(0);
    const report = JSON.parse(await bucketText('out/wide/report.json')) as Report;
    const micro = (n: number) => Math.round(n * 1e6);
    // A task the kill cut off between its intent and its answer is in doubt: the ledger cannot know
    // whether it was charged (the sandbox may have been), so the report names it with what it may cost.
    const doubtful = new Set(report.in_doubt.map((t) => `shard image ${t.id.slice('img-'.length)}`));
    expect(report.in_doubt.length).toBe(inDoubt);
    for (const t of report.in_doubt) expect(t.id, 'only images are cut off here').toMatch(/^img-/);
    const known = state.jobs.filter((j) => !doubtful.has((j.request as { prompt: string }).prompt));
    for (const j of state.jobs.filter((j) => !known.includes(j))) expect(j.cost).toBeLessThanOrEqual(0.2);
    const charged = known.reduce((n, j) => n + micro(j.cost), 0);
    const refunded = known.reduce((n, j) => n + micro(j.refunded), 0);
    expect(refunded).toBeGreaterThan(0);
    expect(micro(report.totals.charged.tokens)).toBe(charged);
    expect(micro(report.totals.refunded.tokens)).toBe(refunded);
    expect(micro(report.totals.net.tokens)).toBe(charged - refunded);
    expect(report.tasks.map((t) => t.id).sort()).toEqual([...all].sort());
    expect(report.totals.tasks).toBe(TASKS);
    expect(report.shards).toMatchObject({ count: 3, missing: [], unfinished: [] });
    const gallery = await bucketText('out/wide/index.html');
    // The page's inline data: one card per task (`i` is its id), each once.
    const cards = [...gallery.matchAll(/\{"i":"([^"]+)"/g)].map((m) => m[1]);
    expect(cards.sort()).toEqual([...all].sort());
    // Opened in chromium, the run's gallery shows a card for every task of every shard.
    expect(await galleryCardIds(gallery)).toEqual([...all].sort());
    // One gallery for the whole run, beside each shard's own.
    expect((await bucketKeys('out/wide/')).filter((k) => k.endsWith('.html'))).toEqual([
      'out/wide/index.html',
      'out/wide/index.shard-1-of-3.html',
      'out/wide/index.shard-2-of-3.html',
      'out/wide/index.shard-3-of-3.html',
    ]);

    // A missing shard is named, and the rest is still reported.
    await mkdir(join(dir, 'partial'));
    for (const i of [1, 3]) {
      await writeFile(
        join(dir, 'partial', `report.shard-${i}-of-3.json`),
        await bucketText(`out/wide/report.shard-${i}-of-3.json`),
      );
    }
    const partial = await cli(['report', '--merge', 'partial']);
    expect(partial.code).toBe(4);
    expect(partial.stderr.trim().split('\n').at(-1)).toBe(
      // The command is made from shard 1's report: the line says which state file it names.
      "mediabatch: shard 2 of 3 missing (`mediabatch run wide.yaml --shard 2/3 --run-id wide --state shard-1.db`) on its machine, with its own state file: the command names shard 1's (shard-1.db): the report has the rest; run it, then merge again",
    );
    const part = JSON.parse(await readFile(join(dir, 'partial', 'report.json'), 'utf8')) as Report;
    expect(part.shards?.missing).toEqual([2]);
    expect(part.totals.tasks).toBe(shards[0]!.length + shards[2]!.length);
    expect(part.advice[0]).toContain('Missing: no report of shard 2 of 3');

    // The same shard with another count, on its state file: refused, nothing sent.
    const submits = (await sandboxState()).requests.submit;
    const changed = await cli(['--state', 'shard-1.db', 'run', 'wide.yaml', '--yes', '--shard', '1/4']);
    expect(changed.code).toBe(1);
    expect(changed.stderr.trim()).toBe(
      'mediabatch: run wide is split into 3 shards (this state file holds wide.shard-1-of-3), and this is --shard 1/4: another count moves tasks to other shards, which would charge them again; resume it with --shard 1/3, or start another run (--run-id)',
    );
    // On a new machine (a new state file) the bucket's mark refuses another count, and a run that is not a shard.
    const fresh = await cli(['--state', 'new-machine.db', 'run', 'wide.yaml', '--yes', '--shard', '1/4']);
    expect(fresh.code).toBe(1);
    expect(fresh.stderr.trim().split('\n').at(-1)).toBe(
      `mediabatch: s3://${s3.bucket}/out/wide belongs to run wide split into 3 shards, and this is shard 1 of 4 of run wide: a run keeps the shard count it started with (--shard i/3), or give it another output or name`,
    );
    const whole = await cli(['--state', 'whole-run.db', 'run', 'wide.yaml', '--yes']);
    expect(whole.code).toBe(1);
    expect(whole.stderr.trim().split('\n').at(-1)).toBe(
      `mediabatch: s3://${s3.bucket}/out/wide belongs to run wide split into 3 shards, and this is run wide: run it with --shard i/3, or give this manifest another output or name`,
    );
    expect((await sandboxState()).requests.submit).toBe(submits);
  }, 180_000);
});

describe('shard budgets and bad values', () => {
  it('refuses the shard whose share of the budget its worst case exceeds, before anything is sent', async () => {
    const before = (await sandboxState()).requests.submit;
    const out = await cli(['--state', 'tight-1.db', 'run', 'tight.yaml', '--yes', '--shard', '1/3']);
    expect(out.code).toBe(3);
    expect(out.stdout).toMatch(
      /Shard 1 of 3: \d+ of the manifest's 32 tasks, at most [\d.]+ of 6\.4 tokens; budget share [\d.]+ of 3 tokens/,
    );
    expect(out.stdout).toContain('the other 2 shards draw on the same balance');
    expect(out.stderr.trim().split('\n').at(-1)).toMatch(/^mediabatch: .*budget/);
    // --budget gives the shard its own budget instead.
    const own = await cli([
      '--state',
      'tight-1.db',
      'run',
      'tight.yaml',
      '--yes',
      '--shard',
      '1/3',
      '--budget',
      '0.1',
    ]);
    expect(own.code).toBe(3);
    expect(own.stdout).toContain('budget 0.1 tokens (--budget)');
    expect((await sandboxState()).requests.submit).toBe(before);
  }, 60_000);

  it.each([
    [
      '0/3',
      'mediabatch: --shard 0/3: the shard index counts from 1 to 3, got 0 (engines count from 0: use --shard-from-env, which converts)',
    ],
    ['4/3', 'mediabatch: --shard 4/3: the shard index counts from 1 to 3, got 4'],
    ['a/b', 'mediabatch: --shard: expected i/n with whole numbers, e.g. 1/3, got "a/b"'],
  ])(
    '--shard %s: one line, exit 1',
    async (value, line) => {
      const out = await cli(['--state', 'bad.db', 'run', 'tight.yaml', '--yes', '--shard', value]);
      expect(out.code).toBe(1);
      expect(out.stderr).toBe(`${line}\n`);
      expect(out.stdout).toBe('');
    },
    30_000,
  );

  it("a run that is not a shard is refused the shards' folder, and shards of another count too", async () => {
    await writeFile(
      join(dir, 'fold.yaml'),
      (await readFile(join(dir, 'tight.yaml'), 'utf8')).replace('name: tight', 'name: fold'),
    );
    const local = ['--state', 'local-1.db', 'run', 'fold.yaml', '--yes', '--budget', '100'];
    const first = await cli([...local, '--shard', '1/2', '--limit', '1']);
    expect([0, 4], first.stderr).toContain(first.code);
    const whole = await cli(['--state', 'whole.db', 'run', 'fold.yaml', '--yes', '--budget', '100']);
    expect(whole.code).toBe(1);
    expect(whole.stderr.trim()).toBe(
      `mediabatch: ${join('out', 'fold')} belongs to run fold split into 2 shards, and this is run fold of whole.db: run it with --shard i/2, or give this manifest another output or name`,
    );
    const other = await cli([
      '--state',
      'other-machine.db',
      'run',
      'fold.yaml',
      '--yes',
      '--budget',
      '100',
      '--shard',
      '2/3',
    ]);
    expect(other.code).toBe(1);
    expect(other.stderr.trim()).toBe(
      `mediabatch: ${join('out', 'fold')} belongs to run fold split into 2 shards, and this is shard 2 of 3 of run fold: a run keeps the shard count it started with (--shard i/2), or give it another output or name`,
    );
  }, 60_000);
});
