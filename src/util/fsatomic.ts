// Every file mediabatch writes goes through here, so that nobody who can write into the output folder
// can redirect a write: temporary files get a random name and are created exclusively without following
// links, folders are created one segment at a time and checked to be real folders, and the final name
// is taken by rename, which replaces a link planted there instead of writing through it.

import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { type FileHandle, lstat, mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { MediabatchError } from '../errors.js';
import { scrub, scrubBytes, secretOverlap } from './secrets.js';

/** A folder on the way to a file is a link or not a folder: writing there could land anywhere. */
export class UnsafePathError extends MediabatchError {
  /** Not an errno code: lets callers that sort errors by `code` tell this one apart. */
  readonly code = 'EUNSAFEPATH';
  constructor(
    readonly path: string,
    reason: string,
  ) {
    super(`${path}: ${reason}`);
    this.name = 'UnsafePathError';
  }
}

/** Options shared by the writers. */
export interface AtomicWriteOptions {
  /**
   * The user's output folder. When given, every folder between it and the file is created one at a
   * time and must be a real folder; without it, only the file's own folder is checked.
   */
  root?: string;
  /** 16 hex characters for the temporary name; tests pass a fixed one. */
  random?: () => string;
  /** The caller made the file's folder safe already (see folderIn): it is not checked again. */
  folderReady?: boolean;
}

export const randomHex = (): string => randomBytes(8).toString('hex');

// O_NOFOLLOW does not exist on Windows, where planting a link needs privileges anyway.
const EXCLUSIVE = constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | (constants.O_NOFOLLOW ?? 0);

/** `.<name>.<16 hex>.part` beside `path`: hidden, unguessable, and recognisable as ours. */
export function tempPathFor(path: string, random: () => string = randomHex): string {
  // Bounded so that a long final name still leaves room for the suffix within 255 bytes.
  const name = [...basename(path)].slice(0, 100).join('');
  return join(dirname(path), `.${name}.${random()}.part`);
}

/** Does `name` look like a temporary file that tempPathFor made for `finalName`? */
export function isTempFor(name: string, finalName: string): boolean {
  const stem = `.${[...finalName].slice(0, 100).join('')}.`;
  return name.startsWith(stem) && /^[0-9a-f]{16}\.part$/.test(name.slice(stem.length));
}

/**
 * Removes the temporary files a killed process left in `folder` (only names tempPathFor makes). With
 * `olderThanMs` (epoch ms), only those last written before then: a writer that started earlier and is still
 * alive is not robbed of its file. Without it, call it only for a folder no other process writes to, such as
 * a task folder under the run's lease.
 */
export async function removeLeftoverTemps(folder: string, olderThanMs?: number): Promise<void> {
  const names = await readdir(folder).catch(() => [] as string[]);
  for (const name of names) {
    if (!/^\..+\.[0-9a-f]{16}\.part$/.test(name)) continue;
    const path = join(folder, name);
    if (olderThanMs !== undefined) {
      const info = await lstat(path).catch(() => undefined);
      if (info === undefined || info.mtimeMs >= olderThanMs) continue;
    }
    await rm(path, { force: true });
  }
}

/** Removes the temporary files tempPathFor made for `finalName` in `folder` (a killed writer's). */
export async function removeLeftoverTempsFor(folder: string, finalName: string): Promise<void> {
  const names = await readdir(folder).catch(() => [] as string[]);
  for (const name of names) if (isTempFor(name, finalName)) await rm(join(folder, name), { force: true });
}

/** Creates a new file that did not exist, never through a link. EEXIST means someone else's file is there. */
export async function openExclusive(path: string): Promise<FileHandle> {
  return open(path, EXCLUSIVE, 0o644);
}

async function checkRealFolder(path: string): Promise<void> {
  const info = await lstat(path);
  if (info.isSymbolicLink()) {
    throw new UnsafePathError(path, 'is a symbolic link, not a folder; remove the link, then run again');
  }
  if (!info.isDirectory()) {
    throw new UnsafePathError(path, 'is not a folder; move it away, then run again');
  }
}

/**
 * Creates `root/relative` a segment at a time and returns its path. The root (the user's output folder)
 * may be a link the user made; every folder below it must be a real folder, or UnsafePathError.
 */
export async function ensureFolderUnder(root: string, relativePath: string): Promise<string> {
  const segments = relativePath.split(/[\\/]+/).filter((s) => s !== '' && s !== '.');
  if (isAbsolute(relativePath) || segments.includes('..')) {
    throw new UnsafePathError(join(root, relativePath), `is not inside ${root}`);
  }
  await mkdir(root, { recursive: true });
  if (!(await stat(root)).isDirectory()) throw new UnsafePathError(root, 'is not a folder');
  let path = root;
  for (const segment of segments) path = (await folderIn(path, segment)).path;
  return path;
}

/**
 * The folder `name` in `parent` (a real folder the caller checked), created if missing. One mkdir when it
 * is new (what mkdir made is a real folder); one more look when something already held the name.
 */
export async function folderIn(parent: string, name: string): Promise<{ path: string; created: boolean }> {
  const path = join(parent, name);
  try {
    await mkdir(path);
    return { path, created: true };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  await checkRealFolder(path);
  return { path, created: false };
}

/** fsync of a folder makes the renames into it durable; some platforms cannot open a folder for it. */
export async function syncFolder(folder: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(folder, 'r');
    await handle.sync();
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code !== 'EISDIR' && code !== 'EINVAL' && code !== 'EPERM' && code !== 'EBADF') throw error;
  } finally {
    await handle?.close();
  }
}

/**
 * The folder `path` goes into, created if missing: with a root, checked segment by segment below it;
 * without one, created as needed and the folder itself checked to be a real folder.
 */
export async function prepareFolderFor(path: string, root?: string): Promise<string> {
  const folder = dirname(resolve(path));
  if (root !== undefined) {
    const below = relative(resolve(root), folder);
    if (below.startsWith(`..${sep}`) || below === '..' || isAbsolute(below)) {
      throw new UnsafePathError(path, `is not inside ${root}`);
    }
    return ensureFolderUnder(resolve(root), below);
  }
  try {
    await mkdir(folder, { recursive: true });
  } catch (error) {
    // A file under the folder's name: checkRealFolder says so in words.
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  await checkRealFolder(folder);
  return folder;
}

/**
 * Writes a small file so that its final name only ever holds complete content (temp name, fsync, rename).
 * The content leaves the process here, so a registered secret in it is scrubbed (src/util/secrets.ts).
 */
export async function writeFileAtomic(
  path: string,
  data: string | Buffer,
  options: AtomicWriteOptions = {},
): Promise<void> {
  if (!options.folderReady) await prepareFolderFor(path, options.root);
  await writeThroughTemp(path, options, async (handle) => {
    await handle.writeFile(typeof data === 'string' ? scrub(data) : scrubBytes(data));
  });
}

/**
 * Both writers' frame: a temporary file of its own, written by `write`, fsynced, then renamed over
 * `path`; if `write` throws, the temporary file is removed and `path` keeps what it held.
 */
async function writeThroughTemp(
  path: string,
  options: AtomicWriteOptions,
  write: (handle: FileHandle) => Promise<void>,
): Promise<void> {
  const temp = tempPathFor(path, options.random);
  const handle = await openExclusive(temp);
  try {
    await write(handle);
    await handle.sync();
  } catch (error) {
    await handle.close().catch(() => {});
    await rm(temp, { force: true });
    throw error;
  }
  await handle.close();
  await moveIntoPlace(temp, path);
}

/** Where a streamed file's content goes, a piece at a time. */
export interface TextSink {
  write(text: string): Promise<void>;
}

/**
 * Text gathered before each write to disk: few system calls, and under V8's large-object size, so the
 * joined buffer dies young instead of waiting for a full collection.
 */
const STREAM_BUFFER_CHARS = 64 * 1024;

/**
 * Writes a file of any size as `produce` hands it over, with writeFileAtomic's guarantee: the content
 * goes to a temporary file of its own, is fsynced, then renamed over `path`. If `produce` throws, the
 * temporary file is removed and `path` keeps what it held before. Concurrent writers of one path each
 * have their own temporary file; the last rename wins.
 */
export async function writeFileAtomicStream(
  path: string,
  produce: (sink: TextSink) => Promise<void>,
  options: AtomicWriteOptions = {},
): Promise<void> {
  await prepareFolderFor(path, options.root);
  await writeThroughTemp(path, options, async (handle) => {
    await streamInto(handle, produce);
  });
}

/** `produce`'s text into the file, gathered into large writes and scrubbed as it leaves. */
async function streamInto(handle: FileHandle, produce: (sink: TextSink) => Promise<void>): Promise<void> {
  let pending: string[] = [];
  let pendingLength = 0;
  const flush = async (final = false): Promise<void> => {
    if (pendingLength === 0) return;
    // Scrubbed as it leaves; the tail of a piece waits for the next, so a secret cut in two is found whole.
    const text = scrub(pending.join(''));
    let cut = final ? text.length : Math.max(0, text.length - secretOverlap());
    // Never between the two halves of a surrogate pair: each half alone would be written as U+FFFD.
    if (cut > 0 && cut < text.length && /[\uD800-\uDBFF]/.test(text.charAt(cut - 1))) cut--;
    const bytes = Buffer.from(text.slice(0, cut), 'utf8');
    pending = cut === text.length ? [] : [text.slice(cut)];
    pendingLength = text.length - cut;
    for (let offset = 0; offset < bytes.length; ) {
      const { bytesWritten } = await handle.write(bytes, offset, bytes.length - offset);
      offset += bytesWritten;
    }
  };
  const sink: TextSink = {
    async write(text) {
      pending.push(text);
      pendingLength += text.length;
      if (pendingLength >= STREAM_BUFFER_CHARS + secretOverlap()) await flush();
    },
  };
  await produce(sink);
  await flush(true);
}

/** The last step of every writer: the complete, fsynced temporary file takes the final name. */
export async function moveIntoPlace(temp: string, path: string): Promise<void> {
  try {
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
}
