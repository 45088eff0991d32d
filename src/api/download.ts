// Downloads one result file: streamed (memory stays flat whatever the size), capped, counted,
// fsynced, and only then renamed into place, so a file under its final name is always complete.
import { createHash } from 'node:crypto';
import { type FileHandle, mkdir, open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { type Dispatcher, getGlobalDispatcher, request } from 'undici';
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
}

export type DownloadFailureType =
  | 'bad-url'
  | 'expired'
  | 'too-large'
  | 'truncated'
  | 'http-error'
  | 'network'
  | 'disk';

export type DownloadResult =
  | { ok: true; bytes: number; sha256: string }
  | {
      ok: false;
      type: DownloadFailureType;
      message: string;
      /** Trying the same link again may work (a network hiccup, a cut-off transfer, a 5xx). */
      retrySafe: boolean;
      httpStatus?: number;
    };

type Failure = Extract<DownloadResult, { ok: false }>;

class DownloadFailure extends Error {
  constructor(readonly failure: Failure) {
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

class DiskError extends Error {}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const RETRYABLE_STATUS = (status: number) => status >= 500 || status === 408 || status === 429;

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

async function writeAll(file: FileHandle, chunk: Buffer): Promise<void> {
  let offset = 0;
  while (offset < chunk.length) {
    const { bytesWritten } = await file.write(chunk, offset, chunk.length - offset);
    offset += bytesWritten;
  }
}

/** fsync of the folder makes the rename itself durable; some platforms cannot open a folder for it. */
async function syncFolder(folder: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(folder, 'r');
    await handle.sync();
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code !== 'EISDIR' && code !== 'EINVAL' && code !== 'EPERM' && code !== 'EBADF')
      throw new DiskError(String(error));
  } finally {
    await handle?.close();
  }
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

async function streamToFile(
  body: Dispatcher.ResponseData['body'],
  part: string,
  maxBytes: number,
  progress: { bytes: number },
): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let file: FileHandle | undefined;
  try {
    file = await open(part, 'w');
  } catch (error) {
    throw new DiskError(String(error));
  }
  const handle = file;
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      progress.bytes += chunk.length;
      if (progress.bytes > maxBytes) {
        done(new DownloadFailure({ ok: false, type: 'too-large', message: '', retrySafe: false }));
        return;
      }
      hash.update(chunk);
      writeAll(handle, chunk).then(
        () => done(),
        (error: unknown) => done(new DiskError(String(error))),
      );
    },
    final(done) {
      handle.sync().then(
        () => done(),
        (error: unknown) => done(new DiskError(String(error))),
      );
    },
  });
  try {
    await pipeline(body, sink);
  } finally {
    await handle.close();
  }
  return { bytes: progress.bytes, sha256: hash.digest('hex') };
}

/**
 * Downloads `url` to `destPath` through `<destPath>.part`. The folder is created if missing.
 * Never throws for network, server or disk trouble, and never leaves a `.part` file behind.
 */
export async function downloadResult(
  url: string,
  destPath: string,
  options: DownloadOptions,
): Promise<DownloadResult> {
  for (const name of ['maxBytes', 'timeoutMs'] as const) {
    const value = options[name];
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
      throw new Error(`${name}: must be a positive number, got ${String(value)}`);
    }
  }
  const part = `${destPath}.part`;
  let start: URL | undefined;
  const progress = { bytes: 0 };
  let declared: number | undefined;
  try {
    start = checkUrl(url);
    const { url: final, response } = await openResponse(start, options);
    const { statusCode: status } = response;
    if (status === 403 || status === 410) {
      await response.body.dump();
      return fail(
        'expired',
        `result link expired or refused (HTTP ${status}) for ${shown(final)}: it can no longer be downloaded`,
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
    declared = length !== undefined && /^\d+$/.test(length) ? Number(length) : undefined;
    if (declared !== undefined && declared > options.maxBytes) {
      response.body.destroy();
      return fail(
        'too-large',
        `result file is ${declared} bytes, over the limit of ${options.maxBytes}`,
        false,
      );
    }

    await mkdir(dirname(destPath), { recursive: true }).catch((error: unknown) => {
      throw new DiskError(String(error));
    });
    const result = await streamToFile(response.body, part, options.maxBytes, progress).catch(
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
    try {
      await rename(part, destPath);
      await syncFolder(dirname(destPath));
    } catch (error) {
      throw error instanceof DiskError ? error : new DiskError(String(error));
    }
    return { ok: true, ...result };
  } catch (error) {
    // ENOTDIR and the like mean there is no .part to remove.
    await rm(part, { force: true }).catch(() => {});
    if (error instanceof DownloadFailure) return error.failure;
    if (error instanceof DiskError)
      return {
        ok: false,
        type: 'disk',
        message: `cannot write ${destPath}: ${error.message}`,
        retrySafe: false,
      };
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
