// The service as it is documented to behave, not as our sandbox first imagined it. Each
// test drives `mediabatch run` over real HTTP against the sandbox with its quirks switched on, and
// checks money from the sandbox's own books and files on disk.
import { readFile } from 'node:fs/promises';
import { type AddressInfo, createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { detectMediaType } from '../../src/media/kind.js';
import { type FaultProxy, startFaultProxy } from '../helpers/fault-proxy.js';
import { images, makeRunEnv, type RunEnv, reason, taskStates } from '../helpers/run-env.js';

let env: RunEnv | undefined;
let proxy: FaultProxy | undefined;
afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
  await env?.close();
  env = undefined;
});

const round = (n: number) => Math.round(n * 1e6) / 1e6;

/** Net tokens per task prompt, from the sandbox's jobs: what each task really cost. */
function netByPrompt(e: RunEnv): Map<string, { charges: number; net: number }> {
  const out = new Map<string, { charges: number; net: number }>();
  for (const job of e.state().jobs) {
    const request = job.request as { prompt?: string; text?: string } | undefined;
    const key = request?.prompt ?? request?.text ?? job.img_uuid;
    const seen = out.get(key) ?? { charges: 0, net: 0 };
    seen.charges += job.cost > 0 ? 1 : 0;
    seen.net = round(seen.net + job.cost - job.refunded);
    out.set(key, seen);
  }
  return out;
}

async function kindOnDisk(path: string): Promise<string | undefined> {
  const head = (await readFile(path)).subarray(0, 64);
  return detectMediaType(head, undefined, '')?.ext;
}

describe('run against the service as it behaves (sandbox quirks over real HTTP)', () => {
  it('with every quirk and faults on, ends by itself: each task done, failed and refunded, or in doubt; never charged twice', async () => {
    env = await makeRunEnv({ quirks: ['all'], failRate: 0.15, errorRate: 0.1, seed: 11 });
    const speech = Array.from({ length: 4 }, (_, i) => ({
      id: `voice-${i + 1}`,
      model: 'speech-v3',
      input: { text: `Line number ${i + 1} of the quirky run.` },
    }));
    const file = await env.manifest({ tasks: [...images(12), ...speech], concurrency: 6 });
    const result = await env.run(['run', file, '--yes']);

    const states = taskStates(env);
    for (const state of Object.values(states)) expect(['done', 'failed', 'in_doubt']).toContain(state);
    // Not one task paid twice: at most one unrefunded job per prompt.
    for (const [prompt, spend] of netByPrompt(env)) {
      const single = prompt.startsWith('Line') ? 2 : 0.2;
      expect(spend.net === 0 || spend.net === single, `${prompt}: net ${spend.net}`).toBe(true);
    }
    // Every success has its files with the extension its bytes say (links end in .png whatever they hold).
    const files = env.query<{ task_id: string; path: string; kind: string }>(
      'SELECT task_id, path, kind FROM files',
    );
    const done = Object.entries(states).filter(([, s]) => s === 'done');
    expect(new Set(files.map((f) => f.task_id)).size).toBe(done.length);
    for (const f of files) {
      const ext = await kindOnDisk(f.path);
      expect(f.path.endsWith(`.${ext}`), `${f.path} holds ${ext}`).toBe(true);
      if (f.task_id.startsWith('voice')) expect(ext).toBe('mp3');
    }
    const bad = Object.values(states).filter((s) => s !== 'done').length;
    expect(result.code).toBe(bad === 0 ? 0 : 2);
    expect(result.stdout).toContain(`Run batch: ${done.length} done`);
    // The ledger agrees with the sandbox's books.
    const ledger = env.query<{ net: number }>(
      "SELECT coalesce(sum(CASE kind WHEN 'charge' THEN tokens ELSE -tokens END), 0) AS net FROM ledger",
    )[0];
    const sandboxNet = round(env.state().jobs.reduce((n, j) => n + j.cost - j.refunded, 0));
    if (!Object.values(states).includes('in_doubt')) expect(round(ledger?.net ?? 0)).toBe(sandboxNet);
  }, 60_000);

  it('a result link refused once is fetched again through a fresh job record, in the same run', async () => {
    env = await makeRunEnv({ quirks: ['link-403'] });
    const file = await env.manifest({ tasks: images(3) });
    const result = await env.run(['run', file, '--yes']);
    expect(result.code).toBe(0);
    expect(taskStates(env)).toEqual({ 'img-1': 'done', 'img-2': 'done', 'img-3': 'done' });
    expect(await env.files('out/batch')).toContain('img-1/1.png');
  });

  it('a result link refused while the fresh job record fails now and then is still fetched in the same run', async () => {
    env = await makeRunEnv({ quirks: ['link-403'] });
    const e = env;
    // The job records asked for after the job was seen done (the re-signing of the refused link) are
    // answered 500 three times: a passing fault of the service, as a 429 under `retry-after` is.
    let looks = 0;
    proxy = await startFaultProxy(
      e.sandbox.baseUrl,
      (a) => a.path === '/api/v1/jobs/detail' && a.imgUuid !== null && a.seenDone(a.imgUuid) && ++looks <= 3,
    );
    const file = await e.manifest({ tasks: images(1) });
    const result = await e.run(['run', file, '--yes'], { env: { MEDIABATCH_BASE_URL: proxy.baseUrl } });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(proxy.faults).toBe(3);
    expect(taskStates(e)).toEqual({ 'img-1': 'done' });
    expect(await e.files('out/batch')).toContain('img-1/1.png');
    expect(e.state().jobs).toHaveLength(1);
  });

  it('a result that cannot be fetched is unfetched (paid, exit 4), and the next run fetches it', async () => {
    env = await makeRunEnv();
    env.sandbox.configure({ refuseDownloads: true });
    const file = await env.manifest({ tasks: images(2) });
    const first = await env.run(['run', file, '--yes']);
    expect(first.code).toBe(4);
    expect(taskStates(env)).toEqual({ 'img-1': 'unfetched', 'img-2': 'unfetched' });
    expect(first.stdout).toContain('2 task(s) unfetched: charged, but the result is not on disk yet');
    expect(env.state().jobs.map((j) => j.cost - j.refunded)).toEqual([0.2, 0.2]);

    env.sandbox.configure({ refuseDownloads: false });
    const second = await env.run(['run', file, '--yes']);
    expect(second.code).toBe(0);
    expect(taskStates(env)).toEqual({ 'img-1': 'done', 'img-2': 'done' });
    // Nothing was submitted again: the same two jobs, each charged once.
    expect(env.state().jobs).toHaveLength(2);
    expect(await env.files('out/batch')).toEqual(expect.arrayContaining(['img-1/1.png', 'img-2/1.png']));
  });

  it('a cost sent as a string, a 200 with code 500 and a 429 with Retry-After cost nothing extra', async () => {
    env = await makeRunEnv({
      quirks: ['string-numbers', 'code-in-200', 'retry-after', 'request-id'],
      seed: 3,
    });
    const file = await env.manifest({ tasks: images(10) });
    const result = await env.run(['run', file, '--yes']);
    expect(result.code).toBe(0);
    expect(Object.values(taskStates(env))).toEqual(Array(10).fill('done'));
    expect(env.state().jobs).toHaveLength(10);
    expect(result.stdout).toContain('Charged 2 tokens, refunded 0 tokens, net 2 tokens');
  });

  it('statuses as the documentation also spells them (completed, WAITING) and success before its results', async () => {
    env = await makeRunEnv({
      quirks: ['completed', 'waiting', 'success-before-json', 'detail-404-window'],
      accountConcurrency: 2,
    });
    const file = await env.manifest({ tasks: images(5), concurrency: 5 });
    const result = await env.run(['run', file, '--yes']);
    expect(reason(result)).toBe('');
    expect(result.code).toBe(0);
    expect(Object.values(taskStates(env))).toEqual(Array(5).fill('done'));
  });
});

describe('retries: a job the service failed is submitted again, refunded each time', () => {
  it('with --fail-rate 0.3 and retries: 3, 50 tasks end done or failed after 4 attempts; net = one list price per done task', async () => {
    env = await makeRunEnv({ failRate: 0.3, seed: 5 });
    const file = await env.manifest({ tasks: images(50), concurrency: 10 });
    const yaml = await readFile(join(env.dir, file), 'utf8');
    await import('node:fs/promises').then((fs) => fs.writeFile(join(env!.dir, file), `retries: 3\n${yaml}`));
    const result = await env.run(['run', file, '--yes']);
    const states = taskStates(env);
    const done = Object.values(states).filter((s) => s === 'done').length;
    const failed = Object.values(states).filter((s) => s === 'failed').length;
    expect(done + failed).toBe(50);
    expect(done).toBeGreaterThan(45);
    // Every failed attempt refunded; what is left is one list price per done task.
    const jobs = env.state().jobs;
    for (const job of jobs.filter((j) => j.status === 'failed')) expect(job.refunded).toBe(job.cost);
    expect(round(jobs.reduce((n, j) => n + j.cost - j.refunded, 0))).toBe(round(done * 0.2));
    for (const [prompt, spend] of netByPrompt(env)) expect(spend.charges, prompt).toBeLessThanOrEqual(4);
    // Each attempt is a row of its own.
    const attempts = env.query<{ n: number }>(
      "SELECT count(*) AS n FROM attempts WHERE outcome = 'submitted'",
    )[0];
    expect(attempts?.n).toBe(jobs.length);
    expect(result.code).toBe(failed === 0 ? 0 : 2);
    if (jobs.length > 50) expect(result.stdout).toMatch(/failed job\(s\) submitted again/);
  }, 60_000);
});

describe('callbacks recover a task whose submission answer was lost', () => {
  it('the job named by a callback is confirmed by jobs/detail and adopted: done, charged once, counted as recovered', async () => {
    // Every submission is charged, then its answer is dropped: without callbacks both stay in doubt.
    env = await makeRunEnv({ chargeThenErrorRate: 1, seed: 1 });
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const file = await env.manifest({ tasks: images(2), concurrency: 1 });
    const result = await env.run([
      'run',
      file,
      '--yes',
      '--listen',
      `127.0.0.1:${port}`,
      '--callback-url',
      `http://127.0.0.1:${port}`,
    ]);
    expect(env.state().jobs.map((j) => j.answer)).toEqual(['connection-dropped', 'connection-dropped']);
    expect(taskStates(env)).toEqual({ 'img-1': 'done', 'img-2': 'done' });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(
      '2 task(s) recovered from doubt: a callback proved the job was accepted.',
    );
    // Nothing was submitted twice, and the ledger books both charges (at list price: the answer was lost).
    expect(env.state().jobs).toHaveLength(2);
    const rows = env.query<{ task_id: string; recovered: number; cost_assumed: number }>(
      'SELECT task_id, recovered, cost_assumed FROM tasks ORDER BY seq',
    );
    expect(rows).toEqual([
      { task_id: 'img-1', recovered: 1, cost_assumed: 1 },
      { task_id: 'img-2', recovered: 1, cost_assumed: 1 },
    ]);
    expect(env.query<{ n: number }>("SELECT count(*) AS n FROM ledger WHERE kind = 'charge'")[0]?.n).toBe(2);
    expect(await env.files('out/batch')).toEqual(expect.arrayContaining(['img-1/1.png', 'img-2/1.png']));
  });
});
