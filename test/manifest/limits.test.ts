import { describe, expect, it } from 'vitest';
import { formatProblem, loadManifest } from '../../src/manifest/index.js';
import { loaded, loadText, manifest, NOW, problemsOf } from './helpers.js';

const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1).join(', ');

describe('limits', () => {
  it('refuses a manifest over 5 MB before parsing it', async () => {
    const load = (bytes: number) =>
      loadManifest('big.yaml', { now: NOW, cwd: '/work', readFile: async () => Buffer.alloc(bytes, '#') });
    const over = await load(5 * 1024 * 1024 + 1);
    expect(over.ok ? [] : over.problems.map(formatProblem)).toEqual([
      'big.yaml:1:1  the manifest is 5,242,881 bytes, more than the 5 MB limit; move rows into a foreach data file or split the manifest',
    ]);
    const atLimit = await load(5 * 1024 * 1024);
    expect(atLimit.ok ? [] : atLimit.problems.map(formatProblem)).toEqual([
      'big.yaml:1:1  the manifest is empty; start with "version: 1", a name and a list of tasks',
    ]);
  });

  it('stops an alias bomb at once', async () => {
    const levels = ['a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]'];
    for (let i = 1; i < 10; i++) {
      const prev = String.fromCharCode(96 + i);
      const name = String.fromCharCode(97 + i);
      levels.push(`${name}: &${name} [${Array(10).fill(`*${prev}`).join(', ')}]`);
    }
    const text = `version: 1\nname: demo\nvars:\n${levels.map((l) => `  ${l}`).join('\n')}\ntasks:\n  - { id: t, model: flat-image }\n`;
    // Expanded, the bomb would be 10^10 values: the test would never end, so ending is the check.
    const problems = await problemsOf(text);
    expect(problems).toEqual([
      'm.yaml:7:38  YAML aliases (*name) expand to more than 10000 values, which looks like an alias bomb; write the values out or use vars and defaults instead of anchors',
    ]);
  });

  it('accepts ordinary aliases', async () => {
    const { tasks } = await loaded(
      manifest(
        '  - id: a\n    model: flat-image\n    input: &common { prompt: cat }\n  - id: b\n    model: flat-image\n    input: *common\n',
      ),
    );
    expect(tasks.map((t) => t.input)).toEqual([{ prompt: 'cat' }, { prompt: 'cat' }]);
  });

  it.each<[string, string, string]>([
    [
      'repeat',
      '  - id: "t-{{index}}"\n    model: flat-image\n    repeat: 1000001\n',
      'm.yaml:4:5  tasks.0: task "t-{{index}}" expands to 1,000,001 tasks, more than the limit of 1,000,000 tasks per manifest; split it into several manifests',
    ],
    [
      'two tasks',
      `  - id: "m-{{a}}-{{b}}"\n    model: flat-image\n    matrix: { a: [${range(1000)}], b: [${range(1000)}] }\n  - id: one\n    model: flat-image\n`,
      'm.yaml:7:5  tasks.1: task "one" expands to 1 tasks, which brings the manifest to 1,000,001, more than the limit of 1,000,000 tasks per manifest; split it into several manifests',
    ],
    [
      'matrix × repeat',
      `  - id: "m-{{a}}-{{index}}"\n    model: flat-image\n    repeat: 3\n    matrix: { a: [${range(1000)}], exclude: [{ a: 1 }] }\n`,
      'm.yaml:4:5  tasks.0: task "m-{{a}}-{{index}}" expands to 2,997 tasks (999 matrix combinations × repeat 3), more than the limit of 2,000 tasks per manifest; split it into several manifests',
    ],
    [
      'matrix before exclude',
      `  - id: "m-{{a}}-{{b}}"\n    model: flat-image\n    matrix: { a: [${range(1001)}], b: [${range(1000)}], exclude: [{ a: 1 }] }\n`,
      'm.yaml:6:13  tasks.0.matrix: makes 1,001,000 combinations before exclude, more than the limit of 1,000,000 tasks per manifest; split the matrix across tasks or manifests',
    ],
  ])('refuses too many tasks quickly, without expanding them (%s)', async (label, tasks, expected) => {
    const maxTasks = label === 'matrix × repeat' ? 2000 : undefined;
    const problems = await problemsOf(manifest(tasks), {}, { maxTasks });
    expect(problems).toEqual([expected]);
  });

  it('counts foreach rows against the limit before expanding', async () => {
    const rows = `n\n${range(11).replaceAll(', ', '\n')}\n`;
    const text = manifest(
      '  - id: "r-{{row.n}}-{{k}}"\n    model: flat-image\n    matrix: { k: [x, y] }\n    foreach: rows.csv\n',
    );
    expect(await problemsOf(text, { 'rows.csv': rows }, { maxTasks: 21 })).toEqual([
      'm.yaml:4:5  tasks.0: task "r-{{row.n}}-{{k}}" expands to 22 tasks (2 matrix combinations × 11 rows), more than the limit of 21 tasks per manifest; split it into several manifests',
    ]);
  });

  it('loads 100,000 tasks from a CSV (its speed is measured by npm run bench, not here)', async () => {
    const lines = ['n,text,voice'];
    for (let i = 1; i <= 100_000; i++) lines.push(`${i},Line number ${i} of the script,v${i % 7}`);
    const text = `version: 1
name: big
defaults:
  speech-v3: { speed: 1.1, format: mp3 }
tasks:
  - id: "line-{{row.n}}"
    model: speech-v3
    foreach: lines.csv
    input: { text: "{{row.text}}", voice_id: "{{row.voice}}", extra: { fixed: [1, 2, 3] } }
`;
    const result = await loadText(text, { 'lines.csv': `${lines.join('\n')}\n` });
    if (!result.ok) throw new Error(result.problems.map(formatProblem).join('\n'));
    const { tasks } = result.manifest;
    expect(tasks).toHaveLength(100_000);
    expect(tasks[99_999]).toMatchObject({
      id: 'line-100000',
      input: { speed: 1.1, format: 'mp3', text: 'Line number 100000 of the script', voice_id: 'v5' },
    });
    expect(tasks[0]?.locate).toBe(tasks[99_999]?.locate);
  });
});

describe('prototype safety', () => {
  it('keeps __proto__ and constructor keys as data, never as prototypes', async () => {
    const text = `version: 1
name: demo
vars:
  __proto__: { polluted: vars }
  constructor: { prototype: { polluted: ctor } }
defaults:
  flat-image: { __proto__: { polluted: defaults }, ratio: "1:1" }
tasks:
  - id: "t-{{index}}"
    model: flat-image
    foreach: rows.json
    input:
      __proto__: { polluted: input }
      p: "{{row.p}}"
      q: "{{constructor.prototype.polluted}}"
  - id: "c-{{index}}"
    model: flat-image
    foreach: rows.csv
    matrix: { k: [1], include: [{ __proto__: { polluted: matrix } }] }
    input: { p: "{{row.p}}" }
`;
    const result = await loadText(text, {
      'rows.json': '[{ "__proto__": { "polluted": "row" }, "p": "x" }]',
      'rows.csv': '__proto__,p\nrow,y\n',
    });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty('polluted');
    if (!result.ok) throw new Error(result.problems.map(formatProblem).join('\n'));
    const [first, second] = result.manifest.tasks;
    expect(Object.getPrototypeOf(first?.input)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(first?.input, '__proto__')?.value).toEqual({ polluted: 'input' });
    expect(first?.input.p).toBe('x');
    expect(first?.input.q).toBe('ctor');
    expect(first?.input.ratio).toBe('1:1');
    expect(Object.keys(second?.input ?? {})).toEqual(['__proto__', 'ratio', 'p']);
    expect(second?.input.p).toBe('y');
    expect(Object.getOwnPropertyDescriptor(second?.input, '__proto__')?.value).toEqual({
      polluted: 'defaults',
    });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
