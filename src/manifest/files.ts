// Reading the manifest and its data files safely: only regular files, never more than a cap, and (for
// data files) only from inside the manifest's folder unless the caller allows more. A FIFO, a device or
// /proc/self/environ linked in by a hostile data set must be refused at once, never read or quoted.

import { constants, type Stats } from 'node:fs';
import { open, realpath, stat } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { MediabatchError } from '../errors.js';
import { scrub } from '../util/secrets.js';

/** Why a file was not read; the caller words it with the path the user wrote. */
export type RefusalReason =
  | { kind: 'not-regular'; what: string }
  | { kind: 'too-big'; size: number | undefined }
  | { kind: 'outside'; dir: string };

export class FileRefused extends MediabatchError {
  readonly reason: RefusalReason;

  constructor(path: string, reason: RefusalReason) {
    super(`${path}: refused (${reason.kind})`);
    this.name = 'FileRefused';
    this.reason = reason;
  }
}

// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. It changes nothing
// for a regular file. O_NOCTTY: a terminal device must never become our controlling terminal.
const OPEN_FLAGS = constants.O_RDONLY | (constants.O_NONBLOCK ?? 0) | (constants.O_NOCTTY ?? 0);
const CHUNK = 64 * 1024;

function kindOf(info: Stats): string {
  if (info.isDirectory()) return 'a folder';
  if (info.isFIFO()) return 'a named pipe (FIFO)';
  if (info.isSocket()) return 'a socket';
  if (info.isCharacterDevice() || info.isBlockDevice()) return 'a device';
  return 'not a regular file';
}

/**
 * Reads a regular file of at most `cap` bytes. The checks use the opened descriptor (fstat), so what
 * is checked is what is read; the cap is enforced while reading too, because /proc files and the like
 * report a size of 0.
 */
export async function readRegularFile(path: string, cap: number): Promise<Buffer> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, OPEN_FLAGS);
  } catch (error) {
    // A Unix socket cannot be opened at all (ENXIO); say what it is rather than an errno.
    if ((error as NodeJS.ErrnoException).code === 'ENXIO') {
      throw new FileRefused(path, { kind: 'not-regular', what: 'a socket or a device without a reader' });
    }
    throw error;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new FileRefused(path, { kind: 'not-regular', what: kindOf(info) });
    if (info.size > cap) throw new FileRefused(path, { kind: 'too-big', size: info.size });
    const chunks: Buffer[] = [];
    let total = 0;
    // Reads at most cap + 1 bytes: one byte past the cap is enough to know the file is too big.
    while (total <= cap) {
      const buffer = Buffer.allocUnsafe(Math.min(CHUNK, cap + 1 - total));
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) break;
      chunks.push(buffer.subarray(0, bytesRead));
      total += bytesRead;
    }
    if (total > cap) throw new FileRefused(path, { kind: 'too-big', size: undefined });
    return Buffer.concat(chunks, total);
  } finally {
    await handle.close();
  }
}

function inside(dir: string, path: string): boolean {
  const rel = relative(dir, path);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
}

export interface DataReaderOptions {
  /** The manifest's folder: data files must resolve inside it. */
  dir: string;
  /** Read data files wherever they are (`--allow-outside-data`). */
  allowOutside: boolean;
  cap: number;
  /** An in-memory reader (tests): paths are checked as written, since it has no symlinks to resolve. */
  readFile?: ((path: string) => Promise<Buffer>) | undefined;
}

/**
 * The reader for `foreach` files: the path must stay inside the manifest's folder once every symlink is
 * resolved, and the resolved path is what is opened, so a link cannot be swapped between check and read.
 */
export function dataFileReader(opts: DataReaderOptions): (path: string) => Promise<Buffer> {
  let realDir: Promise<string> | undefined;
  return async (path) => {
    const absolute = resolve(opts.dir, path);
    if (opts.allowOutside)
      return opts.readFile ? opts.readFile(absolute) : readRegularFile(absolute, opts.cap);
    const outside = () => new FileRefused(absolute, { kind: 'outside', dir: opts.dir });
    if (!inside(resolve(opts.dir), absolute)) throw outside();
    if (opts.readFile) return opts.readFile(absolute);
    realDir ??= realpath(opts.dir).catch(() => resolve(opts.dir));
    let real: string;
    try {
      real = await realpath(absolute);
    } catch (error) {
      // A missing file is reported as such by the read below; only an existing path can lead out.
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return readRegularFile(absolute, opts.cap);
      throw error;
    }
    if (!inside(await realDir, real)) throw outside();
    return readRegularFile(real, opts.cap);
  };
}

/** `NAME=value`, as in an environment dump: the value is never quoted back, whatever the name. */
const ASSIGNMENT = /\b([A-Za-z_][A-Za-z0-9_]*)=[^\s,;"'\\?]*/g;

function visible(text: string): string {
  let out = '';
  for (const ch of text) {
    const code = ch.codePointAt(0) ?? 0;
    out += (code < 0x20 && ch !== '\t') || code === 0x7f ? '?' : ch;
  }
  return out;
}

/**
 * Text that came from a file, made safe to print: registered secrets and every `NAME=value` value
 * removed (an environment dump reads like that), control characters shown as `?`, and cut to `max`.
 */
export function excerpt(text: string, max = Number.POSITIVE_INFINITY): string {
  // Control characters first: an environment dump separates its entries with NUL, shown as `?`.
  const cleaned = visible(scrub(text)).replace(ASSIGNMENT, '$1=[redacted]');
  return cleaned.length > max ? `${cleaned.slice(0, max - 1)}…` : cleaned;
}

/** Whether a `foreach` path is a glob of files (`faces/*.jpg`) rather than one data file. */
export function isGlob(path: string): boolean {
  return /[*?[{]/.test(path);
}

/**
 * Lists the regular files a glob matches under the manifest's folder, sorted (one task per file, in an
 * order that does not depend on the file system). Like data files, they must stay inside the folder:
 * a pattern with an absolute path or `..`, and links that lead out, are refused unless allowed.
 */
export function dataFileLister(opts: {
  dir: string;
  allowOutside: boolean;
}): (pattern: string) => Promise<{ ok: true; paths: string[] } | { ok: false; message: string }> {
  return async (pattern) => {
    const outside = isAbsolute(pattern) || pattern.split(/[\\/]/).includes('..');
    if (outside && !opts.allowOutside) {
      return {
        ok: false,
        message: `"${pattern}" leads outside the manifest's folder; foreach files must be inside it (or use --allow-outside-data)`,
      };
    }
    const { glob } = await import('tinyglobby');
    const found = await glob(pattern, {
      cwd: opts.dir,
      onlyFiles: true,
      dot: false,
      expandDirectories: false,
      followSymbolicLinks: false,
    });
    const realDir = await realpath(opts.dir).catch(() => resolve(opts.dir));
    const paths: string[] = [];
    for (const path of found) {
      const absolute = resolve(opts.dir, path);
      const real = await realpath(absolute).catch(() => undefined);
      if (real === undefined) continue;
      if (!opts.allowOutside && !inside(realDir, real)) continue;
      const info = await stat(real).catch(() => undefined);
      if (info?.isFile()) paths.push(path.split('\\').join('/'));
    }
    return { ok: true, paths: paths.sort() };
  };
}
