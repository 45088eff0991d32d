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
// Every one, local-inputs.yaml too: with --sandbox its local files are kept and served by the embedded
// sandbox and `output: storage` becomes out/ (test/storage/local-inputs-manifest.test.ts runs it with a bucket).
const EXAMPLES = readdirSync(MANIFESTS)
  .filter((name) => name.endsWith('.yaml'))
  .sort();

interface ReportTask {
  id: string;
  status: string;
  files: { path: string; bytes: number }[];
}

let dir: string;

const runExample = (name: string, env: Record<string, string> = {}, sandbox = true) =>
  cli(
    [
      '--state',
      join(dir, 'state.db'),
      'run',
      join(MANIFESTS, name),
      ...(sandbox ? ['--sandbox', '--sandbox-speed', '0'] : []),
      '--yes',
    ],
    { cwd: dir, env: { MEDIABATCH_POLL_SCALE: FAST_POLLS, ...env }, now: () => new Date() },
  );

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
        'local-inputs.yaml',
        'pipeline.yaml',
        'song-section.yaml',
        'talking-avatar.yaml',
        'voice-cover.yaml',
      ]),
    );
  });

  it.each(EXAMPLES)('%s runs with --sandbox and exits 0 with every result on disk', async (name) => {
    const result = await runExample(name);
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

describe('local-inputs.yaml with --sandbox', () => {
  it('says that the sandbox keeps the local files and that the results go to out/, and uses the files themselves', async () => {
    const result = await runExample('local-inputs.yaml');
    expect(result.code).toBe(0);
    const lines = result.stdout.split('\n');
    expect(lines).toContain(
      'Output: storage has no bucket set, so with --sandbox the results go to the folder out/ (a run on the real service needs storage: in mediabatch.config.yaml)',
    );
    expect(lines).toContain(
      'Local inputs: kept by the embedded sandbox and linked from it (a run on the real service uploads them to the bucket of storage: in mediabatch.config.yaml)',
    );
    expect(lines).toContain('  Upload 4/4: local/jingle.wav uploaded');
    // The sandbox measured the jingle it serves itself: the voice cover lasts its 6 s (an input it could
    // not measure would give 30 s), as a WAV of 8,000 16-bit samples a second.
    const wav = await stat(join(dir, 'out/local-inputs/jingle-narrator/1.wav'));
    expect(wav.size).toBe(44 + 6 * 8000 * 2);
  });

  it('still needs a bucket without --sandbox, and says so', async () => {
    const result = await runExample(
      'local-inputs.yaml',
      { MEDIABATCH_API_KEY: 'sk-some-real-key', MEDIABATCH_BASE_URL: 'http://127.0.0.1:9' },
      false,
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('output: storage puts the results in the bucket of storage:');
  });
});
