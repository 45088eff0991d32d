// Hostile data files on a real disk: FIFOs, devices, sockets, links out of the manifest's folder, files
// that lie about their size, and environment dumps whose secrets must never be quoted back.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { excerpt, FileRefused, readRegularFile } from '../../src/manifest/files.js';
import { formatProblem, loadManifest } from '../../src/manifest/index.js';
import { NOW } from './helpers.js';

const made: string[] = [];
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
  await Promise.all(made.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'mediabatch-files-'));
  made.push(dir);
  return dir;
}

/** A folder with `files`, and `project/m.yaml` reading `foreach` from `path`. */
async function project(path: string, files: Record<string, string> = {}) {
  const root = await tempDir();
  const dir = join(root, 'project');
  await mkdir(join(dir, 'data'), { recursive: true });
  for (const [name, text] of Object.entries(files)) {
    await mkdir(dirname(join(root, name)), { recursive: true });
    await writeFile(join(root, name), text);
  }
  await writeFile(
    join(dir, 'm.yaml'),
    `version: 1\nname: demo\ntasks:\n  - id: "line-{{index}}"\n    model: speech-v3\n    foreach: ${path}\n    input: { text: "{{row.text}}" }\n`,
  );
  return { root, dir };
}

async function problems(root: string, opts: { allowOutside?: boolean } = {}): Promise<string[]> {
  const result = await loadManifest('project/m.yaml', { now: NOW, cwd: root, ...opts });
  return result.ok ? [] : result.problems.map(formatProblem);
}

const outside = (path: string, dir: string) =>
  `project/m.yaml:6:14  tasks.0.foreach: data file ${path} is outside the manifest's folder ${dir}; move it there or pass --allow-outside-data`;

describe('foreach data files stay in the manifest folder', () => {
  it('reads a file inside, also through a link that stays inside', async () => {
    const { root, dir } = await project('data/link.csv', { 'project/data/rows.csv': 'text\nhello\n' });
    await symlink(join(dir, 'data', 'rows.csv'), join(dir, 'data', 'link.csv'));
    const result = await loadManifest('project/m.yaml', { now: NOW, cwd: root });
    expect(result.ok && result.manifest.tasks.map((t) => t.input)).toEqual([{ text: 'hello' }]);
  });

  it('refuses ../ escapes, absolute paths and links that point out, at the foreach value', async () => {
    const secret = { 'elsewhere/rows.csv': 'text\nhello\n' };
    const up = await project('../elsewhere/rows.csv', secret);
    expect(await problems(up.root)).toEqual([outside('elsewhere/rows.csv', up.dir)]);

    const abs = await project('/etc/hostname.csv');
    expect(await problems(abs.root)).toEqual([outside('/etc/hostname.csv', abs.dir)]);

    const linked = await project('data/rows.csv', secret);
    await symlink(join(linked.root, 'elsewhere', 'rows.csv'), join(linked.dir, 'data', 'rows.csv'));
    expect(await problems(linked.root)).toEqual([outside('project/data/rows.csv', linked.dir)]);

    // The same files are read when the caller allows it.
    const allowed = await loadManifest('project/m.yaml', { now: NOW, cwd: linked.root, allowOutside: true });
    expect(allowed.ok && allowed.manifest.tasks.map((t) => t.input)).toEqual([{ text: 'hello' }]);
  });

  it('refuses a linked folder that leads out', async () => {
    const { root, dir } = await project('out/rows.csv', { 'elsewhere/rows.csv': 'text\nhello\n' });
    await symlink(join(root, 'elsewhere'), join(dir, 'out'));
    expect(await problems(root)).toEqual([outside('project/out/rows.csv', dir)]);
  });
});

describe('only regular files are read', () => {
  it('refuses a FIFO at once instead of waiting for a writer', async () => {
    const { root, dir } = await project('data/rows.csv');
    execFileSync('mkfifo', [join(dir, 'data', 'rows.csv')]);
    expect(await problems(root)).toEqual([
      'project/m.yaml:6:14  tasks.0.foreach: data file project/data/rows.csv is a named pipe (FIFO), not a regular file; give the path of a .csv, .json, .jsonl or .yaml file',
    ]);
  });

  it('refuses a device, even when allowed outside the folder', async () => {
    const { root, dir } = await project('data/rows.csv');
    await symlink('/dev/zero', join(dir, 'data', 'rows.csv'));
    expect(await problems(root, { allowOutside: true })).toEqual([
      'project/m.yaml:6:14  tasks.0.foreach: data file project/data/rows.csv is a device, not a regular file; give the path of a .csv, .json, .jsonl or .yaml file',
    ]);
  });

  it('refuses a socket', async () => {
    const { root, dir } = await project('data/rows.csv');
    const server = createServer();
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(join(dir, 'data', 'rows.csv'), resolve));
    const [problem] = await problems(root);
    expect(problem).toMatch(
      /^project\/m\.yaml:6:14 {2}tasks\.0\.foreach: data file project\/data\/rows\.csv is a socket/,
    );
  });

  it('refuses a manifest that is a FIFO', async () => {
    const root = await tempDir();
    execFileSync('mkfifo', [join(root, 'm.yaml')]);
    const result = await loadManifest('m.yaml', { now: NOW, cwd: root });
    expect(result.ok ? [] : result.problems.map(formatProblem)).toEqual([
      'm.yaml:1:1  the manifest is a named pipe (FIFO), not a regular file; give the path of a .yaml file',
    ]);
  });

  it('stops reading one byte past the cap, even when the file says it is empty', async () => {
    const dir = await tempDir();
    const file = join(dir, 'rows.csv');
    await writeFile(file, 'x'.repeat(101));
    await expect(readRegularFile(file, 100)).rejects.toEqual(
      new FileRefused(file, { kind: 'too-big', size: 101 }),
    );
    expect((await readRegularFile(file, 101)).length).toBe(101);
    // /proc files report a size of 0: the cap is then enforced while reading.
    if (existsSync('/proc/self/status')) {
      await expect(readRegularFile('/proc/self/status', 16)).rejects.toMatchObject({
        reason: { kind: 'too-big', size: undefined },
      });
    }
  });
});

describe('secrets in data files are never quoted back', () => {
  const sentinel = 'sentinel-6f1c2e9a';

  it.each([
    ['rows.csv', `MEDIABATCH_API_KEY=${sentinel}\nHOME=/root,${sentinel}\n`],
    ['rows.json', `MEDIABATCH_API_KEY=${sentinel}`],
    ['rows.jsonl', `{"a": 1}\nMEDIABATCH_API_KEY=${sentinel}\n`],
    ['rows.yaml', `MEDIABATCH_API_KEY=${sentinel}\n`],
  ])('%s linked to an environment dump', async (name, text) => {
    const { root, dir } = await project(`data/${name}`, { [`env/${name}`]: text });
    await symlink(join(root, 'env', name), join(dir, 'data', name));
    const refused = await problems(root);
    expect(refused).toEqual([outside(`project/data/${name}`, dir)]);
    // Even when reading it is allowed, what the problems quote of it is scrubbed.
    const allowed = await problems(root, { allowOutside: true });
    expect(allowed.length).toBeGreaterThan(0);
    expect(allowed.join('\n')).not.toContain(sentinel);
  });

  it('excerpts are short, one line, and hide NAME=value values', () => {
    expect(excerpt(`A=1 PATH=/usr/bin\u0000MEDIABATCH_API_KEY=${sentinel}\nnext`)).toBe(
      'A=[redacted] PATH=[redacted]?MEDIABATCH_API_KEY=[redacted]?next',
    );
    expect(excerpt('abcdefghij', 5)).toBe('abcd…');
  });
});
