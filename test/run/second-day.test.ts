// What a user meets right after the demo. A run belongs to the API and key it started with;
// an output folder belongs to one run of one state file; a paid run is never started unconfirmed; a
// run's first start and last end do not move when a re-run has nothing to do; a refusal is `refused`.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startSandbox } from '../../src/sandbox/server.js';
import { images, makeRunEnv, type RunEnv, reason, SANDBOX_KEY, taskStates } from '../helpers/run-env.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

describe('a run belongs to the API and key it was started against', () => {
  it('resuming it against another base URL or another key is refused with one line; nothing is sent', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(2) });
    env.sandbox.configure({ refuseDownloads: true });
    expect((await env.run(['run', file, '--yes'])).code).toBe(4);

    const other = await startSandbox({ port: 0, speed: 0, apiKey: SANDBOX_KEY });
    try {
      const elsewhere = await env.run(['run', file, '--yes'], {
        env: { MEDIABATCH_BASE_URL: other.baseUrl },
      });
      expect(elsewhere.code).toBe(1);
      expect(reason(elsewhere)).toBe(
        `run batch cannot be resumed here: it belongs to ${env.sandbox.baseUrl}, and this would use ${other.baseUrl}. Use the API and key it was started with, or start another run (--new-run, --run-id, or another --state)`,
      );
      expect(other.state().requests.submit).toBe(0);
    } finally {
      await other.close();
    }
    const otherKey = await env.run(['run', file, '--yes'], {
      env: { MEDIABATCH_API_KEY: 'another-key-123' },
    });
    expect(otherKey.code).toBe(1);
    expect(reason(otherKey)).toMatch(
      /^run batch cannot be resumed here: it belongs to the API key with fingerprint \w+, and MEDIABATCH_API_KEY now has fingerprint \w+\./,
    );
    expect(otherKey.stdout + otherKey.stderr).not.toContain('another-key-123');
  });
});

describe('an output folder belongs to one run of one state file', () => {
  it('another state file refuses to write there, naming both, and the good report is untouched', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(2) });
    expect((await env.run(['run', file, '--yes'])).code).toBe(0);
    const before = await readFile(join(env.dir, 'out/batch/report.md'), 'utf8');
    const other = await env.run(['--state', join(env.dir, 'other.db'), 'run', file, '--yes']);
    expect(other.code).toBe(1);
    expect(reason(other)).toBe(
      'out/batch belongs to run batch of the state file state.db, and this is run batch of other.db: use that --state, or give this manifest another output or name',
    );
    expect(await readFile(join(env.dir, 'out/batch/report.md'), 'utf8')).toBe(before);
    expect(env.state().jobs).toHaveLength(2);
    const report = await env.run(['--state', join(env.dir, 'other.db'), 'report', 'batch']);
    expect(report.code).toBe(1);
  });
});

describe('confirmation before paying', () => {
  it('without a terminal and without --yes, run refuses (exit 3) and says to add --yes', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(1) });
    const result = await env.run(['run', file]);
    expect(result.code).toBe(3);
    expect(reason(result)).toBe(
      'not confirmed: standard input is not a terminal, so nobody can answer; add --yes to submit without asking',
    );
    expect(env.state().jobs).toHaveLength(0);
    expect(env.query<{ state: string }>('SELECT state FROM runs')).toEqual([{ state: 'refused' }]);
  });

  it('asks whoever is at the terminal; yes submits, Ctrl-C prints the last line like any exit', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(1) });
    const questions: string[] = [];
    const ctrlC = await env.run(['run', file], {
      ask: async (q) => {
        questions.push(q);
        return 'interrupted';
      },
    });
    expect(ctrlC.code).toBe(3);
    expect(reason(ctrlC)).toBe('not confirmed (Ctrl-C); nothing was submitted');
    expect(questions).toEqual(['Submit 1 task(s) for up to 0.2 tokens? [y/N] ']);
    const yes = await env.run(['run', file], { ask: async () => true });
    expect(yes.code).toBe(0);
    expect(taskStates(env)).toEqual({ 'img-1': 'done' });
  });
});

describe('truthful run records', () => {
  it('a re-run with nothing to do moves neither the first start nor the last end', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(1) });
    const t1 = new Date('2026-11-20T10:00:00Z');
    expect((await env.run(['run', file, '--yes'], { now: () => t1 })).code).toBe(0);
    const first = env.query<{ first_started_at: string; finished_at: string }>(
      'SELECT first_started_at, finished_at FROM runs',
    );
    const again = await env.run(['run', file, '--yes'], { now: () => new Date('2026-11-22T03:00:00Z') });
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('Run batch is already complete: 1 done.');
    expect(env.query('SELECT first_started_at, finished_at FROM runs')).toEqual(first);
    const report = JSON.parse(await readFile(join(env.dir, 'out/batch/report.json'), 'utf8')) as {
      run: { started_at: string; active_s: number };
    };
    expect(report.run.started_at).toBe(first[0]?.first_started_at);
  });
});

describe('run subsets and try again', () => {
  it('--limit 2 submits two tasks (a smoke test), the rest stays pending (exit 4); the next run does the rest', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(5), concurrency: 5 });
    const smoke = await env.run(['run', file, '--yes', '--limit', '2']);
    expect(smoke.code).toBe(4);
    expect(reason(smoke)).toBe(
      `submitted 2 task(s) as --limit asked; the rest stays pending: run again without --limit to continue: \`mediabatch run batch.yaml --run-id batch --state ${env.db}\``,
    );
    expect(smoke.stdout).toContain('To submit: 2 task(s)');
    expect(Object.values(taskStates(env)).sort()).toEqual(['done', 'done', 'pending', 'pending', 'pending']);
    expect((await env.run(['run', file, '--yes'])).code).toBe(0);
    expect(env.state().jobs).toHaveLength(5);
  });

  it('--only takes ids and globs; a pattern that matches nothing is refused naming it', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: [...images(3), ...images(2, 'hero')] });
    const some = await env.run(['run', file, '--yes', '--only', 'hero-*,img-2']);
    expect(some.code).toBe(4);
    expect(taskStates(env)).toEqual({
      'img-1': 'pending',
      'img-2': 'done',
      'img-3': 'pending',
      'hero-1': 'done',
      'hero-2': 'done',
    });
    const none = await env.run(['run', file, '--yes', '--only', 'heros-*']);
    expect(none.code).toBe(1);
    expect(reason(none)).toBe(
      '--only: no task matches heros-*; task ids of this manifest look like: img-1, img-2, img-3, hero-1, hero-2',
    );
  });

  it('--retry-failed submits failed (refunded) and rejected tasks again as new attempts', async () => {
    env = await makeRunEnv({ failRate: 1 });
    const file = await env.manifest({ tasks: images(2) });
    expect((await env.run(['run', file, '--yes'])).code).toBe(2);
    expect(taskStates(env)).toEqual({ 'img-1': 'failed', 'img-2': 'failed' });
    env.sandbox.configure({ failRate: 0 });
    const again = await env.run(['run', file, '--yes', '--retry-failed']);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('--retry-failed: 2 failed or rejected task(s) will be submitted again');
    expect(taskStates(env)).toEqual({ 'img-1': 'done', 'img-2': 'done' });
    const jobs = env.state().jobs;
    expect(jobs).toHaveLength(4);
    expect(Math.round(jobs.reduce((n, j) => n + j.cost - j.refunded, 0) * 1e6) / 1e6).toBe(0.4);
    expect(
      env.query<{ n: number }>("SELECT count(*) AS n FROM attempts WHERE outcome = 'submitted'")[0]?.n,
    ).toBe(4);
  });

  it('--allow-partial fits what fits: a task over the remaining budget is skipped, cheaper ones go on', async () => {
    env = await makeRunEnv();
    const voice = {
      id: 'voice',
      model: 'speech-v3',
      input: { text: 'A longer line that costs two tokens.' },
    };
    const file = await env.manifest({
      tasks: [...images(1), voice, ...images(3, 'late')],
      budget: 1.5,
      concurrency: 1,
    });
    const result = await env.run(['run', file, '--yes', '--allow-partial']);
    expect(result.code).toBe(4);
    expect(taskStates(env)).toEqual({
      'img-1': 'done',
      voice: 'pending',
      'late-1': 'done',
      'late-2': 'done',
      'late-3': 'done',
    });
    expect(reason(result)).toBe(
      `1 task(s) did not fit under the budget of 1.5 tokens (0.7 tokens left; they need up to 2 tokens): raise budget and run again to continue: \`mediabatch run batch.yaml --run-id batch --state ${env.db} --allow-partial\``,
    );
  });
});

describe('report.json carries each request', () => {
  it('the body as sent, without the callback URL', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(1) });
    expect((await env.run(['run', file, '--yes'])).code).toBe(0);
    const report = JSON.parse(await readFile(join(env.dir, 'out/batch/report.json'), 'utf8')) as {
      tasks: { id: string; request: unknown }[];
    };
    expect(report.tasks[0]?.request).toEqual({ model: 'flat-image', prompt: 'img number 1' });
  });
});

describe('file_name: names users can feed to other tools', () => {
  it('"{{id}}" puts each result at <output>/<run>/<id>.<ext>; job.json stays in the task folder', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: images(2) });
    const text = await readFile(join(env.dir, file), 'utf8');
    await writeFile(join(env.dir, file), `file_name: "{{id}}"\n${text}`);
    const result = await env.run(['run', file, '--yes']);
    expect(result.code).toBe(0);
    const files = await env.files('out/batch');
    expect(files).toEqual(
      expect.arrayContaining(['img-1.png', 'img-2.png', 'img-1/job.json', 'img-2/job.json']),
    );
    expect(files).not.toContain('img-1/1.png');
    const job = JSON.parse(await readFile(join(env.dir, 'out/batch/img-1/job.json'), 'utf8')) as {
      files: string[];
    };
    expect(job.files).toEqual(['img-1.png']);
  });

  it('validate refuses unsafe and colliding names, located', async () => {
    env = await makeRunEnv();
    await writeFile(
      join(env.dir, 'names.yaml'),
      [
        'version: 1',
        'name: names',
        'tasks:',
        '  - id: "shot-{{p}}"',
        '    model: flat-image',
        '    file_name: "{{p}}"',
        '    matrix: { p: [Mug, mug] }',
        '    input: { prompt: x }',
        '  - id: up',
        '    model: flat-image',
        '    file_name: "../escape"',
        '    input: { prompt: y }',
        '',
      ].join('\n'),
    );
    const result = await env.run(['validate', 'names.yaml']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      'names.yaml:6:16  task shot-mug  file_name: renders to "mug", which task shot-Mug has too: file names must differ (letter case aside)',
    );
    expect(result.stderr).toContain(
      'names.yaml:11:16  task up  file_name: must be one file name, without / or \\, got "../escape"',
    );
  });
});
