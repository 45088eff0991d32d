// Choosing results: the README's review walkthrough with --sandbox across separate commands. Each
// `run --sandbox` starts its own embedded sandbox; its finished jobs are kept beside the state file
// (state/sandbox-jobs.jsonl, src/sandbox/journal.ts), so the run after `review --approve` still gets the
// upstream's job record and files, and the approved downstream is submitted and done.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeRunEnv, type RunEnv, type TaskDecl, taskStates } from '../helpers/run-env.js';

let env: RunEnv | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

const CHAIN: TaskDecl[] = [
  {
    id: 'still-{{index}}',
    model: 'flat-image',
    repeat: 2,
    review: true,
    input: { prompt: 'a mug {{index}}' },
  },
  {
    id: 'clip-{{index}}',
    model: 'studio-2-6',
    repeat: 2,
    after: 'still-{{index}}',
    input: { prompt: 'turn', image_url: '{{after.image}}', duration: 5, resolution: '720p' },
  },
];

describe('review with run --sandbox, across commands', () => {
  it('run (exit 4), review --approve, run again: the approved downstream is submitted and done', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({ tasks: CHAIN });
    const sandboxRun = ['run', file, '--sandbox', '--sandbox-speed', '0', '--yes'];
    const opts = { env: { MEDIABATCH_POLL_SCALE: '0.01' } };
    const first = await env.run(sandboxRun, opts);
    expect(first.code).toBe(4);
    const journal = join(dirname(env.db), 'sandbox-jobs.jsonl');
    // One line per finished job; the account's moves (a charge per job) are lines of their own.
    const jobLines = () =>
      readFileSync(journal, 'utf8')
        .trim()
        .split('\n')
        .filter((l) => !l.startsWith('{"account":'));
    expect(jobLines()).toHaveLength(2);

    const approved = await env.run([
      'review',
      'batch',
      '--approve',
      'still-1',
      '--reject',
      'still-2',
      '--sandbox',
    ]);
    expect({ code: approved.code, stderr: approved.stderr }).toEqual({ code: 0, stderr: '' });

    const second = await env.run(sandboxRun, opts);
    expect({ code: second.code, stderr: second.stderr }).toEqual({ code: 0, stderr: '' });
    // The closing line is the account's: a result rejected in review is shown as rejected, not done.
    expect(second.stdout).toContain('Run batch: 2 done, 1 rejected, 1 skipped\n');
    expect(taskStates(env)).toEqual({
      'still-1': 'done',
      'still-2': 'done',
      'clip-1': 'done',
      'clip-2': 'skipped',
    });
    expect(existsSync(join(env.dir, 'out', 'batch', 'clip-1', '1.mp4'))).toBe(true);
    // The test's own sandbox was never used: every job went to the embedded ones.
    expect(env.state().requests.submit).toBe(0);
    // The clip's job is kept too, for a later run.
    expect(jobLines()).toHaveLength(3);
  }, 60_000);
});
