// Before the first POST: can the results be written where they are going? A run that pays for results it
// cannot write has to stop and wait for the user anyway, so an unwritable or nearly full output folder is
// found out before any money moves.

import { mkdir, open, rm, stat, statfs } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { randomHex } from '../util/fsatomic.js';

/** A typical result size per kind (not the largest): what a batch of them needs on disk. */
export const TYPICAL_RESULT_BYTES: Record<'image' | 'audio' | 'video', number> = {
  image: 4 * 1024 ** 2,
  audio: 8 * 1024 ** 2,
  video: 40 * 1024 ** 2,
};

/** Bytes the results of `tasks` (counts per kind, files per task included) are likely to take. */
export function expectedResultBytes(tasks: Partial<Record<'image' | 'audio' | 'video', number>>): number {
  let total = 0;
  for (const [kind, n] of Object.entries(tasks) as ['image' | 'audio' | 'video', number][]) {
    total += TYPICAL_RESULT_BYTES[kind] * n;
  }
  return total;
}

export type OutputCheck =
  | { ok: true; freeBytes: number | undefined }
  | {
      ok: false;
      problem: 'unwritable' | 'space';
      /** The refusal's reason with what to do (free space, or --allow-partial). */
      message: string;
      /** What was found, without the advice: said as it is when --allow-partial was given. */
      found: string;
      freeBytes?: number;
    };

/** Writes and removes a probe file in `folder` (created if needed), then compares free space with `needBytes`. */
export async function checkOutputFolder(
  folder: string,
  needBytes: number,
  shown = folder,
): Promise<OutputCheck> {
  try {
    await makeFolder(folder);
    const probe = join(folder, `.mediabatch-probe-${randomHex()}`);
    const handle = await open(probe, 'wx');
    await handle.close();
    await rm(probe, { force: true });
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const found = `the output folder ${shown} cannot be written (${typeof code === 'string' ? code : String(error)})`;
    return {
      ok: false,
      problem: 'unwritable',
      found,
      message: `${found}: fix its permissions or choose another output`,
    };
  }
  let freeBytes: number | undefined;
  try {
    const stats = await statfs(folder);
    freeBytes = stats.bavail * stats.bsize;
  } catch {
    // Not every file system reports free space; the run then relies on the mid-run stop.
    return { ok: true, freeBytes: undefined };
  }
  if (freeBytes < needBytes) {
    const found = `the output folder ${shown} has ${fmtMb(freeBytes)} free, and the results of this run are likely to need about ${fmtMb(needBytes)}`;
    return {
      ok: false,
      problem: 'space',
      freeBytes,
      found,
      message: `${found}: free space, or run with --allow-partial to stop when the disk is full`,
    };
  }
  return { ok: true, freeBytes };
}

/**
 * mkdir -p one level at a time: Node's recursive mkdir reports ENOENT where the file system said EROFS
 * or EACCES, and the user needs the real reason.
 */
async function makeFolder(folder: string): Promise<void> {
  const missing: string[] = [];
  for (let at = folder; ; at = dirname(at)) {
    const exists = await stat(at).then(
      () => true,
      () => false,
    );
    if (exists || dirname(at) === at) break;
    missing.unshift(at);
  }
  for (const path of missing) {
    await mkdir(path).catch((error: unknown) => {
      if ((error as { code?: unknown }).code !== 'EEXIST') throw error;
    });
  }
}

function fmtMb(bytes: number): string {
  return bytes >= 1024 ** 3 ? `${(bytes / 1024 ** 3).toFixed(1)} GB` : `${Math.ceil(bytes / 1024 ** 2)} MB`;
}
