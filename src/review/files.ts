// A re-roll keeps the result it replaces: its files move to `<task>/attempt-<n>/` before the new attempt
// is recorded, so the newest result is always at `<task>/` and a paid file is never overwritten.

import { lstat, readdir, rename } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { taskFolderName } from '../results/names.js';
import type { FileRecord, TaskRecord } from '../store/index.js';
import { ensureFolderUnder, syncFolder } from '../util/fsatomic.js';

export type Moved = ReadonlyArray<{ from: string; to: string }>;

/**
 * Moves the task's current result (its files and job.json in its folder; with `file_name`, its files in
 * the run folder) into `<task>/attempt-<attempt>/`. Returns what moved, to put back if the decision is refused.
 */
export async function keepEarlierResult(
  runDir: string,
  task: TaskRecord,
  files: readonly FileRecord[],
): Promise<Moved> {
  const folderName = taskFolderName(task.taskId);
  const folder = join(runDir, folderName);
  const sources = new Set<string>(files.map((f) => f.path));
  for (const name of await readdir(folder).catch(() => [] as string[])) {
    const path = join(folder, name);
    const info = await lstat(path).catch(() => undefined);
    if (info?.isFile()) sources.add(path);
  }
  const present: string[] = [];
  for (const path of sources) if ((await lstat(path).catch(() => undefined))?.isFile()) present.push(path);
  if (present.length === 0) return [];
  const target = await ensureFolderUnder(runDir, join(folderName, `attempt-${task.attempt}`));
  const moved: Array<{ from: string; to: string }> = [];
  for (const from of present) {
    const to = join(target, basename(from));
    try {
      await rename(from, to);
    } catch (error) {
      // Gone since it was listed: another process is keeping the same result (the runner finishes a move
      // it finds half done while the view's decision makes it), and has moved this file already.
      const gone =
        (error as NodeJS.ErrnoException).code === 'ENOENT' &&
        (await lstat(from).catch(() => undefined)) === undefined;
      if (gone) continue;
      throw error;
    }
    moved.push({ from, to });
  }
  await syncFolder(target);
  await syncFolder(folder);
  return moved;
}
