// `foreach` over a glob of files: one task per file, in name order, `{{row.path}}`,
// `{{row.name}}` and `{{row.stem}}`; files must stay inside the manifest's folder, like data files.
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatProblem, loadManifest } from '../../src/manifest/index.js';

let dir: string;
let outside: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mb-glob-'));
  outside = await mkdtemp(join(tmpdir(), 'mb-glob-out-'));
  await mkdir(join(dir, 'faces'));
  for (const name of ['ben.png', 'ana.png', 'notes.txt', '.hidden.png'])
    await writeFile(join(dir, 'faces', name), 'x');
  await mkdir(join(dir, 'faces', 'sub.png'));
  await writeFile(join(outside, 'eve.png'), 'x');
  await symlink(join(outside, 'eve.png'), join(dir, 'faces', 'eve.png'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
  await rm(outside, { recursive: true, force: true });
});

const manifest = (foreach: string) => `version: 1
name: g
tasks:
  - id: "swap-{{row.stem}}"
    model: flat-image
    foreach: "${foreach}"
    input: { prompt: "{{row.name}} at {{row.path}}" }
`;

async function load(text: string, allowOutside = false) {
  await writeFile(join(dir, 'm.yaml'), text);
  return loadManifest('m.yaml', { cwd: dir, now: new Date(), allowOutside });
}

describe('foreach over a glob of files', () => {
  it('makes one task per regular file inside the folder, in name order', async () => {
    const result = await load(manifest('faces/*.png'));
    if (!result.ok) throw new Error(result.problems.map(formatProblem).join('\n'));
    expect(result.manifest.tasks.map((t) => [t.id, t.input.prompt])).toEqual([
      ['swap-ana', 'ana.png at faces/ana.png'],
      ['swap-ben', 'ben.png at faces/ben.png'],
    ]);
  });

  it('never follows a link, even with outside data allowed: the files are the folder’s own', async () => {
    const result = await load(manifest('faces/*.png'), true);
    if (!result.ok) throw new Error('expected a valid manifest');
    expect(result.manifest.tasks.map((t) => t.id)).toEqual(['swap-ana', 'swap-ben']);
  });

  it('says so, located, when nothing matches or the pattern leads out', async () => {
    const none = await load(manifest('faces/*.jpg'));
    expect(none.ok ? [] : none.problems.map(formatProblem)).toEqual([
      'm.yaml:6:14  tasks.0.foreach: faces/*.jpg matches no file; one task is made per matching file',
    ]);
    const out = await load(manifest('../*.png'));
    expect(out.ok ? [] : out.problems.map(formatProblem)).toEqual([
      `m.yaml:6:14  tasks.0.foreach: "../*.png" leads outside the manifest's folder; foreach files must be inside it (or use --allow-outside-data)`,
    ]);
  });
});
