import { describe, expect, it } from 'vitest';
import { combos, countCombos, matrixPlan } from '../../src/manifest/matrix.js';
import { loaded, manifest, problemsOf } from './helpers.js';

const idsOf = async (matrix: string, id: string) => {
  const { tasks } = await loaded(manifest(`  - id: "${id}"\n    model: flat-image\n    matrix:\n${matrix}`));
  return tasks.map((t) => t.id);
};

describe('matrix', () => {
  it('makes the cartesian product, first key outermost, minus exclude', async () => {
    const matrix = `      product: [mug, shirt, cap]
      style: [studio, outdoor]
      exclude: [{ product: cap, style: outdoor }]
`;
    expect(await idsOf(matrix, 'hero-{{product}}-{{style}}')).toEqual([
      'hero-mug-studio',
      'hero-mug-outdoor',
      'hero-shirt-studio',
      'hero-shirt-outdoor',
      'hero-cap-studio',
    ]);
  });

  it('excludes every combination matching a partial entry', async () => {
    const matrix = `      a: [1, 2]
      b: [x, y]
      c: [p, q]
      exclude: [{ a: 1 }, { b: y, c: q }]
`;
    expect(await idsOf(matrix, '{{a}}{{b}}{{c}}')).toEqual(['2xp', '2xq', '2yp']);
  });

  it('matches values that are objects when excluding', async () => {
    const matrix = `      size: [{ w: 1, h: 1 }, { w: 16, h: 9 }]
      exclude: [{ size: { h: 9, w: 16 } }]
`;
    expect(await idsOf(matrix, 's{{size.w}}x{{size.h}}')).toEqual(['s1x1']);
  });

  // The example of GitHub's documentation (jobs.<job_id>.strategy.matrix.include).
  it('extends and adds combinations with include as GitHub Actions does', () => {
    const plan = matrixPlan({
      fruit: ['apple', 'pear'],
      animal: ['cat', 'dog'],
      include: [
        { color: 'green' },
        { color: 'pink', animal: 'cat' },
        { fruit: 'apple', shape: 'circle' },
        { fruit: 'banana' },
        { fruit: 'banana', animal: 'cat' },
      ],
    });
    const expected = [
      { fruit: 'apple', animal: 'cat', color: 'pink', shape: 'circle' },
      { fruit: 'apple', animal: 'dog', color: 'green', shape: 'circle' },
      { fruit: 'pear', animal: 'cat', color: 'pink' },
      { fruit: 'pear', animal: 'dog', color: 'green' },
      { fruit: 'banana' },
      { fruit: 'banana', animal: 'cat' },
    ];
    expect(combos(plan)).toEqual(expected);
    expect(countCombos(plan)).toBe(expected.length);
  });

  it('makes one combination per include entry when there are no other keys', () => {
    const plan = matrixPlan({ include: [{ a: 1 }, { a: 2, b: 3 }] });
    expect(combos(plan)).toEqual([{ a: 1 }, { a: 2, b: 3 }]);
    expect(countCombos(plan)).toBe(2);
  });

  it('lets include add a name to matching combinations only', async () => {
    const matrix = `      product: [mug, cap]
      include: [{ product: mug, color: red }]
`;
    expect(await idsOf(matrix, '{{product}}')).toEqual(['mug', 'cap']);
    const problems = await problemsOf(
      manifest(
        `  - id: "{{product}}"\n    model: flat-image\n    matrix:\n${matrix}    input: { c: "{{color}}" }\n`,
      ),
    );
    expect(problems).toEqual([
      'm.yaml:9:18  task cap  input.c: unknown name "color"; known names are: date, datetime, index, name, product, run',
    ]);
  });

  it.each<[string, string[]]>([
    [
      '      product: [mug]\n      exclude: [{ size: xl }]\n',
      ['m.yaml:8:19  tasks.0.matrix.exclude.0.size: unknown matrix key "size"; matrix keys are: product'],
    ],
    ['      product: []\n', ['m.yaml:7:16  tasks.0.matrix.product: must not be an empty list']],
    ['      product: mug\n', ['m.yaml:7:16  tasks.0.matrix.product: must be a list, got "mug"']],
    [
      '      index: [1, 2]\n',
      [
        'm.yaml:7:7  tasks.0.matrix.index: "index" is a built-in template name (name, run, date, datetime, index, row, after); use another matrix key',
      ],
    ],
    [
      '      include: [{ row: 1 }]\n',
      [
        'm.yaml:7:19  tasks.0.matrix.include.0.row: "row" is a built-in template name (name, run, date, datetime, index, row, after); use another matrix key',
      ],
    ],
  ])('refuses %j', async (matrix, expected) => {
    expect(await problemsOf(manifest(`  - id: t\n    model: flat-image\n    matrix:\n${matrix}`))).toEqual(
      expected,
    );
  });
});
