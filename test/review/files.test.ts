// Keeping a re-rolled task's earlier result while another process keeps it too: the view's decision and
// the runner (which finishes a move it finds half done) both move the same files; neither fails.
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { keepEarlierResult } from '../../src/review/files.js';
import type { FileRecord, TaskRecord } from '../../src/store/index.js';

let dir = '';
afterEach(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('keepEarlierResult', () => {
  it('moves the files once when two keepers run at the same time, and both succeed', async () => {
    dir = await mkdtemp(join(tmpdir(), 'mb-keep-'));
    const folder = join(dir, 'still-1');
    await mkdir(folder);
    const names = ['1.png', '2.png', 'job.json'];
    for (const name of names) await writeFile(join(folder, name), name);
    const task = { taskId: 'still-1', attempt: 1 } as TaskRecord;
    const files = names
      .slice(0, 2)
      .map((name, i) => ({ path: join(folder, name), index: i + 1 }) as FileRecord);
    const [a, b] = await Promise.all([
      keepEarlierResult(dir, task, files),
      keepEarlierResult(dir, task, files),
    ]);
    expect([...a, ...b].map((m) => m.to).sort()).toEqual(names.map((n) => join(folder, 'attempt-1', n)));
    expect((await readdir(join(folder, 'attempt-1'))).sort()).toEqual(names);
    expect(await readdir(folder)).toEqual(['attempt-1']);
  });
});
