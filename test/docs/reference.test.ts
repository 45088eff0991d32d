// The reference pages name everything they claim to cover: every field of the manifest's JSON Schema and
// every request field of every model in docs/manifest.md, every export of the library in docs/library.md,
// every exit code in docs/troubleshooting.md. A new field, export or code without its line fails here.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { globSync } from 'tinyglobby';
import { describe, expect, it } from 'vitest';
import manifestSchema from '../../schemas/manifest.schema.json' with { type: 'json' };
import { CATALOG } from '../../src/catalog/index.js';
import { EXIT } from '../../src/exit-codes.js';
import { codeSpans, ROOT } from './markdown.js';

const page = (name: string) => readFileSync(resolve(ROOT, 'docs', name), 'utf8');

/** The first cell of every table row: where a field or option is described, not only mentioned. */
function firstCells(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => line.startsWith('|'))
    .map((line) => line.split('|')[1] ?? '');
}

/** Every property name anywhere in a JSON Schema. */
function propertyNames(schema: unknown, into = new Set<string>()): Set<string> {
  if (typeof schema !== 'object' || schema === null) return into;
  const properties = (schema as { properties?: Record<string, unknown> }).properties;
  for (const name of Object.keys(properties ?? {})) into.add(name);
  for (const value of Object.values(schema)) propertyNames(value, into);
  return into;
}

/** The names src/index.ts exports, types included (read from its text: types do not exist at run time). */
function libraryExports(): string[] {
  const source = readFileSync(resolve(ROOT, 'src/index.ts'), 'utf8');
  const names = new Set<string>();
  for (const [, list = ''] of source.matchAll(/^export (?:type )?\{([^}]*)\}/gm)) {
    for (const item of list.split(',')) {
      const name = item
        .replace(/^\s*type\s+/, '')
        .trim()
        .split(/\s+as\s+/)
        .pop();
      if (name) names.add(name);
    }
  }
  for (const [, name = ''] of source.matchAll(
    /^export (?:async )?(?:function|interface|const|class|type) (\w+)/gm,
  ))
    names.add(name);
  return [...names].sort();
}

describe('docs/manifest.md', () => {
  const text = page('manifest.md');

  it('describes every field of schemas/manifest.schema.json in a table row', () => {
    const names = [...propertyNames(manifestSchema)];
    expect(names.length).toBeGreaterThan(20);
    expect(names.filter((name) => !firstCells(text).some((cell) => cell.includes(`\`${name}\``)))).toEqual(
      [],
    );
  });

  it.each(Object.values(CATALOG).map((entry) => [entry.model, entry.knownFields] as const))(
    'has a row for %s with every input field it takes',
    (model, fields) => {
      const row = text.split('\n').find((line) => line.startsWith(`| \`${model}\` |`));
      expect(row, `no row for ${model} in the models table`).toBeDefined();
      expect(fields.filter((field) => !row?.includes(`\`${field}\``))).toEqual([]);
    },
  );
});

describe('docs/library.md', () => {
  it('names every export of src/index.ts', () => {
    const names = libraryExports();
    expect(names).toEqual(expect.arrayContaining(['run', 'plan', 'readReport', 'startSandbox', 'RunEvent']));
    const text = page('library.md');
    expect(names.filter((name) => !new RegExp(`\`${name}[\`(]`).test(text))).toEqual([]);
  });
});

/** The fields of the library's option interfaces (`export interface XOptions { … }` in src/index.ts). */
function optionFields(): string[] {
  const source = readFileSync(resolve(ROOT, 'src/index.ts'), 'utf8');
  const fields: string[] = [];
  for (const [, body = ''] of source.matchAll(/^export interface \w+Options\b[^{]*\{([\s\S]*?)^\}/gm)) {
    for (const [, name = ''] of body.matchAll(/^ {2}(\w+)\??:/gm)) fields.push(name);
  }
  return fields;
}

describe('docs/library.md options', () => {
  it('names every option of plan() and run()', () => {
    const fields = optionFields();
    expect(fields).toEqual(expect.arrayContaining(['cwd', 'baseUrl', 'signal', 'storage']));
    const cells = firstCells(page('library.md'));
    expect(fields.filter((name) => !cells.some((cell) => cell.includes(`\`${name}\``)))).toEqual([]);
  });
});

describe('docs/troubleshooting.md', () => {
  it('has a row for every exit code, and for 70 (a bug)', () => {
    const text = page('troubleshooting.md');
    const codes = [...new Set(Object.values(EXIT)), 70];
    expect(codes.filter((code) => !text.includes(`\n| ${code} |`))).toEqual([]);
  });
});

/** Every TypeScript file under src/, as one text: where the lines the CLI prints are written. */
function sourceText(): string {
  return globSync('src/**/*.ts', { cwd: ROOT, absolute: true })
    .map((file) => readFileSync(file, 'utf8'))
    .join('\n');
}

/** In the source as written, or as two literals joined (`${cond ? 'what is left of the run' : …} does not fit`). */
function inSource(piece: string, source: string): boolean {
  if (source.includes(piece)) return true;
  for (let cut = 8; cut <= piece.length - 8; cut++) {
    const head = piece.slice(0, cut).trim();
    const tail = piece.slice(cut).trim();
    if (head.length >= 8 && tail.length >= 8 && source.includes(head) && source.includes(tail)) return true;
  }
  return false;
}

describe('the error lines docs/troubleshooting.md quotes', () => {
  it('are lines mediabatch prints: each literal piece between placeholders is in src/', () => {
    // Template literals escape their backticks; the printed line has none of those backslashes.
    const source = sourceText().replaceAll('\\`', '`');
    const quoted = codeSpans(resolve(ROOT, 'docs/troubleshooting.md'))
      .filter((span) => /^(mediabatch: |state file )/.test(span))
      .map((span) => span.replace(/^mediabatch: /, ''));
    expect(quoted.length).toBeGreaterThan(8);
    // Placeholders: an ellipsis, <id>, N or M for a number; and a line is written in pieces around them,
    // so it is cut at parentheses, colons and semicolons too.
    const missing = quoted.flatMap((line) =>
      line
        .split(/…|<[^>]+>|\b[NM]\b|[():;]/)
        .map((piece) => piece.replace(/^[\s,.]+|[\s,.]+$/g, ''))
        .filter((piece) => piece.length >= 12 && !inSource(piece, source))
        .map((piece) => `${line}: "${piece}"`),
    );
    expect(missing).toEqual([]);
  });
});

describe('README.md', () => {
  it('stays a front door: under 300 lines, with the two commands and the test command', () => {
    const text = readFileSync(resolve(ROOT, 'README.md'), 'utf8');
    expect(text.split('\n').length).toBeLessThan(300);
    for (const phrase of ['npm install', 'npm run demo', 'npm test']) expect(text).toContain(phrase);
  });
});
