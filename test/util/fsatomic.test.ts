import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ensureFolderUnder,
  UnsafePathError,
  writeFileAtomic,
  writeFileAtomicStream,
} from '../../src/util/fsatomic.js';

let dir: string;
let victim: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mediabatch-fsatomic-'));
  victim = await mkdtemp(join(tmpdir(), 'mediabatch-victim-'));
  await writeFile(join(victim, 'secret.txt'), 'precious');
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
  await rm(victim, { recursive: true, force: true });
});

const listing = async (folder: string) => (await readdir(folder, { recursive: true })).sort();

describe('writeFileAtomic', () => {
  it('writes the file and leaves no temporary file', async () => {
    const path = join(dir, 'run', 'task', 'job.json');
    await writeFileAtomic(path, '{"a":1}\n');
    expect(await readFile(path, 'utf8')).toBe('{"a":1}\n');
    expect(await listing(dir)).toEqual(['run', 'run/task', 'run/task/job.json']);
  });

  it('replaces a link planted at the final name instead of writing through it', async () => {
    const path = join(dir, 'job.json');
    await symlink(join(victim, 'secret.txt'), path);
    await writeFileAtomic(path, 'ours');
    expect(await readFile(join(victim, 'secret.txt'), 'utf8')).toBe('precious');
    expect((await lstat(path)).isSymbolicLink()).toBe(false);
    expect(await readFile(path, 'utf8')).toBe('ours');
  });

  it('refuses a temporary name that already exists (O_EXCL), never following a link there', async () => {
    const path = join(dir, 'job.json');
    const temp = join(dir, '.job.json.00000000deadbeef.part');
    await symlink(join(victim, 'secret.txt'), temp);
    await expect(writeFileAtomic(path, 'ours', { random: () => '00000000deadbeef' })).rejects.toMatchObject({
      code: 'EEXIST',
    });
    expect(await readFile(join(victim, 'secret.txt'), 'utf8')).toBe('precious');
    expect(await readlink(temp)).toBe(join(victim, 'secret.txt'));
    expect(await listing(dir)).toEqual(['.job.json.00000000deadbeef.part']);
  });

  it('refuses a folder that is a planted link', async () => {
    await mkdir(join(dir, 'run'));
    await symlink(victim, join(dir, 'run', 'task'));
    const error = await writeFileAtomic(join(dir, 'run', 'task', 'job.json'), 'x').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnsafePathError);
    expect((error as Error).message).toBe(
      `${join(dir, 'run', 'task')}: is a symbolic link, not a folder; remove the link, then run again`,
    );
    expect(await listing(victim)).toEqual(['secret.txt']);
  });

  it('with a root, refuses a link at any folder below it', async () => {
    await symlink(victim, join(dir, 'run'));
    const error = await writeFileAtomic(join(dir, 'run', 'task', 'job.json'), 'x', { root: dir }).catch(
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ name: 'UnsafePathError', path: join(dir, 'run') });
    expect(await listing(victim)).toEqual(['secret.txt']);
  });
});

describe('writeFileAtomicStream', () => {
  it('six writers of one report at once: each finishes, the file is one of them whole, no temp left', async () => {
    const path = join(dir, 'run', 'report.json');
    const bodies = Array.from({ length: 6 }, (_, i) => `${String(i).repeat(200_000)}\n`);
    await Promise.all(
      bodies.map((body) =>
        writeFileAtomicStream(path, async (sink) => {
          for (let at = 0; at < body.length; at += 10_000) {
            await sink.write(body.slice(at, at + 10_000));
            await new Promise((r) => setImmediate(r));
          }
        }),
      ),
    );
    expect(bodies).toContain(await readFile(path, 'utf8'));
    expect(await listing(join(dir, 'run'))).toEqual(['report.json']);
  });

  it('keeps the old file and removes its temporary file when the producer fails', async () => {
    const path = join(dir, 'report.md');
    await writeFile(path, 'old report');
    const failing = writeFileAtomicStream(path, async (sink) => {
      await sink.write('x'.repeat(100_000));
      throw new Error('store closed');
    });
    await expect(failing).rejects.toThrow('store closed');
    expect(await readFile(path, 'utf8')).toBe('old report');
    expect(await listing(dir)).toEqual(['report.md']);
  });
});

describe('ensureFolderUnder', () => {
  it('creates each folder below the root and returns the path', async () => {
    const root = join(dir, 'out');
    expect(await ensureFolderUnder(root, 'demo/hero')).toBe(join(root, 'demo', 'hero'));
    expect((await lstat(join(root, 'demo', 'hero'))).isDirectory()).toBe(true);
    // Again: existing real folders are fine.
    expect(await ensureFolderUnder(root, 'demo/hero')).toBe(join(root, 'demo', 'hero'));
    expect(await ensureFolderUnder(root, '')).toBe(root);
  });

  it('accepts a root that is a link the user made', async () => {
    const root = join(dir, 'out');
    await symlink(victim, root);
    expect(await ensureFolderUnder(root, 'demo')).toBe(join(root, 'demo'));
    expect(await listing(victim)).toEqual(['demo', 'secret.txt']);
  });

  it.each<[string, (root: string) => Promise<void>, string, string]>([
    [
      'a link to a folder',
      (root) => symlink(victim, join(root, 'demo')),
      'demo',
      'is a symbolic link, not a folder; remove the link, then run again',
    ],
    [
      'a dangling link',
      (root) => symlink(join(root, 'nowhere'), join(root, 'demo')),
      'demo',
      'is a symbolic link, not a folder; remove the link, then run again',
    ],
    [
      'a file',
      (root) => writeFile(join(root, 'demo'), 'x'),
      'demo',
      'is not a folder; move it away, then run again',
    ],
  ])('refuses %s below the root, naming it', async (_what, plant, bad, reason) => {
    const root = join(dir, 'out');
    await mkdir(root);
    await plant(root);
    const error = await ensureFolderUnder(root, 'demo/hero').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnsafePathError);
    expect(error).toMatchObject({ path: join(root, bad), message: `${join(root, bad)}: ${reason}` });
    expect(await listing(victim)).toEqual(['secret.txt']);
  });

  it.each(['../escape', 'a/../../escape', '/etc'])('refuses %s, which is not below the root', async (rel) => {
    await expect(ensureFolderUnder(join(dir, 'out'), rel)).rejects.toThrow(UnsafePathError);
  });
});
