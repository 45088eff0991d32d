import { describe, expect, it } from 'vitest';
import { formatProblem } from '../../src/manifest/index.js';
import { manifest, problemsOf } from './helpers.js';

describe('problems', () => {
  it('reports every problem of a manifest at once, located and in file order', async () => {
    const problems = await problemsOf(`version: 2
name: spring campaign
concurrency: 0
timezone: Mars/Olympus
callback_url: ftp://example.org/hook
listen: localhost
schedule: "every day"
colour: blue
vars: { brand: Acme }
tasks:
  - id: "a-{{brnd}}"
    model: flat-image
    modle: x
  - id: b
    model: flat-image
    input: { prompt: "{{ }}" }
  - id: c
    matrix: { size: [] }
  - id: d
    model: flat-image
  - id: d
    model: flat-image
`);
    expect(problems).toEqual([
      'm.yaml:1:10  version: must be 1, got 2',
      'm.yaml:2:7  name: must contain only letters, digits, - and _, got "spring campaign"',
      'm.yaml:3:14  concurrency: must be >= 1, got 0',
      'm.yaml:4:11  timezone: must be an IANA time zone, like Europe/Paris or UTC, got "Mars/Olympus"',
      'm.yaml:5:15  callback_url: must be an http or https URL, got "ftp://example.org/hook"',
      'm.yaml:6:9  listen: must be host:port, like 0.0.0.0:8788, got "localhost"',
      'm.yaml:7:11  schedule: must be a cron expression of 5 or 6 fields, like "0 3 * * *", got "every day"',
      'm.yaml:8:1  colour: unknown key "colour"; known keys are: version, name, run, schedule, timezone, concurrency, order, budget, file_name, retries, review, budget_per_period, output, callback_url, listen, vars, defaults, tasks',
      'm.yaml:11:12  tasks.0.id: unknown name "brnd"; known names are: brand, date, datetime, index, name, run',
      'm.yaml:13:5  tasks.0.modle: unknown key "modle"; known keys are: id, model, input, matrix, foreach, repeat, media_seconds, retries, review, file_name, after',
      'm.yaml:16:23  tasks.1.input.prompt: empty placeholder "{{ }}"; put a name inside, like {{brand}}',
      'm.yaml:17:5  tasks.2.model: is required',
      'm.yaml:18:21  tasks.2.matrix.size: must not be an empty list',
      'm.yaml:21:5  task d  id: duplicate task id, made by tasks.3 at m.yaml:19:5 and by tasks.4 at m.yaml:21:5; make ids unique, e.g. with a matrix name, {{row.<field>}} or {{index}}',
    ]);
  });

  it.each<[string, string[]]>([
    ['', ['m.yaml:1:1  the manifest is empty; start with "version: 1", a name and a list of tasks']],
    [
      '- a\n- b\n',
      ['m.yaml:1:1  the manifest must be a mapping (version: 1, name: ..., tasks: ...), got a list'],
    ],
    [
      'version: 1\nname: x\ntasks: [\n',
      [
        'm.yaml:4:1  invalid YAML: Flow sequence in block collection must be sufficiently indented and end with a ]',
      ],
    ],
    [
      'version: 1\nname: x\nname: y\ntasks:\n  - id: t\n    model: flat-image\n    id: u\n',
      [
        'm.yaml:3:1  duplicate key "name"; each key may appear only once here',
        'm.yaml:7:5  duplicate key "id"; each key may appear only once here',
      ],
    ],
    [
      'a: 1\n---\nb: 2\n',
      ['m.yaml:2:1  more than one YAML document (a second "---"); keep one document per file'],
    ],
    [
      'version: 1\nname: x\ntasks: []\nbudget: -1\n',
      ['m.yaml:3:8  tasks: must not be an empty list', 'm.yaml:4:9  budget: must be > 0, got -1'],
    ],
    [
      'version: 1\nname:\ntasks:\n  - { id: t, model: flat-image }\n',
      ['m.yaml:2:6  name: must be text, got nothing'],
    ],
    ['version: 1\ntasks:\n  - { id: t, model: flat-image }\n', ['m.yaml:1:1  name: is required']],
    [
      'version: 1\nname: x\ntasks:\n  - { id: t, model: flat-image }\n  - 3\n',
      ['m.yaml:5:5  tasks.1: must be a mapping (key: value), got 3'],
    ],
  ])('%j', async (text, expected) => {
    expect(await problemsOf(text)).toEqual(expected);
  });

  it.each<[string, string]>([
    [
      'listen: "127.0.0.1:70000"',
      'm.yaml:3:9  listen: must end with a port from 1 to 65535, got "127.0.0.1:70000"',
    ],
    [
      'run: "{{name}} {{date}}"',
      'm.yaml:3:6  run: the run id must contain only letters, digits, - and _, got "demo 2024-03-10"',
    ],
    [
      'run: "{{name}}-{{index}}"',
      'm.yaml:3:16  run: unknown name "index"; known names are: date, datetime, name',
    ],
    [
      'vars: { date: today }',
      'm.yaml:3:9  vars.date: "date" is a built-in template name (name, run, date, datetime, index, row, after); rename this var',
    ],
    [
      'defaults: { flat-image: { p: "{{" } }',
      'm.yaml:3:31  defaults.flat-image.p: unclosed "{{" in "{{"; close it with "}}"',
    ],
  ])('refuses %s', async (line, expected) => {
    expect(await problemsOf(manifest('  - id: t\n    model: flat-image\n', `${line}\n`))).toEqual([expected]);
  });

  it.each([
    [
      {
        pos: { file: 'm.yaml', line: 3, col: 7 },
        taskId: 'hero-mug',
        path: 'input.duration',
        message: 'must be 5 or 10, got 7',
      },
      'm.yaml:3:7  task hero-mug  input.duration: must be 5 or 10, got 7',
    ],
    [
      { pos: { file: 'm.yaml', line: 1, col: 1 }, path: 'name', message: 'is required' },
      'm.yaml:1:1  name: is required',
    ],
    [
      { pos: { file: 'm.yaml', line: 2, col: 1 }, path: '', message: 'invalid YAML' },
      'm.yaml:2:1  invalid YAML',
    ],
  ])('formats %j', (problem, text) => {
    expect(formatProblem(problem)).toBe(text);
  });
});
