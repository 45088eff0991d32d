// Every example manifest under manifests/ runs against the embedded sandbox, as the README promises:
// `mediabatch run manifests/X.yaml --sandbox --yes` exits 0 with every result on disk.
import { readdirSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cli } from '../helpers/cli.js';
import { FAST_POLLS } from '../helpers/run-env.js';

const MANIFESTS = resolve('manifests');
const EXAMPLES = readdirSync(MANIFESTS)
  .filter((name) => name.endsWith('.yaml'))
  // Local inputs need a bucket: test/storage/local-inputs-manifest.test.ts runs it with an S3 server.
  .filter((name) => name !== 'local-inputs.yaml')
  .sort();

interface ReportTask {
  id: string;
  status: string;
  files: { path: string; bytes: number }[];
}

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mb-examples-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('the example manifests', () => {
  it('are all here, those that need input media among them', () => {
    // A guard on the list below: were manifests/ not found, every case would pass by running nothing.
    expect(EXAMPLES).toEqual(
      expect.arrayContaining([
        'dance.yaml',
        'demo.yaml',
        'face-swap.yaml',
        'pipeline.yaml',
        'song-section.yaml',
        'talking-avatar.yaml',
        'voice-cover.yaml',
      ]),
    );
  });

  it.each(EXAMPLES)('%s runs with --sandbox and exits 0 with every result on disk', async (name) => {
    const result = await cli(
      [
        '--state',
        join(dir, 'state.db'),
        'run',
        join(MANIFESTS, name),
        '--sandbox',
        '--yes',
        '--sandbox-speed',
        '0',
      ],
      { cwd: dir, env: { MEDIABATCH_POLL_SCALE: FAST_POLLS }, now: () => new Date() },
    );
    expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: '' });
    const runs = readdirSync(join(dir, 'out'));
    expect(runs).toHaveLength(1);
    const runDir = join(dir, 'out', runs[0] ?? '');
    const report = JSON.parse(await readFile(join(runDir, 'report.json'), 'utf8')) as { tasks: ReportTask[] };
    expect(report.tasks.length).toBeGreaterThan(0);
    for (const task of report.tasks) {
      expect({ id: task.id, status: task.status }).toEqual({ id: task.id, status: 'done' });
      expect(task.files.length).toBeGreaterThan(0);
      for (const file of task.files) {
        expect((await stat(join(runDir, file.path))).size).toBe(file.bytes);
      }
    }
  });
});
