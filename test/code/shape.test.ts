// The shape of the code stays one a newcomer can find their way in. No cycles between files, imports that
// point one way down the layers of src/ (LAYERS in scripts/code-shape.ts, drawn in ARCHITECTURE.md),
// commands that only translate (small, none importing another), and no function over 80 lines that does
// not say why. Measured with the TypeScript compiler (scripts/code-shape.ts).

import { mkdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  fileCycles,
  importsOf,
  LAYERS,
  layerBreaks,
  longFunctions,
  tsFiles,
} from '../../scripts/code-shape.js';

const ROOT = resolve(import.meta.dirname, '../..');
const SRC = tsFiles(join(ROOT, 'src'));

describe('the code of mediabatch', () => {
  it('has no cycle between files (types two files share live in a third)', () => {
    expect(fileCycles(SRC, ROOT)).toEqual([]);
  });

  it('has no import from a lower layer of src/ to a higher one, type-only imports included', () => {
    expect(layerBreaks(SRC, ROOT)).toEqual([]);
  });

  it('places every folder and file of src/ in the layer order', () => {
    const placed = new Set(LAYERS.flat());
    const parts = new Set(SRC.map((f) => f.slice(join(ROOT, 'src').length + 1).split('/')[0]));
    expect([...parts].filter((p) => p !== undefined && !placed.has(p))).toEqual([]);
  });

  it('has no function over 80 lines whose first comment line does not start with "Long on purpose:"', () => {
    const unmarked = longFunctions(SRC, ROOT)
      .filter((f) => !f.marked)
      .map((f) => `${f.file} ${f.name}`);
    expect(unmarked).toEqual([]);
  });

  it('has command files under 300 lines that import no other command', () => {
    const commands = SRC.filter((f) => f.includes('/src/cli/commands/'));
    expect(commands.length).toBeGreaterThan(5);
    const known = new Set(SRC);
    for (const file of commands) {
      expect(readFileSync(file, 'utf8').split('\n').length, file).toBeLessThan(300);
      const fromCommands = importsOf(file, known).filter((f) => f.includes('/src/cli/commands/'));
      expect(fromCommands, file).toEqual([]);
    }
  });
});

describe('the measures themselves', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mb-shape-'));
    await writeFile(join(dir, 'a.ts'), "import type { B } from './b.js';\nexport type A = B | 1;\n");
    await writeFile(join(dir, 'b.ts'), "import type { A } from './a.js';\nexport type B = { a?: A };\n");
    await writeFile(join(dir, 'c.ts'), "import type { A } from './a.js';\nexport const c: A = 1;\n");
    const body = Array.from({ length: 80 }, (_, i) => `  n += ${i};`).join('\n');
    await writeFile(
      join(dir, 'long.ts'),
      `// Counts.\nexport function long(): number {\n  let n = 0;\n${body}\n  return n;\n}\n\n` +
        `// Long on purpose: a table.\nexport const table = (): number => {\n  let n = 0;\n${body}\n  return n;\n};\n\n` +
        `export function short(): number {\n  return 1;\n}\n`,
    );
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('finds a cycle made only of type imports, and not a file that merely imports one of its files', () => {
    const files = tsFiles(dir);
    expect(fileCycles(files, dir)).toEqual([['a.ts', 'b.ts']]);
  });

  it('finds a planted back-import (a type-only one) and names the file, the import and the layers', async () => {
    const src = join(dir, 'layered', 'src');
    mkdirSync(join(src, 'util'), { recursive: true });
    mkdirSync(join(src, 'cli'), { recursive: true });
    mkdirSync(join(src, 'store'), { recursive: true });
    await writeFile(join(src, 'cli', 'main.ts'), "import { log } from '../util/log.js';\nlog();\n");
    await writeFile(
      join(src, 'util', 'log.ts'),
      "import type { Flags } from '../cli/flags.js';\nexport const log = (f?: Flags) => f;\n",
    );
    await writeFile(join(src, 'cli', 'flags.ts'), 'export type Flags = { json: boolean };\n');
    await writeFile(
      join(src, 'store', 'db.ts'),
      "import { log } from '../util/log.js';\nexport const db = log;\n",
    );
    const root = join(dir, 'layered');
    expect(layerBreaks(tsFiles(src), root)).toEqual([
      {
        file: 'src/util/log.ts',
        imports: 'src/cli/flags.ts',
        why: 'util (layer 13) imports cli (layer 1), a higher one',
      },
    ]);
    await writeFile(
      join(src, 'store', 'db.ts'),
      "import { flags } from '../cli/main.js';\nexport const db = flags;\n",
    );
    await writeFile(
      join(src, 'cli', 'extra.ts'),
      "import { db } from '../plugins/db.js';\nexport const e = db;\n",
    );
    mkdirSync(join(src, 'plugins'), { recursive: true });
    await writeFile(join(src, 'plugins', 'db.ts'), 'export const db = 1;\n');
    expect(layerBreaks(tsFiles(src), root).map((b) => `${b.file} -> ${b.imports}: ${b.why}`)).toEqual([
      'src/cli/extra.ts -> src/plugins/db.ts: plugins not in the layer order (LAYERS in scripts/code-shape.ts)',
      'src/store/db.ts -> src/cli/main.ts: store (layer 10) imports cli (layer 1), a higher one',
      'src/util/log.ts -> src/cli/flags.ts: util (layer 13) imports cli (layer 1), a higher one',
    ]);
  });

  it('finds a function of 84 lines, and reads "Long on purpose:" above a const arrow', () => {
    const found = longFunctions([join(dir, 'long.ts')], dir);
    expect(found.map((f) => [f.name, f.lines, f.marked])).toEqual([
      ['long', 84, false],
      ['table', 84, true],
    ]);
  });
});
