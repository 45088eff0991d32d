import { type Dispatcher, request } from 'undici';
import { type ByteSource, formatBytes, ProbeFailure } from './source.js';

export interface RemoteOptions {
  dispatcher: Dispatcher | undefined;
  /** Most bytes read from one location in one piece (a whole file, a moov box, a prefix). */
  maxBytes: number;
  timeoutMs: number;
  signal: AbortSignal;
}

/** A remote file: random access through Range requests when the server honours them. */
export interface RemoteSource extends ByteSource {
  /** The whole file, read at most once, refused when it is over the byte limit. */
  whole(): Promise<Uint8Array>;
}

/** Enough for the ftyp box, a faststart moov of a short clip, and any audio header. */
export const prefixBytes = 64 * 1024;
export const maxRedirects = 5;

type Body = Dispatcher.ResponseData['body'];

interface Answer {
  statusCode: number;
  headers: Dispatcher.ResponseData['headers'];
  body: Body;
  url: URL;
}

/** Drops a body we will not read; undici reports the drop as an error event, which is expected here. */
function discard(body: Body): void {
  body.on('error', () => {});
  body.destroy();
}

function header(headers: Answer['headers'], name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function describeNetworkError(error: unknown, opts: RemoteOptions): string {
  if (opts.signal.aborted) return `no complete answer within ${opts.timeoutMs / 1000} s`;
  const code = (error as { code?: unknown }).code;
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return `no complete answer within ${opts.timeoutMs / 1000} s`;
  }
  const message = error instanceof Error ? error.message : String(error);
  return typeof code === 'string' ? `download failed (${code}: ${message})` : `download failed (${message})`;
}

/** One GET, following at most `maxRedirects` http(s) redirects and nothing else. */
async function get(url: URL, range: string | undefined, opts: RemoteOptions): Promise<Answer> {
  let current = url;
  for (let hop = 0; ; hop++) {
    let answer: Dispatcher.ResponseData;
    try {
      answer = await request(current, {
        method: 'GET',
        headers: range === undefined ? {} : { range },
        signal: opts.signal,
        headersTimeout: opts.timeoutMs,
        bodyTimeout: opts.timeoutMs,
        ...(opts.dispatcher ? { dispatcher: opts.dispatcher } : {}),
      });
    } catch (error) {
      throw new ProbeFailure(describeNetworkError(error, opts));
    }
    const location = header(answer.headers, 'location');
    if (answer.statusCode < 300 || answer.statusCode >= 400 || location === undefined) {
      return { ...answer, url: current };
    }
    discard(answer.body);
    if (hop >= maxRedirects) throw new ProbeFailure(`more than ${maxRedirects} redirects`);
    let next: URL;
    try {
      next = new URL(location, current);
    } catch {
      throw new ProbeFailure(`redirected to an invalid address (${location})`);
    }
    if (next.protocol !== 'http:' && next.protocol !== 'https:') {
      throw new ProbeFailure(`redirected to a ${next.protocol} link, and only http(s) links are followed`);
    }
    current = next;
  }
}

/** Reads a body up to `limit` bytes; the rest is dropped and the connection closed. */
async function readBody(
  body: Body,
  limit: number,
  opts: RemoteOptions,
): Promise<{ bytes: Uint8Array; truncated: boolean }> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  let truncated = false;
  try {
    for await (const chunk of body as AsyncIterable<Uint8Array>) {
      const room = limit - total;
      if (chunk.length >= room) {
        chunks.push(chunk.subarray(0, room));
        total += room;
        truncated = chunk.length > room;
        break;
      }
      chunks.push(chunk);
      total += chunk.length;
    }
  } catch (error) {
    throw new ProbeFailure(describeNetworkError(error, opts));
  } finally {
    discard(body);
  }
  // A body that ends exactly at the limit may still have more behind it.
  if (total === limit && !truncated) truncated = true;
  return { bytes: Buffer.concat(chunks, total), truncated };
}

function refuseStatus(answer: Answer): never {
  discard(answer.body);
  if (answer.statusCode === 404 || answer.statusCode === 410) {
    throw new ProbeFailure(`not found (HTTP ${answer.statusCode})`);
  }
  if (answer.statusCode === 401 || answer.statusCode === 403) {
    throw new ProbeFailure(`access refused (HTTP ${answer.statusCode}); the link may need to be public`);
  }
  throw new ProbeFailure(`the server answered HTTP ${answer.statusCode}`);
}

function parseContentRange(
  value: string | undefined,
): { start: number; total: number | undefined } | undefined {
  const match = /^bytes\s+(\d+)-(\d+)\/(\d+|\*)$/i.exec(value?.trim() ?? '');
  if (!match) return undefined;
  return { start: Number(match[1]), total: match[3] === '*' ? undefined : Number(match[3]) };
}

function contentLength(answer: Answer): number | undefined {
  const value = header(answer.headers, 'content-length');
  return value !== undefined && /^\d+$/.test(value) ? Number(value) : undefined;
}

function tooLarge(size: number | undefined, opts: RemoteOptions, why: string): ProbeFailure {
  const stated = size === undefined ? 'the file' : `the file is ${formatBytes(size)}, and`;
  return new ProbeFailure(`${stated} ${why}; the limit is ${formatBytes(opts.maxBytes)}`);
}

/**
 * Opens a remote file with one Range request for its first 64 KB. A server that ignores Range sends
 * the whole file instead, which is read up to the byte limit and used as far as it goes.
 */
export async function openRemote(url: URL, opts: RemoteOptions): Promise<RemoteSource> {
  const first = await get(url, `bytes=0-${prefixBytes - 1}`, opts);
  const finalUrl = first.url;
  if (first.statusCode === 416) {
    discard(first.body);
    throw new ProbeFailure('the file is empty');
  }
  if (first.statusCode !== 200 && first.statusCode !== 206) refuseStatus(first);

  let prefix: Uint8Array;
  let size: number | undefined;
  let complete: boolean;
  const rangeable = first.statusCode === 206;
  if (rangeable) {
    const range = parseContentRange(header(first.headers, 'content-range'));
    if (range?.start !== 0) {
      discard(first.body);
      throw new ProbeFailure('the server answered a Range request with a wrong Content-Range');
    }
    size = range.total;
    prefix = (await readBody(first.body, prefixBytes, opts)).bytes;
    complete = size !== undefined && prefix.length >= size;
  } else {
    size = contentLength(first);
    // Read even when Content-Length is over the limit: a faststart MP4 states its length up front.
    const read = await readBody(first.body, opts.maxBytes, opts);
    prefix = read.bytes;
    complete = !read.truncated || (size !== undefined && prefix.length >= size);
    if (complete) size = prefix.length;
  }

  let wholeFile: Uint8Array | undefined = complete ? prefix : undefined;

  async function readRange(offset: number, length: number): Promise<Uint8Array> {
    const end = size === undefined ? offset + length - 1 : Math.min(size, offset + length) - 1;
    if (end < offset) return new Uint8Array();
    const answer = await get(finalUrl, `bytes=${offset}-${end}`, opts);
    if (answer.statusCode !== 206) {
      if (answer.statusCode === 200) {
        discard(answer.body);
        throw new ProbeFailure('the server stopped honouring Range requests');
      }
      refuseStatus(answer);
    }
    const range = parseContentRange(header(answer.headers, 'content-range'));
    if (range?.start !== offset) {
      discard(answer.body);
      throw new ProbeFailure('the server answered a Range request with a wrong Content-Range');
    }
    return (await readBody(answer.body, end - offset + 1, opts)).bytes;
  }

  return {
    size,
    async read(offset, length) {
      if (complete || offset + length <= prefix.length) return prefix.subarray(offset, offset + length);
      if (!rangeable) throw tooLarge(size, opts, 'the server ignores Range requests');
      if (length > opts.maxBytes) throw tooLarge(size, opts, `${formatBytes(length)} would have to be read`);
      return readRange(offset, length);
    },
    async whole() {
      if (wholeFile) return wholeFile;
      if (!rangeable || (size !== undefined && size > opts.maxBytes)) {
        throw tooLarge(size, opts, 'it must be read whole to be measured');
      }
      const answer = await get(finalUrl, undefined, opts);
      if (answer.statusCode !== 200) refuseStatus(answer);
      const read = await readBody(answer.body, opts.maxBytes, opts);
      if (read.truncated) throw tooLarge(size, opts, 'it must be read whole to be measured');
      wholeFile = read.bytes;
      return wholeFile;
    },
  };
}
