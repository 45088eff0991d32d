// Every outcome of a submission, end to end: the CLI against the sandbox over real HTTP, with a real
// SQLite file. Money is read from the sandbox's own books, not from what mediabatch believes.
import { createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { hintIn, images, makeRunEnv, type RunEnv, reason, taskStates } from '../helpers/run-env.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const sum = (xs: number[]) => Math.round(xs.reduce((a, b) => a + b, 0) * 1e6) / 1e6;
const charged = (e: RunEnv) => sum(e.state().jobs.map((j) => j.cost - j.refunded));

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('run: outcomes of a submission', () => {
  it('accepted: every task done with its files, charged once, exit 0', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(3) });
    const result = await env.run(['run', file, '--yes']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const state = env.state();
    expect(state.jobs).toHaveLength(3);
    expect(state.balance).toBe(999.4);
    expect(taskStates(env)).toEqual({ 'img-1': 'done', 'img-2': 'done', 'img-3': 'done' });
    expect(await env.files('out/batch')).toEqual([
      'img-1/1.png',
      'img-1/job.json',
      'img-2/1.png',
      'img-2/job.json',
      'img-3/1.png',
      'img-3/job.json',
      'index.html',
      'report.csv',
      'report.json',
      'report.md',
    ]);
    expect(result.stdout).toContain('Run batch: 3 done\n');
    expect(result.stdout).toContain(
      '  Charged 0.6 tokens, refunded 0 tokens, net 0.6 tokens ($0.01); estimated 0.6 tokens\n',
    );
  });

  it('400: the task is rejected, nothing is charged, exit 2', async () => {
    env = await makeRunEnv();
    // The sandbox alone can tell that this song task does not exist: our checks pass, the API says 400.
    const file = await env.manifest({
      tasks: [
        ...images(1),
        {
          id: 'song',
          model: 'song-replace-section',
          input: {
            task_id: 'no-such-task',
            audio_id: 'no-such-song',
            infill_start_s: 0,
            infill_end_s: 12,
            lyrics: '[Chorus] la la',
            full_lyrics: '[Verse] hm [Chorus] la la',
            style: 'pop',
            title: 'La',
          },
          media_seconds: 30,
        },
      ],
    });
    const result = await env.run(['run', file, '--yes']);
    expect(result.code).toBe(2);
    expect(taskStates(env)).toEqual({ 'img-1': 'done', song: 'rejected' });
    expect(env.state().jobs).toHaveLength(1);
    expect(charged(env)).toBe(0.2);
    const [song] = env.query<{ error: string }>("SELECT error FROM tasks WHERE task_id = 'song'");
    expect(song?.error).toMatch(/no successful song task "no-such-task"/);
    expect(reason(result)).toBe(
      `1 task(s) did not succeed: 1 rejected by the API (not charged); \`mediabatch status batch --state ${env.db}\` says why`,
    );
    // Typed as printed, it says why, and sends nothing.
    const status = await env.type(hintIn(reason(result)));
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(/song .* rejected .*no successful song task "no-such-task"/);
    expect(env.state().requests.submit).toBe(2);
  });

  it('code 100: stops submitting, exit 4; after a top-up the same command completes', async () => {
    env = await makeRunEnv({ balance: 0.5 });
    const file = await env.manifest({ tasks: images(5), concurrency: 1 });
    const first = await env.run(['run', file, '--yes', '--allow-partial']);
    expect(first.code).toBe(4);
    expect(reason(first)).toBe(
      `the balance ran out (code 100): top up, then run again to continue: \`mediabatch run batch.yaml --run-id batch --state ${env.db} --allow-partial\``,
    );
    expect(env.state().jobs).toHaveLength(2);
    expect(env.state().requests.submit).toBe(3);
    expect(Object.values(taskStates(env))).toEqual(['done', 'done', 'pending', 'pending', 'pending']);

    env.sandbox.configure({ balance: 100 });
    const second = await env.type(hintIn(reason(first)));
    expect(second.code).toBe(0);
    expect(second.stdout).toContain('Resuming run batch (2 done, 3 unfinished)');
    expect(env.state().jobs).toHaveLength(5);
    expect(env.state().requests.submit).toBe(6);
    expect(Object.values(taskStates(env))).toEqual(['done', 'done', 'done', 'done', 'done']);
  });

  it('code 101: stops submitting, exit 4; the quota figures are kept and shown by the next preflight', async () => {
    env = await makeRunEnv({ quota: 0.5 });
    const file = await env.manifest({ tasks: images(5), concurrency: 1 });
    const first = await env.run(['run', file, '--yes']);
    expect(first.code).toBe(4);
    expect(reason(first)).toBe(
      `the API key's quota is used up (API key quota exceeded: 0.4 of 0.5 tokens used (monthly)): run again in the next period: \`mediabatch run batch.yaml --run-id batch --state ${env.db}\``,
    );
    expect(env.state().jobs).toHaveLength(2);

    const second = await env.run(['run', file, '--yes']);
    expect(second.stdout).toMatch(
      /\n {2}Quota: 0\.4 of 0\.5 tokens used this period \(learned from the API on \d{4}-\d\d-\d\d, plus the ledger since\), the run can cost up to 0\.5 tokens more than the quota leaves this period\n/,
    );
    expect(second.code).toBe(3);
    expect(env.state().requests.submit).toBe(3);
  });

  it('401: exit 5 with one line, nothing submitted', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(2) });
    const result = await env.run(['run', file, '--yes'], { env: { MEDIABATCH_API_KEY: 'wrong-key-123' } });
    expect(result.code).toBe(5);
    expect(result.stderr).toBe(
      'mediabatch: the API refused the credentials (401): check MEDIABATCH_API_KEY and the base URL\n',
    );
    expect(env.state().requests.submit).toBe(0);
  });

  it('500: retried with backoff, then accepted; one charge per task', async () => {
    // Seed 3 answers some of these 500 (drawn per submission, in order with concurrency 1).
    env = await makeRunEnv({ errorRate: 0.4, seed: 3 });
    const file = await env.manifest({ tasks: images(4), concurrency: 1 });
    const result = await env.run(['run', file, '--yes']);
    expect(result.code).toBe(0);
    const state = env.state();
    expect(state.jobs).toHaveLength(4);
    expect(state.requests.submit).toBeGreaterThan(4);
    const retried = env.query<{ n: number }>(
      "SELECT count(*) AS n FROM attempts WHERE outcome = 'not_charged' AND message LIKE 'HTTP 500%'",
    );
    expect(retried[0]?.n).toBe(state.requests.submit - 4);
    expect(Object.values(taskStates(env))).toEqual(['done', 'done', 'done', 'done']);
  });

  it('charge then dropped answer: in doubt, reported, not resubmitted; --retry-in-doubt resubmits', async () => {
    // With seed 1 every answer of these two submissions is a dropped connection after the charge.
    env = await makeRunEnv({ chargeThenErrorRate: 1, seed: 1 });
    const file = await env.manifest({ tasks: images(2), concurrency: 1 });
    const first = await env.run(['run', file, '--yes']);
    expect(env.state().jobs.map((j) => j.answer)).toEqual(['connection-dropped', 'connection-dropped']);
    expect(first.code).toBe(2);
    expect(taskStates(env)).toEqual({ 'img-1': 'in_doubt', 'img-2': 'in_doubt' });
    expect(first.stdout).toContain(
      '  2 task(s) in doubt: sent, but the answer was lost, so they may have been charged.',
    );

    env.sandbox.configure({ chargeThenErrorRate: 0 });
    const again = await env.run(['run', file, '--yes']);
    expect(again.code).toBe(2);
    expect(again.stdout).toContain('Run batch is already complete: 0 done, 2 in doubt.');
    expect(reason(again)).toBe(
      `2 task(s) did not succeed: 2 in doubt (resubmitted only with --retry-in-doubt); \`mediabatch status batch --state ${env.db}\` says why`,
    );
    expect(env.state().requests.submit).toBe(2);

    // The first run's own line names the command that submits them again: typed as printed.
    const retryHint = hintIn(first.stdout.split('\n').find((l) => l.includes('in doubt: sent')) ?? '');
    expect(retryHint).toBe(`mediabatch run batch.yaml --run-id batch --state ${env.db} --retry-in-doubt`);
    const retry = await env.type(retryHint);
    expect(retry.stdout).toContain(
      '--retry-in-doubt: 2 task(s) will be submitted again (they may be charged twice).',
    );
    expect(retry.code).toBe(0);
    expect(env.state().jobs).toHaveLength(4);
    expect(taskStates(env)).toEqual({ 'img-1': 'done', 'img-2': 'done' });
  });

  it('connection refused: retried, then the run stops resumable; nothing charged', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(5), concurrency: 4 });
    const port = await closedPort();
    const first = await env.run(['run', file, '--yes'], {
      env: { MEDIABATCH_BASE_URL: `http://127.0.0.1:${port}` },
    });
    expect(first.code).toBe(4);
    expect(reason(first)).toBe(
      `the API keeps failing (connection refused (ECONNREFUSED): the request was not sent); nothing was charged for those tasks: run again later: \`mediabatch run batch.yaml --run-id batch --state ${env.db}\``,
    );
    expect(first.stdout).toContain('  Balance: unknown (connection refused (ECONNREFUSED))');
    const attempts = env.query<{ task_id: string; n: number }>(
      "SELECT task_id, count(*) AS n FROM attempts WHERE outcome = 'not_charged' GROUP BY task_id",
    );
    // Three tasks in a row used up their six attempts (one may have been put off and tried again first).
    expect(attempts.filter((a) => a.n >= 6).length).toBeGreaterThanOrEqual(3);
    expect(Object.values(taskStates(env)).every((s) => s === 'pending')).toBe(true);

    const second = await env.type(hintIn(reason(first)));
    expect(second.code).toBe(0);
    expect(env.state().jobs).toHaveLength(5);
  });

  it('expired result link, fresh ones too: the task is unfetched (paid, resumable), exit 4', async () => {
    env = await makeRunEnv({ linkTtlSeconds: 0 });
    const file = await env.manifest({ tasks: images(1) });
    const result = await env.run(['run', file, '--yes']);
    expect(result.code).toBe(4);
    const [task] = env.query<{ state: string; error: string }>('SELECT state, error FROM tasks');
    expect(task).toEqual({
      state: 'unfetched',
      error:
        '1.png could not be fetched (the result link was refused 4 times, fresh links included); the job is charged: run again to fetch it',
    });
    expect(env.state().jobs).toHaveLength(1);
    // No result file: only the run's report, which lists the failure.
    expect(await env.files('out')).toEqual([
      'batch/index.html',
      'batch/report.csv',
      'batch/report.json',
      'batch/report.md',
    ]);
    expect(reason(result)).toBe(
      `1 task(s) are unfinished (img-1: 1.png could not be fetched (the result link was refused 4 times, fresh links included); the job is charged: run again to fetch it): \`mediabatch run batch.yaml --run-id batch --state ${env.db}\` continues the run`,
    );
  });
});
