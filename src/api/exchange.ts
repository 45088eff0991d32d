// One HTTP exchange with the API through an undici dispatcher, reporting whether the request was
// sent. That flag is what separates "not charged, retry" from "in doubt" when an answer is lost.
//
// How it is known: undici calls `onBodySent` and `onRequestSent` on the request's handler right
// after it writes the request to the socket. It calls them only on handlers in the legacy shape
// (no `onRequestStart`), which Agent, Pool and Client hand to the request unchanged. A dispatcher
// made with `compose()` wraps handlers and drops those calls, so it must not be given to the client:
// every failure would then look unsent.
//
// It also undoes content-encoding (gzip, deflate, br; capped, so a gzip bomb is a failure and not a
// memory blow-up) and reads the few headers the client acts on: Retry-After and x-request-id.
import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate, inflateRaw, type ZlibOptions } from 'node:zlib';
import type { Dispatcher } from 'undici';
import { MediabatchError } from '../errors.js';
import type { AnswerHeaders, ApiAnswer } from './outcome.js';

export class ResponseTooLargeError extends MediabatchError {
  readonly code = 'MEDIABATCH_RESPONSE_TOO_LARGE';
  constructor(limit: number) {
    super(`the API answer exceeded ${limit} bytes`);
    this.name = 'ResponseTooLargeError';
  }
}

/** The longest `Retry-After` honoured: a server asking for an hour is capped rather than obeyed. */
export const MAX_RETRY_AFTER_MS = 10 * 60_000;

/**
 * `Retry-After` as milliseconds from `nowMs`: delta-seconds (`120`) or an HTTP-date, clamped to
 * [0, 10 min]. Undefined when the value is neither.
 */
export function parseRetryAfter(value: string, nowMs: number): number | undefined {
  const text = value.trim();
  let ms: number;
  if (/^\d+(?:\.\d+)?$/.test(text)) ms = Number(text) * 1000;
  else if (/[a-z]/i.test(text) && !Number.isNaN(Date.parse(text))) ms = Date.parse(text) - nowMs;
  else return undefined;
  return Math.min(Math.max(Math.ceil(ms), 0), MAX_RETRY_AFTER_MS);
}

const REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

type Decoder = (input: Buffer, options: ZlibOptions) => Promise<Buffer>;
const gunzipAsync: Decoder = promisify(gunzip);
const inflateAsync: Decoder = promisify(inflate);
const inflateRawAsync: Decoder = promisify(inflateRaw);
const brotliAsync: Decoder = promisify(brotliDecompress);

// HTTP's "deflate" is zlib-wrapped, but some servers send raw deflate: both are read.
const inflateEither: Decoder = (input, options) =>
  inflateAsync(input, options).catch(() => inflateRawAsync(input, options));

const DECODERS: Record<string, Decoder> = {
  gzip: gunzipAsync,
  'x-gzip': gunzipAsync,
  deflate: inflateEither,
  br: brotliAsync,
};

/** What `accept-encoding` the client sends: exactly what `decodeContent` can read. */
export const ACCEPT_ENCODING = 'gzip, deflate, br';

class UnreadableBodyError extends MediabatchError {}

/**
 * Undoes `content-encoding` (a list, applied left to right, so undone right to left). Each step's
 * output is capped at `maxBytes`: a small gzip bomb must not become gigabytes in memory.
 */
async function decodeContent(bytes: Buffer, encodings: string[], maxBytes: number): Promise<Buffer> {
  let out = bytes;
  for (const encoding of [...encodings].reverse()) {
    if (encoding === 'identity' || out.length === 0) continue;
    const decoder = DECODERS[encoding];
    if (!decoder) throw new UnreadableBodyError(`content-encoding ${encoding} is not supported`);
    try {
      out = await decoder(out, { maxOutputLength: maxBytes });
    } catch (error) {
      if ((error as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE')
        throw new ResponseTooLargeError(maxBytes);
      throw new UnreadableBodyError(`corrupt ${encoding} body`);
    }
  }
  return out;
}

function parseBody(bytes: Buffer): unknown {
  // A UTF-8 byte order mark is legal in a file but not in JSON.parse's input.
  const text = bytes.toString('utf8').replace(/^\uFEFF/, '');
  if (text.trim() === '') return '';
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text.length > 2048 ? text.slice(0, 2048) : text;
  }
}

interface ReadHeaders {
  encodings: string[];
  info: AnswerHeaders;
}

function readHeaders(raw: readonly (Buffer | string)[] | null | undefined, nowMs: number): ReadHeaders {
  const encodings: string[] = [];
  const info: AnswerHeaders = {};
  for (let i = 0; raw && i + 1 < raw.length; i += 2) {
    const name = String(raw[i]).toLowerCase();
    const value = String(raw[i + 1]);
    if (name === 'content-encoding') {
      for (const part of value.split(',')) if (part.trim()) encodings.push(part.trim().toLowerCase());
    } else if (name === 'retry-after') {
      const ms = parseRetryAfter(value, nowMs);
      if (ms !== undefined) info.retryAfterMs = ms;
    } else if (name === 'x-request-id' && REQUEST_ID.test(value.trim())) {
      info.requestId = value.trim();
    }
  }
  return { encodings, info };
}

export interface ExchangeOptions {
  /** Wall clock in epoch ms, for `Retry-After` given as a date. */
  now?: () => number;
  /** Cap on the decoded (decompressed) body; defaults to the cap on the body as received. */
  maxDecodedBytes?: number;
}

/** The answer once its body is all in: decoded and parsed, or why it could not be. Never rejects. */
function completeAnswer(
  status: number,
  headers: ReadHeaders,
  chunks: Buffer[],
  maxDecodedBytes: number,
): Promise<ApiAnswer> {
  const info = headers.info;
  const response = (body: unknown, unreadable?: string): ApiAnswer => ({
    kind: 'response',
    status,
    body,
    ...(Object.keys(info).length > 0 && { headers: info }),
    ...(unreadable !== undefined && { unreadable }),
  });
  return decodeContent(Buffer.concat(chunks), headers.encodings, maxDecodedBytes).then(
    (bytes) => response(parseBody(bytes)),
    (error: unknown): ApiAnswer =>
      error instanceof UnreadableBodyError
        ? response('', error.message)
        : { kind: 'network', error, sent: true },
  );
}

/**
 * Sends one request and reads the whole answer (at most `maxBodyBytes`), so the connection can be
 * reused. Never rejects: every failure comes back as a `network` answer.
 */
// One function on purpose: undici's handler callbacks share the request's state (sent, status, size).
export function exchange(
  dispatcher: Dispatcher,
  options: Dispatcher.DispatchOptions,
  maxBodyBytes: number,
  extra: ExchangeOptions = {},
): Promise<ApiAnswer> {
  const now = extra.now ?? Date.now;
  const maxDecodedBytes = extra.maxDecodedBytes ?? maxBodyBytes;
  return new Promise((resolve) => {
    let sent = false;
    let status = 0;
    let headers: ReadHeaders = { encodings: [], info: {} };
    let size = 0;
    let settled = false;
    const chunks: Buffer[] = [];
    let abort: ((error?: Error) => void) | undefined;
    const settle = (answer: ApiAnswer) => {
      if (settled) return;
      settled = true;
      resolve(answer);
    };

    // Legacy handler shape on purpose: see the header comment.
    const handler = {
      onConnect(abortRequest: (error?: Error) => void) {
        abort = abortRequest;
      },
      onBodySent() {
        sent = true;
      },
      onRequestSent() {
        sent = true;
      },
      onResponseStarted() {
        sent = true;
      },
      onHeaders(statusCode: number, rawHeaders: (Buffer | string)[] | null) {
        sent = true;
        status = statusCode;
        headers = readHeaders(rawHeaders, now());
        return true;
      },
      onData(chunk: Buffer) {
        size += chunk.length;
        if (size > maxBodyBytes) {
          abort?.(new ResponseTooLargeError(maxBodyBytes));
          return false;
        }
        chunks.push(chunk);
        return true;
      },
      onComplete() {
        void completeAnswer(status, headers, chunks, maxDecodedBytes).then(settle);
      },
      onError(error: Error) {
        settle({ kind: 'network', error, sent });
      },
    };

    try {
      dispatcher.dispatch(options, handler);
    } catch (error) {
      settle({ kind: 'network', error, sent });
    }
  });
}
