// Local input files named in a manifest (`file:relative/path` or `{ file: path }`): where they are, whether
// they may be used (inside the manifest's folder, a regular file, within the field's size, of the field's
// media kind by its bytes), and their SHA-256, which is their name in the bucket.
import { createHash } from 'node:crypto';
import { constants, createReadStream } from 'node:fs';
import { open, realpath } from 'node:fs/promises';
import { extname, isAbsolute, relative, resolve } from 'node:path';
import { MediabatchError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import { sniff } from './sniff.js';
import type { MediaKind } from './types.js';

/** The relative path of a local input, or undefined when the value is not one. */
export function localRef(value: unknown): string | undefined {
  if (typeof value === 'string' && value.startsWith('file:') && !value.startsWith('file://')) {
    const path = value.slice('file:'.length);
    return path === '' ? undefined : path;
  }
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const keys = Object.keys(value);
    const file = (value as Record<string, unknown>)['file'];
    if (keys.length === 1 && typeof file === 'string' && file !== '') return file;
  }
  return undefined;
}

/** Where a local input sits in a request: a field, or one item of a field's list (the frames of stream-2-0-fast). */
export interface LocalRefAt {
  field: string;
  /** The item's position when the field holds a list. */
  index?: number;
  path: string;
}

/**
 * Every local input of a request body: top-level values and the items of top-level lists (a frame list
 * holds URLs as items; nothing deeper holds media in any model's request).
 */
export function localRefsIn(body: Readonly<Record<string, unknown>>): LocalRefAt[] {
  const out: LocalRefAt[] = [];
  for (const [field, value] of Object.entries(body)) {
    if (Array.isArray(value)) {
      value.forEach((item: unknown, index) => {
        const path = localRef(item);
        if (path !== undefined) out.push({ field, index, path });
      });
      continue;
    }
    const path = localRef(value);
    if (path !== undefined) out.push({ field, path });
  }
  return out;
}

/** The body with each local input replaced by `link(path)` (a copy; lists copied too). */
export async function replaceLocalRefs(
  body: Readonly<Record<string, unknown>>,
  link: (at: LocalRefAt) => Promise<string>,
): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = { ...body };
  for (const at of localRefsIn(body)) {
    const url = await link(at);
    if (at.index === undefined) {
      out[at.field] = url;
      continue;
    }
    // The list is copied once, so the stored body keeps its `file:` items.
    if (out[at.field] === body[at.field]) out[at.field] = [...(body[at.field] as unknown[])];
    (out[at.field] as unknown[])[at.index] = url;
  }
  return out;
}

export interface LocalInput {
  /** As the user wrote it, for messages. */
  path: string;
  /** The resolved path that was checked and is read. */
  real: string;
  bytes: number;
  /** `.jpg`, `.mp4`…: kept on the bucket key so services that look at it see the right type. */
  ext: string;
  contentType: string;
  kind: MediaKind;
}

const IMAGE_TYPES: Array<[string, (b: Buffer) => boolean]> = [
  ['image/jpeg', (b) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff],
  [
    'image/png',
    (b) => b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])),
  ],
  ['image/gif', (b) => b.toString('latin1', 0, 4) === 'GIF8'],
  ['image/webp', (b) => b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP'],
];

const AUDIO_TYPES: Record<string, string> = {
  mp3: 'audio/mpeg',
  wav: 'audio/wav',
  flac: 'audio/flac',
  ogg: 'audio/ogg',
};

/** The media type the bytes say, if it is one the field accepts. */
function typeFor(head: Buffer, kind: MediaKind): string | undefined {
  if (kind === 'image') return IMAGE_TYPES.find(([, test]) => test(head))?.[0];
  const s = sniff(head);
  if (s.container === 'unsupported') return undefined;
  if (kind === 'video') return s.container === 'iso' ? 'video/mp4' : undefined;
  return s.container === 'iso' ? 'audio/mp4' : AUDIO_TYPES[s.container];
}

function inside(dir: string, path: string): boolean {
  const rel = relative(dir, path);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
}

/** A local input that cannot be used; the message is what follows `field: ` in the located problem. */
export class LocalInputError extends MediabatchError {
  override name = 'LocalInputError';
  override readonly exitCode = EXIT.invalid;
}

/**
 * Checks one local input for a media field: contained in `dir` once symlinks are resolved (unless
 * `allowOutside`), a regular file, at most `maxBytes`, and of `kind` by its first bytes.
 */
export async function checkLocalInput(
  dir: string,
  path: string,
  kind: MediaKind,
  opts: { maxBytes: number; allowOutside?: boolean },
): Promise<LocalInput> {
  const absolute = resolve(dir, path);
  const outside = `file:${path} is outside the manifest's folder; move it inside (or use --allow-outside-data)`;
  if (!opts.allowOutside && !inside(resolve(dir), absolute)) throw new LocalInputError(outside);
  let real: string;
  try {
    real = await realpath(absolute);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new LocalInputError(
      `file:${path}: ${code === 'ENOENT' ? 'no such file' : `cannot read it (${code})`}`,
    );
  }
  if (!opts.allowOutside && !inside(await realpath(dir).catch(() => resolve(dir)), real)) {
    throw new LocalInputError(outside);
  }
  // O_NONBLOCK: a FIFO is refused by the regular-file check below rather than waited on.
  const handle = await open(real, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0)).catch(
    (error: NodeJS.ErrnoException) => {
      throw new LocalInputError(`file:${path}: cannot read it (${error.code})`);
    },
  );
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new LocalInputError(`file:${path} is not a regular file`);
    if (info.size > opts.maxBytes) {
      throw new LocalInputError(
        `file:${path} is ${over(info.size, opts.maxBytes)}; this field takes at most ${mb(opts.maxBytes)}`,
      );
    }
    const head = Buffer.alloc(Math.min(512, info.size));
    await handle.read(head, 0, head.length, 0);
    const contentType = typeFor(head, kind);
    if (contentType === undefined) {
      const s = sniff(head);
      const what = s.container === 'unsupported' ? (s.name ?? 'not a media file we know') : s.container;
      throw new LocalInputError(`file:${path} is not ${kind === 'image' ? 'an image' : `${kind}`} (${what})`);
    }
    return { path, real, bytes: info.size, ext: extname(real).toLowerCase(), contentType, kind };
  } finally {
    await handle.close();
  }
}

/** Decimal MB, as the spec's limits are written ("Up to 10 MB" is 10,000,000 bytes); bytes below one MB. */
function mb(bytes: number): string {
  return bytes >= 1e6 ? `${Math.round(bytes / 1e5) / 10} MB` : `${bytes.toLocaleString('en-US')} bytes`;
}

/** The file's size in MB, or in bytes when that would read the same as the limit ("10 MB; at most 10 MB"). */
function over(bytes: number, limit: number): string {
  return mb(bytes) === mb(limit) ? `${bytes.toLocaleString('en-US')} bytes` : mb(bytes);
}

/** The SHA-256 of a file, streamed. */
export function sha256File(path: string): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const hash = createHash('sha256');
    createReadStream(path)
      .on('data', (chunk) => hash.update(chunk))
      .on('error', reject)
      .on('end', () => resolvePromise(hash.digest('hex')));
  });
}
