// Every YAML manifest shown in README.md and docs/ passes `mediabatch validate`, so a renamed field or rule
// leaves no page wrong. A block that shows an error on purpose has `<!-- error: <text> -->` above it and must
// fail with that text; YAML that is not a manifest (mediabatch.config.yaml, a k8s recipe) is marked
// `<!-- not-a-manifest -->` or has none of a manifest's top-level keys; an account settings file shown is
// marked `<!-- mediabatch.config.yaml -->` and must load as one. Examples are validated as if saved in
// manifests/, beside the example data and media they name (a copy of that folder, so nothing is written
// into the tree).
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import manifestSchema from '../../schemas/manifest.schema.json' with { type: 'json' };
import { loadConfig } from '../../src/config.js';
import { cli } from '../helpers/cli.js';
import { type CodeBlock, codeBlocks, docFiles, ROOT, shown } from './markdown.js';

const MANIFEST_KEYS = Object.keys(manifestSchema.properties);

type Kind =
  | { kind: 'manifest' }
  | { kind: 'config' }
  | { kind: 'error'; expected: string }
  | { kind: 'other'; why: string };

function classify(block: CodeBlock): Kind {
  const marker = block.marker ?? '';
  if (marker === 'not-a-manifest') return { kind: 'other', why: 'marked' };
  if (marker === 'mediabatch.config.yaml') return { kind: 'config' };
  const error = /^error:\s*(.+)$/s.exec(marker);
  if (error?.[1]) return { kind: 'error', expected: error[1].trim() };
  let value: unknown;
  try {
    value = parse(block.text);
  } catch {
    // Broken YAML is refused by validate with its own located line: treat it as a manifest, so it fails.
    return { kind: 'manifest' };
  }
  const keys = typeof value === 'object' && value !== null && !Array.isArray(value) ? Object.keys(value) : [];
  if (keys.length > 0 && !keys.some((key) => MANIFEST_KEYS.includes(key)))
    return { kind: 'other', why: `no manifest key (${keys.join(', ')})` };
  return { kind: 'manifest' };
}

const blocks = docFiles()
  .flatMap(codeBlocks)
  .filter((block) => /^ya?ml\b/.test(block.lang))
  .map((block) => ({ block, name: `${shown(block.file)}:${block.line}`, ...classify(block) }));
const manifests = blocks.filter((b) => b.kind === 'manifest');
const configs = blocks.filter((b) => b.kind === 'config');
const errors = blocks.flatMap((b) => (b.kind === 'error' ? [{ ...b, expected: b.expected }] : []));

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mb-docs-'));
  await cp(join(ROOT, 'manifests'), join(dir, 'manifests'), { recursive: true });
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function validate(block: CodeBlock) {
  const file = join(dir, 'manifests', `${basename(block.file, '.md')}-${block.line}.yaml`);
  await writeFile(file, block.text);
  return cli(['validate', file], { cwd: dir });
}

describe('YAML in the docs', () => {
  it('is found: manifests in README.md and several pages, and errors shown on purpose', () => {
    // Were the pages or their blocks not found, every case below would pass by checking nothing.
    expect(manifests.length).toBeGreaterThanOrEqual(8);
    expect(manifests.some((b) => shown(b.block.file) === 'README.md')).toBe(true);
    expect(errors.length).toBeGreaterThanOrEqual(2);
    expect(configs.length).toBeGreaterThanOrEqual(1);
  });

  it.each(manifests)('$name is a valid manifest', async ({ block }) => {
    const result = await validate(block);
    expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: '' });
    expect(result.stdout).toMatch(/: valid, \d+ tasks? \(/);
  });

  it.each(configs)('$name is a valid mediabatch.config.yaml', async ({ block }) => {
    const file = `${basename(block.file, '.md')}-${block.line}.config.yaml`;
    await writeFile(join(dir, file), block.text);
    await expect(loadConfig({ cwd: dir, configFile: file, env: {} })).resolves.toBeDefined();
  });

  it.each(errors)('$name fails with the error it shows', async ({ block, expected }) => {
    const result = await validate(block);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(expected);
  });
});
