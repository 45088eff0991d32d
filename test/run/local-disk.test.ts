// A full or read-only output disk never turns paid results into failures. Before the first
// POST the output folder is checked; a disk that fills up mid-run stops new submissions, leaves the paid
// tasks unfetched (exit 4), and the same command fetches them once there is room. Real tmpfs mounts.

import { execFileSync } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { images, makeRunEnv, type RunEnv, reason, taskStates } from '../helpers/run-env.js';
import { cannotMount, mountTmpfs, remountReadOnly } from '../util/mount.js';

let env: RunEnv | undefined;
let unmount: (() => void) | undefined;
afterEach(async () => {
  unmount?.();
  unmount = undefined;
  await env?.close();
  env = undefined;
});

async function outputOnTmpfs(e: RunEnv, sizeKiB: number): Promise<string> {
  const out = join(e.dir, 'out');
  await mkdir(out, { recursive: true });
  unmount = mountTmpfs(out, sizeKiB);
  return out;
}

describe.skipIf(cannotMount !== undefined)('run: the output disk', () => {
  it('a read-only output folder is refused before anything is submitted (exit 3)', async () => {
    env = await makeRunEnv();
    const out = await outputOnTmpfs(env, 1024);
    remountReadOnly(out);
    const file = await env.manifest({ tasks: images(2) });
    const result = await env.run(['run', file, '--yes']);
    expect(result.code).toBe(3);
    expect(reason(result)).toMatch(
      /^refused: the output folder out\/batch cannot be written \(EROFS\): fix its permissions or choose another output\. Nothing was submitted$/,
    );
    expect(env.state().jobs).toHaveLength(0);
  });

  it('an output folder without room for the expected results is refused (exit 3) unless --allow-partial', async () => {
    env = await makeRunEnv();
    await outputOnTmpfs(env, 512);
    const file = await env.manifest({ tasks: images(3) });
    const result = await env.run(['run', file, '--yes']);
    expect(result.code).toBe(3);
    expect(reason(result)).toMatch(
      /^refused: the output folder out\/batch has 1 MB free, and the results of this run are likely to need about 12 MB: free space, or run with --allow-partial/,
    );
    expect(env.state().jobs).toHaveLength(0);
  });

  it('a disk that fills up mid-run: paid results stay unfetched, submitting stops (exit 4), and the next run fetches them', async () => {
    env = await makeRunEnv();
    const out = await outputOnTmpfs(env, 48);
    const file = await env.manifest({ tasks: images(12), concurrency: 2 });
    const first = await env.run(['run', file, '--yes', '--allow-partial']);
    expect(first.code).toBe(4);
    // The preflight says what it found and what --allow-partial, given, does: not to give it.
    expect(first.stdout).toMatch(
      /^ {2}--allow-partial: the output folder out\/batch has \S+ MB free, and the results of this run are likely to need about 48 MB; the run stops cleanly when the disk is full$/m,
    );
    expect(reason(first)).toMatch(
      // The disk fills while a result or its job.json is written, whichever comes first: one sentence.
      /^no space left on device writing .*\/out\/batch\/img-\d+\/(1\.png|job\.json): free space, then run again; the result is paid and still on the service: `mediabatch run batch\.yaml --run-id batch --state .*state\.db --allow-partial`$/,
    );
    const states = Object.values(taskStates(env));
    expect(states).toContain('unfetched');
    // Submitting stopped: not every task was paid for.
    const paid = env.state().jobs.length;
    expect(paid).toBeLessThan(12);
    expect(states.filter((s) => s === 'pending').length).toBe(12 - paid);

    execFileSync('mount', ['-o', 'remount,size=65536k', out]);
    const second = await env.run(['run', file, '--yes']);
    expect(second.code).toBe(0);
    expect(Object.values(taskStates(env))).toEqual(Array(12).fill('done'));
    // Each task charged once: the unfetched ones were fetched, not submitted again.
    expect(env.state().jobs).toHaveLength(12);
  });
});
