// A dated run id (`run: "{{name}}-{{date}}"`) resumed after midnight resumes the unfinished
// run instead of starting (and paying for) a new one; --new-run starts one and says what the old owes.
// And a budget reached with tasks in flight ends the run instead of waiting forever.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hintIn, images, makeRunEnv, type RunEnv, reason } from '../helpers/run-env.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

async function dated(e: RunEnv, n: number): Promise<string> {
  const file = await e.manifest({ tasks: images(n), concurrency: 2 });
  const text = await readFile(join(e.dir, file), 'utf8');
  await writeFile(join(e.dir, file), `run: "{{name}}-{{date}}"\n${text}`);
  return file;
}

const day1 = () => new Date('2026-11-23T23:50:00Z');
const day2 = () => new Date('2026-11-24T00:10:00Z');

describe('run: a dated run resumed after the date changed', () => {
  it('resumes the unfinished run of the manifest: nothing paid twice, its results fetched, one run', async () => {
    env = await makeRunEnv();
    const file = await dated(env, 4);
    // The first run's results cannot be fetched yet: it ends unfinished (exit 4), all four paid.
    env.sandbox.configure({ refuseDownloads: true });
    const first = await env.run(['run', file, '--yes'], { now: day1 });
    expect(first.code).toBe(4);
    expect(env.state().jobs).toHaveLength(4);

    env.sandbox.configure({ refuseDownloads: false });
    const second = await env.run(['run', file, '--yes'], { now: day2 });
    expect(second.code).toBe(0);
    expect(second.stdout).toMatch(
      /^Resuming run batch-2026-11-23 of this manifest, started \d+ min ago and unfinished \(pass --new-run to start batch-2026-11-24 instead\)\.$/m,
    );
    expect(env.state().jobs).toHaveLength(4);
    expect(env.query<{ id: string }>('SELECT id FROM runs')).toEqual([{ id: 'batch-2026-11-23' }]);
    expect(await env.files('out/batch-2026-11-23')).toEqual(
      expect.arrayContaining(['img-1/1.png', 'img-2/1.png', 'img-3/1.png', 'img-4/1.png']),
    );
  });

  it("--new-run starts the new date's run and says how many tasks the older one still owes", async () => {
    env = await makeRunEnv();
    const file = await dated(env, 2);
    env.sandbox.configure({ refuseDownloads: true });
    expect((await env.run(['run', file, '--yes'], { now: day1 })).code).toBe(4);
    env.sandbox.configure({ refuseDownloads: false });
    const fresh = await env.run(['run', file, '--yes', '--new-run'], { now: day2 });
    expect(fresh.stdout).toContain(
      `--new-run: run batch-2026-11-23 of this manifest is unfinished and still owes 2 paid or possibly paid task(s); resume it later with \`mediabatch run batch.yaml --run-id batch-2026-11-23 --state ${env.db}\`.`,
    );
    expect(fresh.code).toBe(0);
    expect(env.query<{ id: string }>('SELECT id FROM runs ORDER BY id')).toEqual([
      { id: 'batch-2026-11-23' },
      { id: 'batch-2026-11-24' },
    ]);
    // Typed as printed on a third day, it resumes the older run (fetching what it paid for), not a new one.
    const jobs = env.state().requests.submit;
    const older = await env.type(
      hintIn(fresh.stdout.split('\n').find((l) => l.startsWith('--new-run')) ?? ''),
      {
        now: () => new Date('2026-11-25T09:00:00Z'),
      },
    );
    expect(older.code).toBe(0);
    expect(older.stdout).toContain('Resuming run batch-2026-11-23');
    expect(env.state().requests.submit).toBe(jobs);
    expect(env.query<{ id: string }>('SELECT id FROM runs ORDER BY id')).toHaveLength(2);
  });
});

describe('run: a budget reached with tasks in flight', () => {
  it('ends by itself (exit 4) with prices whose float sums drift (0.2 and 2 tokens)', async () => {
    env = await makeRunEnv();
    const speech = (n: number) => ({ id: `voice-${n}`, model: 'speech-v3', input: { text: `Line ${n}.` } });
    const file = await env.manifest({
      tasks: [...images(1), speech(1), speech(2), speech(3)],
      concurrency: 2,
      budget: 4.3,
    });
    const result = await env.run(['run', file, '--yes', '--allow-partial']);
    expect(result.code).toBe(4);
    expect(reason(result)).toMatch(
      // Which line depends on whether voice-3 is looked at before or after the answers in flight: both
      // say the budget stopped the run; what matters is that it ends.
      /^(1 task\(s\) did not fit under the budget of 4\.3 tokens \(0\.1 tokens left; they need up to 2 tokens\)|the budget of 4\.3 tokens cannot cover the next task \(voice-3, up to 2 tokens\))/,
    );
    const paid = env.state().jobs.reduce((n, j) => n + j.cost - j.refunded, 0);
    expect(Math.round(paid * 1e6) / 1e6).toBe(4.2);
  }, 20_000);
});
