import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli } from '../helpers/cli.js';
import { folder, lines } from './helpers.js';

const examples = readdirSync(join(import.meta.dirname, '..', '..', 'manifests'))
  .filter((name) => name.endsWith('.yaml'))
  .map((name) => `manifests/${name}`);

// Every kind of mistake at once; line numbers matter, so keep the layout.
const BROKEN = `version: 1
name: broken
concurency: 4
defaults:
  speech-v3: { speed: 1.5 }
tasks:
  - id: typo
    model: flat-image
    input:
      prompt: a mug
      ratoi: "1:1"
  - id: too-long
    model: stream-2-0-fast
    input:
      prompt: a wave
      duration: 16
  - id: studio
    model: studio-2-6
    input:
      prompt: a kitchen
      generate_audio: true
      resolution: 720p
  - id: greeting
    model: speech-v3
    input:
      text: "Hello {{customer}}"
  - id: slow
    model: speech-v3
    input:
      text: Welcome
  - id: slow
    model: flat-image
    input:
      prompt: a cup
  - id: "shot-{{size}}"
    model: flat-image
    matrix:
      size: large
    input:
      prompt: a plate
`;

const BROKEN_LINES = [
  'broken.yaml:3:1  concurency: unknown key "concurency"; known keys are: version, name, run, schedule, timezone, concurrency, order, budget, file_name, retries, review, budget_per_period, output, callback_url, listen, vars, defaults, tasks',
  // speed comes from defaults, so it is located there, not at the task; greeting's template error does
  // not hide it there, and the two tasks that take it are one line
  'broken.yaml:5:23  2 tasks (greeting, slow)  input.speed: must be a number from 0.7 to 1.2, got 1.5',
  'broken.yaml:11:14  task typo  input.ratoi: unknown field; known fields are: prompt, ratio',
  'broken.yaml:16:17  task too-long  input.duration: must be an integer from 4 to 15, got 16',
  'broken.yaml:21:23  task studio  input.generate_audio: native audio requires resolution 1080p, got 720p',
  'broken.yaml:26:20  task greeting  input.text: unknown name "customer"; known names are: date, datetime, index, name, run',
  'broken.yaml:31:5  task slow  id: duplicate task id, made by tasks.4 at broken.yaml:27:5 and by tasks.5 at broken.yaml:31:5; make ids unique, e.g. with a matrix name, {{row.<field>}} or {{index}}',
  'broken.yaml:38:13  tasks.6.matrix.size: must be a list, got "large"',
];

describe('validate', () => {
  it.each(examples)('accepts the example %s', async (file) => {
    const r = await cli(['validate', file]);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(new RegExp(`^${file}: valid, \\d+ tasks?`));
    expect(r.code).toBe(0);
  });

  it('accepts every example at once, one line each (and a note for local files)', async () => {
    const r = await cli(['validate', ...examples]);
    expect(r.code).toBe(0);
    expect(lines(r.stdout).filter((line) => !line.startsWith('  '))).toHaveLength(examples.length);
    expect(r.stdout).toContain(
      'manifests/local-inputs.yaml: valid, 4 tasks (2 video-face-swap, 1 ai_dance_move, 1 voice-cover)\n  4 local files (file:): `run` uploads them to the bucket of storage: in mediabatch.config.yaml (or MEDIABATCH_STORAGE_URL) and refuses without one\n',
    );
    expect(r.stdout).toContain(
      'manifests/demo.yaml: valid, 12 tasks (5 flat-image, 3 speech-v3, 1 oc-maker, 2 anime-waifu, 1 flow22_spicy)\n',
    );
  });

  it('prints every problem, located, then one line saying how many and what to do', async () => {
    const cwd = await folder({ 'broken.yaml': BROKEN });
    const r = await cli(['validate', 'broken.yaml'], { cwd });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(lines(r.stderr)).toEqual([
      ...BROKEN_LINES,
      'mediabatch: 8 problems in broken.yaml; fix them and run again',
    ]);
  });

  it('reports the problems of every manifest given, and the valid ones as valid', async () => {
    const cwd = await folder({
      'broken.yaml': BROKEN,
      'good.yaml': 'version: 1\nname: good\ntasks:\n  - { id: a, model: flat-image, input: { prompt: x } }\n',
      'also-bad.yaml':
        'version: 1\nname: also-bad\ntasks:\n  - id: a\n    model: speech-v3\n    input: { text: "" }\n',
    });
    const r = await cli(['validate', 'broken.yaml', 'good.yaml', 'also-bad.yaml'], { cwd });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('good.yaml: valid, 1 task (1 flat-image)\n');
    expect(lines(r.stderr)).toEqual([
      ...BROKEN_LINES,
      'also-bad.yaml:6:20  task a  input.text: must be 1 to 5000 characters, got 0',
      'mediabatch: 9 problems in broken.yaml, also-bad.yaml; fix them and run again',
    ]);
  });

  it('names a manifest that does not exist, with the others still checked', async () => {
    const cwd = await folder({});
    const r = await cli(['validate', 'missing.yaml', `${process.cwd()}/manifests/demo.yaml`], { cwd });
    expect(r.code).toBe(1);
    expect(lines(r.stderr)).toEqual([
      'missing.yaml: no such file; check the path of the manifest',
      'mediabatch: 1 problem in missing.yaml; fix it and run again',
    ]);
    expect(r.stdout).toContain('demo.yaml: valid, 12 tasks');
  });

  it('folds a rule broken by a thousand tasks into one line with the count and the first ids', async () => {
    const cwd = await folder({
      'many.yaml': `version: 1
name: many
tasks:
  - id: "img-{{index}}"
    model: flat-image
    repeat: 1000
    input: { prompt: x, ratio: "5:4" }
`,
    });
    const r = await cli(['validate', 'many.yaml'], { cwd });
    expect(r.code).toBe(1);
    expect(lines(r.stderr)).toEqual([
      'many.yaml:7:32  1,000 tasks (img-1, img-2, img-3, …)  input.ratio: must be one of 1:1, 2:3, 3:2, 4:3, 3:4, 16:9, 9:16, got "5:4"',
      'mediabatch: 1 problem in many.yaml; fix it and run again',
    ]);
  });

  describe('--json', () => {
    it('gives every problem with its place, task, field and rule', async () => {
      const cwd = await folder({ 'broken.yaml': BROKEN });
      const r = await cli(['validate', '--json', 'broken.yaml', `${process.cwd()}/manifests/speech.yaml`], {
        cwd,
      });
      expect(r.code).toBe(1);
      expect(lines(r.stderr)).toEqual(['mediabatch: 8 problems in broken.yaml; fix them and run again']);
      const out = JSON.parse(r.stdout);
      expect(out.ok).toBe(false);
      expect(out.problems).toBe(8);
      expect(out.manifests).toHaveLength(2);
      const [broken, speech] = out.manifests;
      expect(broken.file).toBe('broken.yaml');
      expect(broken.ok).toBe(false);
      expect(broken.problems.map((p: { text: string }) => p.text)).toEqual(BROKEN_LINES);
      expect(broken.problems[1]).toEqual({
        file: 'broken.yaml',
        line: 5,
        col: 23,
        task: 'greeting',
        tasks: 2,
        taskIds: ['greeting', 'slow'],
        path: 'input.speed',
        message: 'must be a number from 0.7 to 1.2, got 1.5',
        text: BROKEN_LINES[1],
      });
      expect(broken.problems[0].task).toBeUndefined();
      expect(speech).toEqual({
        file: `${process.cwd()}/manifests/speech.yaml`,
        ok: true,
        tasks: 3,
        byModel: { 'speech-v3': 3 },
        problems: [],
      });
    });

    it('says ok when everything is valid', async () => {
      const r = await cli(['validate', '--json', 'manifests/demo.yaml']);
      expect(r.code).toBe(0);
      expect(r.stderr).toBe('');
      expect(JSON.parse(r.stdout)).toMatchObject({
        ok: true,
        problems: 0,
        manifests: [{ ok: true, tasks: 12 }],
      });
    });
  });
});
