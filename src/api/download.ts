// Downloads one result file: streamed (memory stays flat whatever the size), capped, counted, bounded
// in time, written to a random exclusive temporary file, fsynced, and only then renamed into place, so
// a file under its final name is always complete and no planted link can redirect the write.
import { createHash } from 'node:crypto';
import { type FileHandle, readdir, rename, rm } from 'node:fs/promises';
import { basename, dirname, extname, join } from 'node:path';
import { Readable, Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { type Dispatcher, getGlobalDispatcher, request } from 'undici';
import { detectMediaType, SNIFF_BYTES, type TypedBy } from '../media/kind.js';
import type { MediaKind } from '../media/types.js';
import {
  isTempFor,
  openExclusive,
  prepareFolderFor,
  randomHex,
  syncFolder as syncFolderOf,
  tempPathFor,
} from '../util/fsatomic.js';
import { describeNetworkError } from './outcome.js';

export interface DownloadOptions {
  /** Refuse (and stop reading) beyond this many bytes. */
  maxBytes: number;
  /** Longest wait for the headers, and longest pause between two chunks of the body. */
  timeoutMs: number;
  dispatcher?: Dispatcher;
  /** When the size is known in advance, a different byte count fails the download. */
  expectedBytes?: number;
  maxRedirects?: number;
  signal?: AbortSignal;
  /** Name the file by what its bytes are: `1.png` holding a JPEG is saved as `1.jpg`. Default false. */
  detectType?: boolean;
  /**
   * The slowest transfer accepted, in bytes per second (default 64 KiB/s): the body must arrive within
   * max(minDeadlineMs, size / minBytesPerSecond), the size being Content-Length, else maxBytes.
   */
  minBytesPerSecond?: number;
  /** The shortest overall deadline for a body, in milliseconds (default 60,000). */
  minDeadlineMs?: number;
  /** The user's output folder: every folder between it and the file must be a real folder. */
  root?: string;
  /**
   * The caller made the file's folder (a real folder, within root) and cleared it of leftover temporary
   * files for this name: neither is done again, a few file-system calls fewer per file.
   */
  folderReady?: boolean;
  /**
   * Default true: the folder is fsynced after the rename, so the name is durable when this returns. False
   * when the caller fsyncs the folder once after writing more there (a task's job.json beside its files).
   */
  syncFolder?: boolean;
  /** The job record's `link_expired_at`: a link refused after it is reported as 'expired'. */
  linkExpiresAt?: string | number | Date;
  /** Milliseconds since the epoch; compared with linkExpiresAt only. */
  now?: () => number;
  /** 16 hex characters for the temporary file's name; tests pass a fixed one. */
  random?: () => string;
}

export type DownloadFailureType =
  | 'bad-url'
  | 'expired'
  /** HTTP 401/403/404/410 on the link: fetch the job record again and try its fresh link. */
  | 'link-refused'
  | 'too-large'
  | 'truncated'
  | 'http-error'
  | 'network'
  | 'disk';

export interface DownloadSuccess {
  ok: true;
  bytes: number;
  sha256: string;
  /** Where the file is: destPath, or destPath with the detected extension when detectType is set. */
  path: string;
  /** 'unknown' when neither the bytes, the Content-Type nor the name told. */
  kind: MediaKind | 'unknown';
  /** The detected extension, or the final name's own when nothing was detected. */
  ext: string;
  contentType?: string;
  /** What told the type; absent when nothing did. */
  typedBy?: TypedBy;
}

export interface DownloadFailed {
  ok: false;
  type: DownloadFailureType;
  message: string;
  /** Trying the same link again may work (a network hiccup, a cut-off transfer, a 5xx). */
  retrySafe: boolean;
  httpStatus?: number;
  /** For 'disk': the errno code (ENOSPC, EROFS, …) or EUNSAFEPATH. */
  localCode?: string;
  /** Set for 'disk': the trouble is on this machine, not at the server; retrying the link cannot help. */
  local?: true;
}

export type DownloadResult = DownloadSuccess | DownloadFailed;

class DownloadFailure extends Error {
  constructor(readonly failure: DownloadFailed) {
    super(failure.message);
  }
}

const fail = (type: DownloadFailureType, message: string, retrySafe: boolean, httpStatus?: number): never => {
  throw new DownloadFailure({
    ok: false,
    type,
    message,
    retrySafe,
    ...(httpStatus !== undefined && { httpStatus }),
  });
};

/** A local file-system error, kept whole so that its code reaches the caller. */
class DiskError extends Error {
  constructor(override readonly cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause));
  }
}

const toDisk = (error: unknown): never => {
  throw error instanceof DiskError || error instanceof DownloadFailure ? error : new DiskError(error);
};

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const REFUSED = new Set([401, 403, 404, 410]);
const RETRYABLE_STATUS = (status: number) => status >= 500 || status === 408 || status === 429;
const DEFAULT_MIN_BYTES_PER_SECOND = 64 * 1024;
const DEFAULT_MIN_DEADLINE_MS = 60_000;

/** What went wrong on the disk, in words, and what the person can do about it. */
const DISK_ADVICE: Record<string, [what: string, todo: string]> = {
  ENOSPC: ['no space left on device', 'free space, then run again'],
  EDQUOT: ['disk quota exceeded', 'free space or raise the quota, then run again'],
  EACCES: ['permission denied', 'make the output folder writable for this user, then run again'],
  EPERM: ['operation not permitted', 'make the output folder writable for this user, then run again'],
  EROFS: ['read-only file system', 'choose an output folder on a writable disk, then run again'],
  EIO: ['input/output error', 'check the disk (failing or disconnected?), then run again'],
  ENOTDIR: ['a file stands where a folder is needed', 'move that file away, then run again'],
  ELOOP: ['a symbolic link stands in the way', 'remove the link, then run again'],
  EEXIST: ['a file already has the temporary name', 'remove it, then run again'],
  EISDIR: ['a folder stands where the file goes', 'move that folder away, then run again'],
};

/** What a file-system error code means and what to do, in words; undefined for a code without advice. */
export function diskAdvice(code: string): readonly [what: string, remedy: string] | undefined {
  return Object.hasOwn(DISK_ADVICE, code) ? DISK_ADVICE[code] : undefined;
}

function diskFailure(error: unknown, dest: string): DownloadFailed {
  const cause = error instanceof DiskError ? error.cause : error;
  const { code, path } = (cause ?? {}) as { code?: unknown; path?: unknown };
  const localCode = typeof code === 'string' ? code : 'EUNKNOWN';
  const base = {
    ok: false as const,
    type: 'disk' as const,
    retrySafe: false,
    localCode,
    local: true as const,
  };
  if (localCode === 'EUNSAFEPATH') {
    return { ...base, message: `cannot write ${dest}: ${(cause as Error).message}` };
  }
  const at = typeof path === 'string' && path !== dest ? ` (at ${path})` : '';
  const advice = DISK_ADVICE[localCode];
  if (advice) return { ...base, message: `${advice[0]} writing ${dest}${at}: ${advice[1]}` };
  const text = cause instanceof Error ? cause.message : String(cause);
  return { ...base, message: `cannot write ${dest}${at}: ${text}` };
}

/** Strips the query (signatures) so that a message never carries a link's credentials. */
function shown(url: URL): string {
  return `${url.origin}${url.pathname}`;
}

function checkUrl(raw: string, base?: URL): URL {
  let url: URL | undefined;
  try {
    url = base ? new URL(raw, base) : new URL(raw);
  } catch {
    url = undefined;
  }
  if (!url) return fail('bad-url', `result link: not a valid URL, got ${raw.slice(0, 100)}`, false);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return fail('bad-url', `result link: only http and https links are followed, got ${url.protocol}`, false);
  }
  return url;
}

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Writes all of `bytes` at `position`: an explicit position keeps the file in order when two writes overlap. */
async function writeAllAt(file: FileHandle, bytes: Buffer, position: number): Promise<void> {
  let offset = 0;
  while (offset < bytes.length) {
    const { bytesWritten } = await file.write(bytes, offset, bytes.length - offset, position + offset);
    offset += bytesWritten;
  }
}

/**
 * Bytes gathered from the network (about 64 KB a chunk) before one write: a write per chunk costs a
 * system call and a thread-pool round trip each. Not more: on the bench machine (a VM, Linux 6.18, ext4)
 * larger writes fill the page cache with larger folios, whose fresh memory is slower to fill. Kernel
 * time measured for a 200 MB download: 1 MB blocks 600 ms, 256 KB 250 ms; for 500 MB: 256 KB 1.0 s,
 * 128 KB 0.6 s (ratio to curl 0.45 against 0.57; at 200 MB 128 and 256 KB were even).
 */
export const WRITE_BLOCK_BYTES = 128 * 1024;

/**
 * Blocks in the ring. With two, one written at a time, a 500 MB download waited for the disk at almost
 * every block; four, up to three written at once, measured 0.71 of curl against 0.64 (8 runs each).
 */
const WRITE_BLOCKS = 4;

/** fsync of the folder makes the rename itself durable. */
async function syncFolder(folder: string): Promise<void> {
  await syncFolderOf(folder).catch((error: unknown) => {
    throw new DiskError(error);
  });
}

/**
 * Temporary files of this name left by a crashed process: a partial video can be gigabytes. One task's
 * files are downloaded by one process at a time (the task's lease), so none of these is in use.
 */
async function removeStaleTemps(folder: string, finalName: string): Promise<void> {
  const names = await readdir(folder).catch(() => [] as string[]);
  for (const name of names) {
    // `<name>.part` is the fixed name earlier versions used.
    if (name === `${finalName}.part` || isTempFor(name, finalName)) {
      await rm(join(folder, name), { force: true }).catch(() => {});
    }
  }
}

/** Stops reading a body nobody will consume; undici reports that as an error nobody needs to hear. */
function discard(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => {});
  body.destroy();
}

function withExtension(path: string, ext: string): string {
  const current = extname(path);
  return `${path.slice(0, path.length - current.length)}.${ext}`;
}

function expiryOf(value: DownloadOptions['linkExpiresAt']): number | undefined {
  if (value === undefined) return undefined;
  const at = value instanceof Date ? value.getTime() : typeof value === 'number' ? value : Date.parse(value);
  return Number.isFinite(at) ? at : undefined;
}

function seconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(ms < 10_000 ? 1 : 0))} s`;
}

async function openResponse(
  start: URL,
  options: DownloadOptions,
): Promise<{ url: URL; response: Dispatcher.ResponseData }> {
  const dispatcher = options.dispatcher ?? getGlobalDispatcher();
  let url = start;
  for (let hop = 0; ; hop++) {
    let response: Dispatcher.ResponseData;
    try {
      // undici's request() never decodes Content-Encoding: a result is kept byte for byte as served.
      response = await request(url, {
        dispatcher,
        method: 'GET',
        headersTimeout: options.timeoutMs,
        bodyTimeout: options.timeoutMs,
        ...(options.signal && { signal: options.signal }),
      });
    } catch (error) {
      return fail('network', `download of ${shown(url)} failed: ${describeNetworkError(error)}`, true);
    }
    const location = header(response.headers, 'location');
    if (!REDIRECTS.has(response.statusCode) || location === undefined) return { url, response };
    await response.body.dump();
    if (hop >= (options.maxRedirects ?? 5)) {
      return fail(
        'http-error',
        `download of ${shown(start)}: more than ${hop} redirects`,
        false,
        response.statusCode,
      );
    }
    url = checkUrl(location, url);
  }
}

/**
 * Streams a body to a new temporary file through a ring of blocks: one fills from the network while the
 * others are being written, so reading waits for the disk only when it is all the other blocks behind.
 * Each block is hashed just before its write, so the digest is of exactly the bytes written. Memory is
 * the ring (512 KB), whatever the size; a body under one block gets one block of its own size.
 */
async function streamToFile(
  body: Dispatcher.ResponseData['body'],
  temp: string,
  maxBytes: number,
  declared: number | undefined,
  progress: { bytes: number },
): Promise<{ bytes: number; sha256: string; head: Buffer }> {
  const hash = createHash('sha256');
  const handle = await openExclusive(temp).catch(toDisk);
  const blockSize = Math.max(1, Math.min(WRITE_BLOCK_BYTES, declared ?? WRITE_BLOCK_BYTES));
  // Allocated when first needed: a small image never holds a second block, an empty body none.
  const blocks: (Buffer | undefined)[] = new Array(WRITE_BLOCKS).fill(undefined);
  // Never rejected: a write's error is kept in `failed` and reported at the next step or at the end.
  const writing: (Promise<void> | undefined)[] = new Array(WRITE_BLOCKS).fill(undefined);
  let failed: DiskError | undefined;
  let current = 0;
  let filled = 0;
  let position = 0;
  let head = Buffer.alloc(0);

  const startWrite = (): void => {
    const block = blocks[current];
    if (block === undefined || filled === 0) return;
    const bytes = block.subarray(0, filled);
    hash.update(bytes);
    const index = current;
    // Writes may overlap (one thread-pool round trip between two writes left the disk idle): each goes
    // to its own position, so the file is in order whichever finishes first.
    writing[index] = writeAllAt(handle, bytes, position).then(
      () => {
        writing[index] = undefined;
      },
      (error: unknown) => {
        writing[index] = undefined;
        failed ??= new DiskError(error);
      },
    );
    position += filled;
    filled = 0;
    current = (current + 1) % WRITE_BLOCKS;
  };

  let stopped = false;
  const settle = async (): Promise<void> => {
    while (writing.some((write) => write !== undefined)) await Promise.all(writing);
  };

  /** Copies `chunk` from `from` on into the blocks, waiting only for a block whose write is not done. */
  const take = (chunk: Buffer, from: number, done: (error?: Error | null) => void): void => {
    let offset = from;
    while (offset < chunk.length) {
      // The body broke off while this chunk waited for a block: nothing more is written.
      if (stopped) return;
      if (failed) {
        done(failed);
        return;
      }
      const pending = writing[current];
      if (pending !== undefined) {
        void pending.then(() => take(chunk, offset, done));
        return;
      }
      let block = blocks[current];
      if (block === undefined) {
        // Unfilled bytes are never written (only subarray(0, filled) is), so no old memory can leak out.
        block = Buffer.allocUnsafeSlow(blockSize);
        blocks[current] = block;
      }
      const copied = chunk.copy(block, filled, offset, Math.min(chunk.length, offset + blockSize - filled));
      filled += copied;
      offset += copied;
      if (filled === blockSize) startWrite();
    }
    done();
  };

  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      progress.bytes += chunk.length;
      if (progress.bytes > maxBytes) {
        done(new DownloadFailure({ ok: false, type: 'too-large', message: '', retrySafe: false }));
        return;
      }
      if (head.length < SNIFF_BYTES)
        head = Buffer.concat([head, chunk.subarray(0, SNIFF_BYTES - head.length)]);
      take(chunk, 0, done);
    },
    final(done) {
      startWrite();
      settle()
        .then(() => {
          if (failed) throw failed;
          return handle.sync().catch((error: unknown) => {
            throw new DiskError(error);
          });
        })
        .then(
          () => done(),
          (error: unknown) => done(error as Error),
        );
    },
    destroy(error, callback) {
      stopped = true;
      callback(error);
    },
  });
  try {
    await pipeline(body, sink);
  } finally {
    // A write still under way when the body broke off finishes before the file is closed and removed.
    await settle();
    await handle.close().catch(() => {});
  }
  return { bytes: progress.bytes, sha256: hash.digest('hex'), head };
}

function positive(options: DownloadOptions, name: keyof DownloadOptions, required: boolean): void {
  const value = options[name];
  if (value === undefined && !required) return;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new Error(`${name}: must be a positive number, got ${String(value)}`);
  }
}

/**
 * Downloads `url` to `destPath` (or, with detectType, to destPath with the extension its bytes call
 * for) through a random temporary file beside it. The folder is created if missing and must be a real
 * folder. Never throws for network, server or disk trouble, and never leaves a temporary file behind.
 */
/** Every wait has an end: bodyTimeout bounds each pause, this bounds the whole body (at a minimum rate). */
function bodyDeadline(
  response: Dispatcher.ResponseData,
  final: URL,
  declared: number | undefined,
  progress: { bytes: number },
  options: DownloadOptions,
): NodeJS.Timeout {
  const expected = declared ?? options.maxBytes;
  const rate = options.minBytesPerSecond ?? DEFAULT_MIN_BYTES_PER_SECOND;
  const allowedMs = Math.max(options.minDeadlineMs ?? DEFAULT_MIN_DEADLINE_MS, (expected / rate) * 1000);
  return setTimeout(() => {
    const of = declared !== undefined ? ` of ${declared}` : '';
    response.body.destroy(
      new DownloadFailure({
        ok: false,
        type: 'network',
        message: `download of ${shown(final)} was too slow: ${progress.bytes}${of} bytes in ${seconds(allowedMs)}, under ${rate} bytes/s; abandoned`,
        retrySafe: true,
      }),
    );
  }, allowedMs);
}

/** The response of a result link, answered 2xx and within the size limit; every other answer is a failure. */
async function openResult(
  start: URL,
  options: DownloadOptions,
): Promise<{ final: URL; response: Dispatcher.ResponseData; declared: number | undefined }> {
  const { url: final, response } = await openResponse(start, options);
  const { statusCode: status } = response;
  if (REFUSED.has(status)) {
    await response.body.dump();
    const expiry = expiryOf(options.linkExpiresAt);
    if (expiry !== undefined && (options.now ?? Date.now)() >= expiry) {
      return fail(
        'expired',
        `result link expired at ${new Date(expiry).toISOString()} (HTTP ${status}) for ${shown(final)}: it can no longer be downloaded`,
        false,
        status,
      );
    }
    return fail(
      'link-refused',
      `result link refused (HTTP ${status}) for ${shown(final)}: fetch the job again for a fresh link`,
      false,
      status,
    );
  }
  if (status < 200 || status >= 300) {
    await response.body.dump();
    return fail(
      'http-error',
      `download of ${shown(final)} answered HTTP ${status}`,
      RETRYABLE_STATUS(status),
      status,
    );
  }
  const length = header(response.headers, 'content-length');
  const declared = length !== undefined && /^\d+$/.test(length) ? Number(length) : undefined;
  if (declared !== undefined && declared > options.maxBytes) {
    discard(response.body);
    return fail(
      'too-large',
      `result file is ${declared} bytes, over the limit of ${options.maxBytes}`,
      false,
    );
  }

  return { final, response, declared };
}

// One function on purpose: the temporary file's whole life (open, stream, check, fsync, rename or remove)
// is kept in one try/finally, so that no path out of it can leave a partial file behind.
export async function downloadResult(
  url: string,
  destPath: string,
  options: DownloadOptions,
): Promise<DownloadResult> {
  positive(options, 'maxBytes', true);
  positive(options, 'timeoutMs', true);
  positive(options, 'minBytesPerSecond', false);
  positive(options, 'minDeadlineMs', false);
  let temp: string | undefined;
  let start: URL | undefined;
  let deadline: NodeJS.Timeout | undefined;
  const progress = { bytes: 0 };
  let declared: number | undefined;
  try {
    start = checkUrl(url);
    const opened = await openResult(start, options);
    const { final, response } = opened;
    declared = opened.declared;

    const folder = options.folderReady
      ? dirname(destPath)
      : await prepareFolderFor(destPath, options.root).catch((error: unknown) => {
          discard(response.body);
          return toDisk(error);
        });
    if (!options.folderReady) await removeStaleTemps(folder, basename(destPath));
    temp = tempPathFor(join(folder, basename(destPath)), options.random ?? randomHex);

    deadline = bodyDeadline(response, final, declared, progress, options);

    const result = await streamToFile(response.body, temp, options.maxBytes, declared, progress).catch(
      (error: unknown) => {
        if (error instanceof DownloadFailure && error.failure.type === 'too-large') {
          fail(
            'too-large',
            `result file exceeded the limit of ${options.maxBytes} bytes; download stopped`,
            false,
          );
        }
        throw error;
      },
    );
    clearTimeout(deadline);
    const received = result.bytes;
    if (declared !== undefined && received !== declared) {
      fail('truncated', `download of ${shown(final)} got ${received} of ${declared} bytes`, true);
    }
    if (options.expectedBytes !== undefined && received !== options.expectedBytes) {
      fail(
        'truncated',
        `download of ${shown(final)} got ${received} bytes, expected ${options.expectedBytes}`,
        true,
      );
    }
    const contentType = header(response.headers, 'content-type');
    const type = detectMediaType(result.head, contentType, destPath);
    const path =
      options.detectType && type && type.typedBy !== 'name' ? withExtension(destPath, type.ext) : destPath;
    try {
      // rename replaces whatever holds the name, a planted link included, and never writes through it.
      await rename(temp, path);
      if (options.syncFolder !== false) await syncFolder(dirname(path));
    } catch (error) {
      toDisk(error);
    }
    return {
      ok: true,
      bytes: result.bytes,
      sha256: result.sha256,
      path,
      kind: type?.kind ?? 'unknown',
      ext: type?.ext ?? extname(path).slice(1),
      ...(contentType !== undefined && { contentType }),
      ...(type && { typedBy: type.typedBy }),
    };
  } catch (error) {
    clearTimeout(deadline);
    if (temp !== undefined) await rm(temp, { force: true }).catch(() => {});
    if (error instanceof DownloadFailure) return error.failure;
    if (error instanceof DiskError) return diskFailure(error, destPath);
    const where = start ? shown(start) : url;
    const of = declared !== undefined ? ` of ${declared}` : '';
    return {
      ok: false,
      type: 'truncated',
      message: `download of ${where} broke off after ${progress.bytes}${of} bytes: ${describeNetworkError(error)}`,
      retrySafe: true,
    };
  }
}

/** A place that takes a result as a stream (a bucket): resolves once the object is complete and checked. */
export type ObjectPut = (
  name: string,
  body: Readable,
  info: { expectedBytes?: number; contentType?: string; signal?: AbortSignal },
) => Promise<{ location: string }>;

/**
 * Thrown by an ObjectPut for trouble on our side of the transfer (the bucket refuses, is unreachable):
 * reported like a disk problem, never as a problem of the result link.
 */
export class ObjectPutError extends Error {
  override name = 'ObjectPutError';
  constructor(
    message: string,
    readonly transient: boolean,
  ) {
    super(message);
  }
}

/**
 * Like downloadResult, into an object store instead of a file: the body streams straight through (no
 * local copy), the name gets the extension its first bytes show, and the result is whole only when `put`
 * resolves (a bucket's multipart upload is complete or absent, never half).
 */
export async function downloadResultToObject(
  url: string,
  name: string,
  put: ObjectPut,
  options: DownloadOptions,
): Promise<DownloadResult> {
  positive(options, 'maxBytes', true);
  positive(options, 'timeoutMs', true);
  let start: URL | undefined;
  let deadline: NodeJS.Timeout | undefined;
  const progress = { bytes: 0 };
  let declared: number | undefined;
  try {
    start = checkUrl(url);
    const opened = await openResult(start, options);
    const { final, response } = opened;
    declared = opened.declared;
    deadline = bodyDeadline(response, final, declared, progress, options);
    // The first bytes name the file's type, so the object gets its final name before a byte is stored.
    const chunks = response.body[Symbol.asyncIterator]();
    const first: Buffer[] = [];
    let headBytes = 0;
    while (headBytes < SNIFF_BYTES) {
      const next = await chunks.next();
      if (next.done) break;
      const chunk = Buffer.from(next.value as Uint8Array);
      first.push(chunk);
      headBytes += chunk.length;
    }
    const head = Buffer.concat(first);
    const contentType = header(response.headers, 'content-type');
    const type = detectMediaType(head.subarray(0, SNIFF_BYTES), contentType, name);
    const finalName =
      options.detectType && type && type.typedBy !== 'name' ? withExtension(name, type.ext) : name;
    const hash = createHash('sha256');
    const counted = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        progress.bytes += chunk.length;
        if (progress.bytes > options.maxBytes) {
          done(
            new DownloadFailure({
              ok: false,
              type: 'too-large',
              message: `result file exceeded the limit of ${options.maxBytes} bytes; download stopped`,
              retrySafe: false,
            }),
          );
          return;
        }
        hash.update(chunk);
        done(null, chunk);
      },
    });
    const body = Readable.from(
      (async function* () {
        if (head.length > 0) yield head;
        for (;;) {
          const next = await chunks.next();
          if (next.done) return;
          yield Buffer.from(next.value as Uint8Array);
        }
      })(),
    );
    let broken: unknown;
    const remember = (error: unknown) => {
      broken ??= error;
    };
    body.on('error', remember);
    counted.on('error', remember);
    const stored = await put(finalName, body.pipe(counted), {
      ...(declared !== undefined ? { expectedBytes: declared } : {}),
      ...(contentType !== undefined ? { contentType } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
    }).catch((error: unknown) => {
      // A broken transfer (or one past the limit) shows up as the put's failure: name the real cause.
      throw broken ?? error;
    });
    clearTimeout(deadline);
    if (declared !== undefined && progress.bytes !== declared) {
      fail('truncated', `download of ${shown(final)} got ${progress.bytes} of ${declared} bytes`, true);
    }
    return {
      ok: true,
      bytes: progress.bytes,
      sha256: hash.digest('hex'),
      path: stored.location,
      kind: type?.kind ?? 'unknown',
      ext: type?.ext ?? extname(finalName).slice(1),
      ...(contentType !== undefined && { contentType }),
      ...(type && { typedBy: type.typedBy }),
    };
  } catch (error) {
    clearTimeout(deadline);
    if (error instanceof DownloadFailure) return error.failure;
    if (error instanceof ObjectPutError) {
      return { ok: false, type: 'disk', message: error.message, retrySafe: error.transient, local: true };
    }
    const where = start ? shown(start) : url;
    const of = declared !== undefined ? ` of ${declared}` : '';
    return {
      ok: false,
      type: 'truncated',
      message: `download of ${where} broke off after ${progress.bytes}${of} bytes: ${describeNetworkError(error)}`,
      retrySafe: true,
    };
  }
}
