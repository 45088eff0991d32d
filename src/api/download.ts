// Downloads one result file: streamed (memory stays flat whatever the size), capped, counted, bounded
// in time, and stored by one of two sinks through the same reading loop: a file (a random exclusive
// temporary file, fsynced, and only then renamed into place, so a file under its final name is always
// complete and no planted link can redirect the write; download-file.ts) or a bucket object (below).
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { readdir, rename, rm } from 'node:fs/promises';
import { basename, dirname, extname, join } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { type Dispatcher, getGlobalDispatcher, request } from 'undici';
import { MediabatchError } from '../errors.js';
import { detectMediaType, type MediaType, SNIFF_BYTES, type TypedBy } from '../media/kind.js';
import type { MediaKind } from '../media/types.js';
import {
  isTempFor,
  prepareFolderFor,
  randomHex,
  syncFolder as syncFolderOf,
  tempPathFor,
} from '../util/fsatomic.js';
import { DiskError, type DownloadFailed, DownloadFailure, fail, type Sink, toDisk } from './download-core.js';
import { openFileSink } from './download-file.js';
import { describeNetworkError } from './outcome.js';

export { SYNC_EVERY_BYTES, THREAD_MIN_BYTES, WRITE_BLOCK_BYTES } from './download-file.js';

/** What the bytes, the Content-Type or the name said the result is. */
type Detected = MediaType & { typedBy: TypedBy };

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

export type { DownloadFailed, DownloadFailureType } from './download-core.js';

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

export type DownloadResult = DownloadSuccess | DownloadFailed;

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

function positive(options: DownloadOptions, name: keyof DownloadOptions, required: boolean): void {
  const value = options[name];
  if (value === undefined && !required) return;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new Error(`${name}: must be a positive number, got ${String(value)}`);
  }
}

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

/** Where an attempt got to, for the message of a transfer that broke off. */
interface Attempt {
  url: string;
  start?: URL;
  declared?: number;
  progress: { bytes: number };
}

type Opened = Awaited<ReturnType<typeof openResult>>;

function checkOptions(options: DownloadOptions): void {
  positive(options, 'maxBytes', true);
  positive(options, 'timeoutMs', true);
  positive(options, 'minBytesPerSecond', false);
  positive(options, 'minDeadlineMs', false);
}

async function openAttempt(attempt: Attempt, options: DownloadOptions): Promise<Opened> {
  attempt.start = checkUrl(attempt.url);
  const opened = await openResult(attempt.start, options);
  attempt.declared = opened.declared;
  return opened;
}

/** What a body gave: its size, the SHA-256 of what the sink stored, and its first bytes (they name the type). */
interface Received {
  bytes: number;
  sha256: string;
  head: Buffer;
}

/**
 * The one reading loop of both sinks (file and bucket). Every chunk is counted and checked against the cap
 * before the sink sees it. The sink is opened once the first bytes are in (a bucket object is named by
 * them), or at the end of a shorter body. On any failure the sink is aborted before this throws.
 */
async function receive(
  body: Dispatcher.ResponseData['body'],
  maxBytes: number,
  progress: { bytes: number },
  open: (head: Buffer) => Promise<Sink>,
): Promise<Received> {
  let sink: Sink | undefined;
  const early: Buffer[] = [];
  let head = Buffer.alloc(0);
  const start = async (): Promise<Sink> => {
    head = Buffer.concat(early);
    const opened = await open(head.subarray(0, SNIFF_BYTES));
    sink = opened;
    if (head.length > 0) await opened.write(head);
    return opened;
  };
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      progress.bytes += chunk.length;
      if (progress.bytes > maxBytes) {
        fail('too-large', `result file exceeded the limit of ${maxBytes} bytes; download stopped`, false);
      }
      if (sink === undefined) {
        early.push(chunk);
        if (progress.bytes >= SNIFF_BYTES) await start();
        continue;
      }
      const waiting = sink.write(chunk);
      if (waiting) await waiting;
    }
    const sha256 = await (sink ?? (await start())).finish();
    return { bytes: progress.bytes, sha256, head: head.subarray(0, SNIFF_BYTES) };
  } catch (error) {
    await (sink as Sink | undefined)?.abort(error);
    throw error;
  }
}

/** receive, bounded in time as a whole (bodyTimeout bounds each pause). */
async function receiveInTime(
  opened: Opened,
  options: DownloadOptions,
  progress: { bytes: number },
  open: (head: Buffer) => Promise<Sink>,
): Promise<Received> {
  const { response, final, declared } = opened;
  const deadline = bodyDeadline(response, final, declared, progress, options);
  try {
    return await receive(response.body, options.maxBytes, progress, open);
  } finally {
    clearTimeout(deadline);
  }
}

function checkLength(bytes: number, opened: Opened, options: DownloadOptions): void {
  const { declared, final } = opened;
  if (declared !== undefined && bytes !== declared) {
    fail('truncated', `download of ${shown(final)} got ${bytes} of ${declared} bytes`, true);
  }
  if (options.expectedBytes !== undefined && bytes !== options.expectedBytes) {
    fail(
      'truncated',
      `download of ${shown(final)} got ${bytes} bytes, expected ${options.expectedBytes}`,
      true,
    );
  }
}

/** The name the result is stored under: with detectType, the extension its bytes call for. */
function nameFor(name: string, type: Detected | undefined, options: DownloadOptions): string {
  return options.detectType && type && type.typedBy !== 'name' ? withExtension(name, type.ext) : name;
}

function success(
  received: Received,
  path: string,
  type: Detected | undefined,
  contentType: string | undefined,
): DownloadSuccess {
  return {
    ok: true,
    bytes: received.bytes,
    sha256: received.sha256,
    path,
    kind: type?.kind ?? 'unknown',
    ext: type?.ext ?? extname(path).slice(1),
    ...(contentType !== undefined && { contentType }),
    ...(type && { typedBy: type.typedBy }),
  };
}

/** Any error out of a download as its result: ours typed, the sink's local trouble as such, the rest a cut-off transfer. */
function failureOf(
  error: unknown,
  attempt: Attempt,
  local: (error: unknown) => DownloadFailed | undefined,
): DownloadFailed {
  if (error instanceof DownloadFailure) return error.failure;
  const mine = local(error);
  if (mine) return mine;
  const where = attempt.start ? shown(attempt.start) : attempt.url;
  const of = attempt.declared !== undefined ? ` of ${attempt.declared}` : '';
  return {
    ok: false,
    type: 'truncated',
    message: `download of ${where} broke off after ${attempt.progress.bytes}${of} bytes: ${describeNetworkError(error)}`,
    retrySafe: true,
  };
}

/** The folder the file goes in: made (real folders only, within root) and cleared of a crash's leftovers. */
async function folderFor(destPath: string, opened: Opened, options: DownloadOptions): Promise<string> {
  if (options.folderReady) return dirname(destPath);
  const folder = await prepareFolderFor(destPath, options.root).catch((error: unknown) => {
    discard(opened.response.body);
    return toDisk(error);
  });
  await removeStaleTemps(folder, basename(destPath));
  return folder;
}

/** Gives the complete, fsynced temporary file its name; the folder is fsynced so that the name lasts. */
async function place(temp: string, path: string, options: DownloadOptions): Promise<void> {
  try {
    // rename replaces whatever holds the name, a planted link included, and never writes through it.
    await rename(temp, path);
    if (options.syncFolder !== false) await syncFolder(dirname(path));
  } catch (error) {
    toDisk(error);
  }
}

/**
 * Downloads `url` to `destPath` (or, with detectType, to destPath with the extension its bytes call
 * for) through a random temporary file beside it. The folder is created if missing and must be a real
 * folder. Never throws for network, server or disk trouble, and never leaves a temporary file behind:
 * the temporary file's whole life is inside this one try.
 */
export async function downloadResult(
  url: string,
  destPath: string,
  options: DownloadOptions,
): Promise<DownloadResult> {
  checkOptions(options);
  const attempt: Attempt = { url, progress: { bytes: 0 } };
  let temp: string | undefined;
  try {
    const opened = await openAttempt(attempt, options);
    const folder = await folderFor(destPath, opened, options);
    const tempPath = tempPathFor(join(folder, basename(destPath)), options.random ?? randomHex);
    temp = tempPath;
    const received = await receiveInTime(opened, options, attempt.progress, () =>
      openFileSink(tempPath, opened.declared),
    );
    checkLength(received.bytes, opened, options);
    const contentType = header(opened.response.headers, 'content-type');
    const type = detectMediaType(received.head, contentType, destPath);
    const path = nameFor(destPath, type, options);
    await place(tempPath, path, options);
    return success(received, path, type, contentType);
  } catch (error) {
    if (temp !== undefined) await rm(temp, { force: true }).catch(() => {});
    return failureOf(error, attempt, (e) => (e instanceof DiskError ? diskFailure(e, destPath) : undefined));
  }
}

/**
 * A place that takes a result as a stream (a bucket): resolves once the object is complete and checked,
 * with the SHA-256 of the bytes it stored when it computed one (compared with the download's own).
 */
export type ObjectPut = (
  name: string,
  body: Readable,
  info: { expectedBytes?: number; contentType?: string; signal?: AbortSignal },
) => Promise<{ location: string; sha256?: string }>;

/**
 * Thrown by an ObjectPut for trouble on our side of the transfer (the bucket refuses, is unreachable):
 * reported like a disk problem, never as a problem of the result link.
 */
export class ObjectPutError extends MediabatchError {
  override name = 'ObjectPutError';
  constructor(
    message: string,
    readonly transient: boolean,
  ) {
    super(message);
  }
}

/** Room for a few network chunks between the download and the upload, so that neither waits per chunk. */
const OBJECT_PIPE_BYTES = 1024 * 1024;

/** The bucket sink: the body streams straight into `put` (no local copy), hashed on the way. */
class ObjectSink implements Sink {
  readonly #hash = createHash('sha256');
  readonly #pipe = new PassThrough({ highWaterMark: OBJECT_PIPE_BYTES });
  readonly #stored: Promise<{ location: string; sha256?: string }>;
  location: string | undefined;

  constructor(
    readonly name: string,
    put: ObjectPut,
    info: Parameters<ObjectPut>[2],
  ) {
    this.#stored = put(name, this.#pipe, info);
    // Seen by write() and finish(); this only keeps an early failure from being reported as unhandled.
    this.#stored.catch(() => {});
  }

  write(chunk: Buffer): Promise<void> | undefined {
    this.#hash.update(chunk);
    if (this.#pipe.write(chunk)) return undefined;
    // The put failing while the pipe is full would leave 'drain' never coming: whichever comes first.
    return Promise.race([
      once(this.#pipe, 'drain').then(() => undefined),
      this.#stored.then(() => undefined),
    ]);
  }

  async finish(): Promise<string> {
    this.#pipe.end();
    const stored = await this.#stored;
    const sha256 = this.#hash.digest('hex');
    if (stored.sha256 !== undefined && stored.sha256 !== sha256) {
      throw new ObjectPutError(
        `the bucket received other bytes than were downloaded for ${this.name} (SHA-256 ${stored.sha256}, downloaded ${sha256}); it will be fetched again`,
        true,
      );
    }
    this.location = stored.location;
    return sha256;
  }

  async abort(error: unknown): Promise<void> {
    // The put sees its body fail and drops the upload (a multipart upload is aborted, never left half).
    this.#pipe.destroy(error instanceof Error ? error : new Error(String(error)));
    await this.#stored.catch(() => {});
  }
}

/**
 * Like downloadResult, into an object store instead of a file: the same reading loop into the bucket sink.
 * The name gets the extension its first bytes show before a byte is stored, and the result is whole only
 * when `put` resolves (a bucket's multipart upload is complete or absent, never half).
 */
export async function downloadResultToObject(
  url: string,
  name: string,
  put: ObjectPut,
  options: DownloadOptions,
): Promise<DownloadResult> {
  checkOptions(options);
  const attempt: Attempt = { url, progress: { bytes: 0 } };
  try {
    const opened = await openAttempt(attempt, options);
    const contentType = header(opened.response.headers, 'content-type');
    let type: Detected | undefined;
    let sink: ObjectSink | undefined;
    const received = await receiveInTime(opened, options, attempt.progress, async (head) => {
      type = detectMediaType(head, contentType, name);
      sink = new ObjectSink(nameFor(name, type, options), put, {
        ...(opened.declared !== undefined ? { expectedBytes: opened.declared } : {}),
        ...(contentType !== undefined ? { contentType } : {}),
        ...(options.signal ? { signal: options.signal } : {}),
      });
      return sink;
    });
    checkLength(received.bytes, opened, options);
    const stored = sink as ObjectSink | undefined;
    return success(received, stored?.location ?? name, type, contentType);
  } catch (error) {
    return failureOf(error, attempt, (e) =>
      e instanceof ObjectPutError
        ? { ok: false, type: 'disk', message: e.message, retrySafe: e.transient, local: true }
        : undefined,
    );
  }
}
