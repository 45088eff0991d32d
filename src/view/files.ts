// Result files of a run, served by the row the store records for them (never by a path from the URL):
// opened without following a link, checked to lie inside the run folder, streamed with Range support
// so that a video seeks and plays.

import { constants } from 'node:fs';
import { type FileHandle, open, realpath, stat } from 'node:fs/promises';
import { extname, isAbsolute, relative } from 'node:path';
import parseRange from 'range-parser';

const CONTENT_TYPES: Record<string, string> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.webp': 'image/webp',
  '.gif': 'image/gif',
  '.mp4': 'video/mp4',
  '.webm': 'video/webm',
  '.mov': 'video/quicktime',
  '.mp3': 'audio/mpeg',
  '.wav': 'audio/wav',
  '.m4a': 'audio/mp4',
  '.ogg': 'audio/ogg',
  '.flac': 'audio/flac',
  '.json': 'application/json',
};

/** The Content-Type of a result file by its extension; bytes of an unknown kind are never sniffed. */
export function contentTypeOf(path: string): string {
  return CONTENT_TYPES[extname(path).toLowerCase()] ?? 'application/octet-stream';
}

export interface OpenedFile {
  handle: FileHandle;
  size: number;
  contentType: string;
}

/**
 * Opens a recorded result file for reading, or undefined when it must not be served: missing, not a
 * regular file, a symbolic link (O_NOFOLLOW), or a real path outside the run folder (a link planted in
 * a folder above it). The handle is checked to be the very file whose real path was checked.
 */
export async function openRecordedFile(path: string, runDir: string): Promise<OpenedFile | undefined> {
  let handle: FileHandle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    return undefined;
  }
  try {
    const [opened, real, realDir] = await Promise.all([handle.stat(), realpath(path), realpath(runDir)]);
    const rel = relative(realDir, real);
    const inside = rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
    const same = await stat(real).then(
      (s) => s.ino === opened.ino && s.dev === opened.dev,
      () => false,
    );
    if (!opened.isFile() || !inside || !same) {
      await handle.close();
      return undefined;
    }
    return { handle, size: opened.size, contentType: contentTypeOf(path) };
  } catch {
    await handle.close();
    return undefined;
  }
}

export type ByteRange = { start: number; end: number } | 'unsatisfiable' | undefined;

/** One byte range of a Range header (several ranges are served whole: no player asks for them). */
export function byteRange(header: string | undefined, size: number): ByteRange {
  if (header === undefined) return undefined;
  const ranges = parseRange(size, header, { combine: true });
  if (ranges === -1) return 'unsatisfiable';
  if (ranges === -2 || ranges.type !== 'bytes' || ranges.length !== 1) return undefined;
  const [first] = ranges;
  return first === undefined ? undefined : { start: first.start, end: first.end };
}
