import { describe, expect, it } from 'vitest';
import { loaded, manifest, problemsOf } from './helpers.js';

describe('repeat', () => {
  it('makes N copies numbered by {{index}}', async () => {
    const { tasks } = await loaded(
      manifest(
        '  - id: "take-{{index}}"\n    model: flat-image\n    repeat: 3\n    input: { seed: "{{index}}" }\n',
      ),
    );
    expect(tasks.map((t) => [t.id, t.input.seed])).toEqual([
      ['take-1', 1],
      ['take-2', 2],
      ['take-3', 3],
    ]);
  });

  it('expands matrix combinations × rows × copies in that order; {{index}} is the copy number', async () => {
    const { tasks } = await loaded(
      manifest(`  - id: "{{style}}-{{row.n}}-{{index}}"
    model: flat-image
    matrix: { style: [a, b] }
    foreach: rows.csv
    repeat: 2
`),
      { 'rows.csv': 'n\n1\n2\n' },
    );
    expect(tasks.map((t) => t.id)).toEqual([
      'a-1-1',
      'a-1-2',
      'a-2-1',
      'a-2-2',
      'b-1-1',
      'b-1-2',
      'b-2-1',
      'b-2-2',
    ]);
  });

  it.each([[0], [1.5], ['"two"']])('refuses repeat: %s', async (value) => {
    const problems = await problemsOf(manifest(`  - id: t\n    model: flat-image\n    repeat: ${value}\n`));
    expect(problems).toEqual([
      {
        0: 'm.yaml:6:13  tasks.0.repeat: must be >= 1, got 0',
        1.5: 'm.yaml:6:13  tasks.0.repeat: must be a whole number, got 1.5',
        '"two"': 'm.yaml:6:13  tasks.0.repeat: must be a number, got "two"',
      }[value],
    ]);
  });
});

describe('defaults', () => {
  const text = `version: 1
name: demo
vars: { brand: Acme }
defaults:
  flat-image:
    ratio: "1:1"
    style: { light: soft }
    prompt: "a {{brand}} thing"
    caption: "{{brand}} #{{index}}"
  speech-v3: { speed: 1.1 }
tasks:
  - id: "img-{{index}}"
    model: flat-image
    repeat: 2
    input:
      prompt: "a {{brand}} mug"
      style: { color: red }
  - id: "{{m}}"
    model: "{{m}}"
    matrix: { m: [speech-v3, anime-waifu] }
    input: { text: hi }
`;

  it('merges the model defaults under each input: task fields win field by field, templates render per task', async () => {
    const { tasks } = await loaded(text);
    expect(tasks.map((t) => [t.id, t.input])).toEqual([
      ['img-1', { ratio: '1:1', caption: 'Acme #1', prompt: 'a Acme mug', style: { color: 'red' } }],
      ['img-2', { ratio: '1:1', caption: 'Acme #2', prompt: 'a Acme mug', style: { color: 'red' } }],
      ['speech-v3', { speed: 1.1, text: 'hi' }],
      ['anime-waifu', { text: 'hi' }],
    ]);
    expect(tasks[0]?.input).not.toBe(tasks[1]?.input);
  });

  it('locates each input field where it was written, in the task or in defaults', async () => {
    const { tasks } = await loaded(text);
    const [image, , speech] = tasks;
    const at = (pos: { line: number; col: number } | undefined) => `${pos?.line}:${pos?.col}`;
    expect(at(image?.locate('prompt'))).toBe('16:15');
    expect(at(image?.locate('style.color'))).toBe('17:23');
    expect(at(image?.locate('style.size'))).toBe('17:14');
    expect(at(image?.locate('ratio'))).toBe('6:12');
    expect(at(image?.locate('caption'))).toBe('9:14');
    expect(at(image?.locate('quality'))).toBe('16:7');
    expect(at(speech?.locate('speed'))).toBe('10:23');
    expect(at(image?.pos)).toBe('12:5');
  });

  it('refuses defaults for a model that does not exist', async () => {
    const problems = await problemsOf(
      manifest('  - id: t\n    model: flat-image\n', 'defaults:\n  flat-imag: {}\n'),
    );
    expect(problems).toEqual([
      'm.yaml:4:3  defaults.flat-imag: unknown model "flat-imag": defaults is keyed by model id, with that model\'s request fields under it, like defaults: { flat-image: { ratio: "16:9" } }; known models are: ai-talking-avatar-video, studio-2-6, ai_dance_move, flow22_spicy, stream-2-0-fast, video-face-swap, flat-image, anime-waifu, pixel-lite, oc-maker, speech-v3, song-replace-section, voice-cover',
    ]);
  });

  it('says that defaults is keyed by model id when it is written as a default model', async () => {
    const flat = await problemsOf(
      manifest('  - id: t\n    model: flat-image\n', 'defaults: { model: flat-image }\n'),
    );
    expect(flat).toEqual([
      'm.yaml:3:13  defaults.model: unknown model "model": defaults is keyed by model id, with that model\'s request fields under it, like defaults: { flat-image: { ratio: "16:9" } }; known models are: ai-talking-avatar-video, studio-2-6, ai_dance_move, flow22_spicy, stream-2-0-fast, video-face-swap, flat-image, anime-waifu, pixel-lite, oc-maker, speech-v3, song-replace-section, voice-cover',
    ]);
    const speech = await problemsOf(
      manifest('  - id: t\n    model: speech-v3\n', 'defaults:\n  model: speech-v3\n'),
    );
    expect(speech).toEqual([
      'm.yaml:4:3  defaults.model: unknown model "model": defaults is keyed by model id, with that model\'s request fields under it, like defaults: { speech-v3: { <field>: <value> } }; known models are: ai-talking-avatar-video, studio-2-6, ai_dance_move, flow22_spicy, stream-2-0-fast, video-face-swap, flat-image, anime-waifu, pixel-lite, oc-maker, speech-v3, song-replace-section, voice-cover',
    ]);
  });
});

describe('duplicate task ids', () => {
  it('names both sources with the values that made them', async () => {
    const problems = await problemsOf(
      manifest(`  - id: "shot-{{product}}"
    model: flat-image
    matrix: { product: [mug, cap] }
  - id: "shot-{{row.name}}"
    model: flat-image
    foreach: rows.csv
`),
      { 'rows.csv': 'name\nhat\ncap\n' },
    );
    expect(problems).toEqual([
      'm.yaml:7:5  task shot-cap  id: duplicate task id, made by tasks.0 at m.yaml:4:5 (product=cap) and by tasks.1 at m.yaml:7:5 (row 2); make ids unique, e.g. with a matrix name, {{row.<field>}} or {{index}}',
    ]);
  });

  it('names the first task by its combination, row and copy when it is deep in a declaration', async () => {
    const problems = await problemsOf(
      manifest(`  - id: "x-{{size}}-{{row.name}}-{{index}}"
    model: flat-image
    matrix: { size: [s, m] }
    foreach: rows.csv
    repeat: 2
  - id: x-m-b-2
    model: flat-image
`),
      { 'rows.csv': 'name\na\nb\n' },
    );
    expect(problems).toEqual([
      'm.yaml:9:5  task x-m-b-2  id: duplicate task id, made by tasks.0 at m.yaml:4:5 (size=m, row 2, copy 2) and by tasks.1 at m.yaml:9:5; make ids unique, e.g. with a matrix name, {{row.<field>}} or {{index}}',
    ]);
  });

  it('reports one problem per pair of declarations with the count of duplicates', async () => {
    const problems = await problemsOf(
      manifest('  - id: same\n    model: flat-image\n    repeat: 4\n  - id: other\n    model: flat-image\n'),
    );
    expect(problems).toEqual([
      'm.yaml:4:5  3 tasks (same)  id: duplicate task id, made by tasks.0 at m.yaml:4:5 (copy 1) and by tasks.0 at m.yaml:4:5 (copy 2); make ids unique, e.g. with a matrix name, {{row.<field>}} or {{index}}',
    ]);
  });
});

describe('rendered values', () => {
  it.each<[string, string]>([
    [
      '    media_seconds: "{{v.text}}"\n',
      'm.yaml:7:20  task t  media_seconds: must be a number > 0, got "x"',
    ],
    ['    media_seconds: 0\n', 'm.yaml:7:20  tasks.0.media_seconds: must be > 0, got 0'],
    [
      '    media_seconds: "12"\n',
      'm.yaml:7:20  tasks.0.media_seconds: must be a number > 0, or a {{placeholder}} that gives one, got "12"',
    ],
    [
      '    input: "{{v.n}}"\n',
      'm.yaml:7:12  task t  input: must render to a mapping of request fields, got 3',
    ],
    [
      '    input: 5\n',
      'm.yaml:7:12  tasks.0.input: must be a mapping of request fields, or one {{placeholder}} that gives one, got 5',
    ],
  ])('%j is refused', async (line, expected) => {
    const text = manifest(`  - id: t\n    model: flat-image\n${line}`, 'vars: { v: { text: x, n: 3 } }\n');
    expect(await problemsOf(text)).toEqual([expected]);
  });

  it('takes a whole input from a row', async () => {
    const { tasks } = await loaded(
      manifest(
        '  - id: "r{{index}}"\n    model: flat-image\n    foreach: rows.jsonl\n    input: "{{row.request}}"\n',
      ),
      { 'rows.jsonl': '{"request": {"prompt": "a cat", "n": 2}}\n' },
    );
    expect(tasks[0]?.input).toEqual({ prompt: 'a cat', n: 2 });
  });
});
