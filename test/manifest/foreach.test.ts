import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { csvValue } from '../../src/manifest/foreach.js';
import { loadManifest } from '../../src/manifest/index.js';
import { loaded, manifest, NOW, problemsOf } from './helpers.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));

describe('foreach', () => {
  it('makes one task per row of CSV, JSON, JSONL and YAML files, relative to the manifest', async () => {
    const result = await loadManifest('test/fixtures/manifests/foreach.yaml', { now: NOW, cwd: repo });
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    const rows = [
      { text: 'Hello', voice: 'anna', speed: 1.1, line: 1 },
      { text: 'Bye, all', voice: '007', speed: -3.5, line: 2 },
    ];
    expect(result.manifest.tasks.map((t) => [t.id, t.input])).toEqual(
      ['csv', 'json', 'jsonl', 'yaml'].flatMap((format) => [
        [`${format}-1`, rows[0]],
        [`${format}-2`, rows[1]],
      ]),
    );
  });

  it.each<[string, string | number]>([
    ['12', 12],
    ['-3.5', -3.5],
    ['0', 0],
    ['0.10', 0.1],
    ['007', '007'],
    ['1e3', '1e3'],
    ['+1', '+1'],
    ['.5', '.5'],
    ['3.', '3.'],
    [' 12', ' 12'],
    ['', ''],
    ['12345678901234567890', '12345678901234567890'],
    ['0x10', '0x10'],
  ])('CSV value %j becomes %j', (text, value) => {
    expect(csvValue(text)).toBe(value);
  });

  it('takes the path from a template and reads each file once per matrix value', async () => {
    const { tasks } = await loaded(
      manifest(
        `  - id: "{{lang}}-{{row.n}}"
    model: speech-v3
    matrix: { lang: [en, fr] }
    foreach: "{{dir}}/{{lang}}.csv"
    input: { text: "{{row.text}}" }
`,
        'vars: { dir: data }\n',
      ),
      { 'data/en.csv': 'n,text\n1,Hello\n2,Bye\n', 'data/fr.csv': 'n,text\n1,Bonjour\n' },
    );
    expect(tasks.map((t) => [t.id, t.input.text])).toEqual([
      ['en-1', 'Hello'],
      ['en-2', 'Bye'],
      ['fr-1', 'Bonjour'],
    ]);
  });

  it.each<[string, Record<string, string>, string[]]>([
    [
      'data/nope.csv',
      {},
      [
        "m.yaml:6:14  tasks.0.foreach: cannot read data/nope.csv: no such file; the path is relative to the manifest's folder",
      ],
    ],
    [
      'data/rows.txt',
      { 'data/rows.txt': 'n\n1\n' },
      ['m.yaml:6:14  tasks.0.foreach: unsupported file type ".txt"; use .csv, .json, .jsonl, .yaml, .yml'],
    ],
    [
      'data/rows.csv',
      { 'data/rows.csv': 'n,text,text\n1,a,b\n2,a\n3,a,b,c\n' },
      [
        'data/rows.csv:1:1  tasks.0.foreach: column "text" appears twice in the header row',
        'data/rows.csv:3:1  tasks.0.foreach: row 2 has 2 values; the header has 3 (n, text, text)',
        'data/rows.csv:4:1  tasks.0.foreach: row 3 has 4 values; the header has 3 (n, text, text)',
      ],
    ],
    [
      'data/rows.json',
      { 'data/rows.json': '{ "n": 1 }' },
      ['data/rows.json:1:1  tasks.0.foreach: must be a JSON list of objects ([{...}, ...]), got an object'],
    ],
    [
      'data/rows.json',
      { 'data/rows.json': '[{ "n": 1 }, 5]' },
      ['data/rows.json:1:1  tasks.0.foreach: row 2 must be a mapping of fields, got 5'],
    ],
    [
      'data/rows.jsonl',
      { 'data/rows.jsonl': '{ "n": 1 }\n[1]\n' },
      ['data/rows.jsonl:2:1  tasks.0.foreach: row 2 must be a JSON object, got a list'],
    ],
    [
      'data/rows.yaml',
      { 'data/rows.yaml': '- n: 1\n- just text\n' },
      ['data/rows.yaml:2:3  tasks.0.foreach: row 2 must be a mapping of fields, got "just text"'],
    ],
    [
      'data/rows.yaml',
      { 'data/rows.yaml': 'n: 1\n' },
      ['data/rows.yaml:1:1  tasks.0.foreach: must be a YAML list of mappings (- key: value), got an object'],
    ],
  ])('%s is refused with a located problem', async (path, files, expected) => {
    const text = manifest(
      `  - id: "line-{{index}}"\n    model: speech-v3\n    foreach: ${path}\n    input: {}\n`,
    );
    expect(await problemsOf(text, files)).toEqual(expected);
  });

  // Node 20 gives no position for some JSON syntax errors; the line and column are used when it does.
  it('reports a JSON syntax error against the data file', async () => {
    const text = manifest('  - id: "line-{{index}}"\n    model: speech-v3\n    foreach: rows.json\n');
    const [problem] = await problemsOf(text, { 'rows.json': '[\n  { "n": 1 },\n  { "n": }\n]' });
    expect(problem).toMatch(/^rows\.json:\d+:\d+ {2}tasks\.0\.foreach: invalid JSON: /);
  });

  it('reports a missing row field once, at the placeholder, with the count of tasks it affects', async () => {
    const text = manifest(`  - id: "line-{{row.n}}"
    model: speech-v3
    foreach: rows.csv
    input: { text: "{{row.txt}}" }
`);
    expect(await problemsOf(text, { 'rows.csv': 'n,text\n1,a\n2,b\n3,c\n' })).toEqual([
      'm.yaml:7:21  3 tasks (line-1, line-2, line-3)  input.text: "row" has no field "txt"; its fields are: n, text',
    ]);
  });

  it('numbers rows with {{index}} and makes no task for an empty file', async () => {
    const text = manifest(`  - id: "a-{{index}}"
    model: speech-v3
    foreach: a.jsonl
  - id: b
    model: speech-v3
    foreach: b.csv
`);
    const { tasks } = await loaded(text, { 'a.jsonl': '{"x":1}\n{"x":2}\n', 'b.csv': '' });
    expect(tasks.map((t) => t.id)).toEqual(['a-1', 'a-2']);
  });
});
