// The shard flags of validate, status and report (docs/shards.md), in-process against the embedded sandbox:
// a shard's share counted, its run shown and reported by --shard, and one line for what cannot be.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Report } from '../../src/report/schema.js';
import { cli } from '../helpers/cli.js';
import { folder } from './helpers.js';

const MANIFEST = `version: 1
name: split
concurrency: 4
budget: 10
output: out
tasks:
  - id: "img-{{index}}"
    model: flat-image
    repeat: 12
    input: { prompt: "split {{index}}" }
`;

describe('--shard on validate, status and report', () => {
  it('counts, shows and reports one shard', async () => {
    const dir = await folder({ 'split.yaml': MANIFEST });
    const at = { cwd: dir, env: { MEDIABATCH_POLL_SCALE: '0.01' } };
    const counts: number[] = [];
    for (const i of [1, 2]) {
      const v = await cli(['validate', 'split.yaml', '--shard', `${i}/2`, '--json'], at);
      expect(v.code).toBe(0);
      counts.push(JSON.parse(v.stdout).manifests[0].tasks as number);
    }
    const [first = 0, second = 0] = counts;
    expect(first + second).toBe(12);
    const text = await cli(['validate', 'split.yaml', '--shard', '1/2'], at);
    expect(text.stdout).toBe(
      `split.yaml: valid, ${first} tasks in shard 1 of 2 (of 12 tasks) (${first} flat-image)\n`,
    );

    const run = await cli(
      [
        '--state',
        's1.db',
        'run',
        'split.yaml',
        '--sandbox',
        '--sandbox-speed',
        '0',
        '--yes',
        '--shard',
        '1/2',
      ],
      at,
    );
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`Shard 1 of 2: ${first} of the manifest's 12 tasks`);

    const status = await cli(['--state', 's1.db', 'status', '--shard', '1/2'], at);
    expect(status.code).toBe(0);
    expect(status.stdout.split('\n')[0]).toBe('Run split.shard-1-of-2 (split.yaml)');
    const named = await cli(['--state', 's1.db', 'status', 'split', '--shard', '1/2'], at);
    expect(named.stdout).toBe(status.stdout);

    const report = await cli(['--state', 's1.db', 'report', '--shard', '1/2', '--json'], at);
    expect(report.code).toBe(0);
    expect(report.stderr).toBe(
      `Wrote report.shard-1-of-2.json, report.shard-1-of-2.csv, report.shard-1-of-2.md and index.shard-1-of-2.html in ${join('out', 'split')}\n`,
    );
    const written = JSON.parse(
      await readFile(join(dir, 'out', 'split', 'report.shard-1-of-2.json'), 'utf8'),
    ) as Report;
    expect(written.run.shard).toEqual({ index: 1, count: 2, run: 'split' });
    expect(written.tasks).toHaveLength(first);

    const other = await cli(['--state', 's1.db', 'status', '--shard', '2/2'], at);
    expect(other.code).toBe(1);
    expect(other.stderr).toBe(
      "mediabatch: no run of shard 2 of 2 in s1.db: name the run (`<run> --shard 2/2`), or use the shard's own --state\n",
    );
  }, 60_000);

  it.each([
    [
      ['validate', 'split.yaml', '--shard-from-env'],
      {},
      'mediabatch: --shard-from-env: none of MEDIABATCH_SHARD_INDEX, JOB_COMPLETION_INDEX, AWS_BATCH_JOB_ARRAY_INDEX, SLURM_ARRAY_TASK_ID is set; give --shard i/n instead\n',
    ],
    [
      ['validate', 'split.yaml', '--shard', '1/2', '--shard-from-env'],
      {},
      'mediabatch: --shard and --shard-from-env: give one of them\n',
    ],
    [
      ['plan', 'split.yaml', '--shard', '3/2'],
      {},
      'mediabatch: --shard 3/2: the shard index counts from 1 to 2, got 3\n',
    ],
    [
      ['status', '--shard', 'x'],
      {},
      'mediabatch: --shard: expected i/n with whole numbers, e.g. 1/3, got "x"\n',
    ],
    [
      ['validate', 'split.yaml', '--shard-from-env'],
      { AWS_BATCH_JOB_ARRAY_INDEX: '1' },
      'mediabatch: --shard-from-env: AWS_BATCH_JOB_ARRAY_INDEX gives the index, and nothing gives the count: set MEDIABATCH_SHARD_COUNT or --shard-count\n',
    ],
  ])('%j: one line, exit 1', async (args, env, line) => {
    const dir = await folder({ 'split.yaml': MANIFEST });
    const out = await cli(args, { cwd: dir, env });
    expect(out.code).toBe(1);
    expect(out.stderr).toBe(line);
  });

  it("--shard-from-env with --shard-count takes the engine's 0-based index", async () => {
    const dir = await folder({ 'split.yaml': MANIFEST });
    const byFlag = await cli(['validate', 'split.yaml', '--shard', '2/2'], { cwd: dir });
    const byEnv = await cli(['validate', 'split.yaml', '--shard-from-env', '--shard-count', '2'], {
      cwd: dir,
      env: { JOB_COMPLETION_INDEX: '1' },
    });
    expect(byEnv.code).toBe(0);
    expect(byEnv.stdout).toBe(byFlag.stdout);
  });
});
