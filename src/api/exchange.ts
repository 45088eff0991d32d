// One HTTP exchange with the API through an undici dispatcher, reporting whether the request was
// sent. That flag is what separates "not charged, retry" from "in doubt" when an answer is lost.
//
// How it is known: undici calls `onBodySent` and `onRequestSent` on the request's handler right
// after it writes the request to the socket. It calls them only on handlers in the legacy shape
// (no `onRequestStart`), which Agent, Pool and Client hand to the request unchanged. A dispatcher
// made with `compose()` wraps handlers and drops those calls, so it must not be given to the client:
// every failure would then look unsent.
import type { Dispatcher } from 'undici';
import type { ApiAnswer } from './outcome.js';

export class ResponseTooLargeError extends Error {
  readonly code = 'MEDIABATCH_RESPONSE_TOO_LARGE';
  constructor(limit: number) {
    super(`the API answer exceeded ${limit} bytes`);
    this.name = 'ResponseTooLargeError';
  }
}

function decodeBody(bytes: Buffer): unknown {
  const text = bytes.toString('utf8');
  if (text.trim() === '') return '';
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text.length > 2048 ? text.slice(0, 2048) : text;
  }
}

/**
 * Sends one request and reads the whole answer (at most `maxBodyBytes`), so the connection can be
 * reused. Never rejects: every failure comes back as a `network` answer.
 */
export function exchange(
  dispatcher: Dispatcher,
  options: Dispatcher.DispatchOptions,
  maxBodyBytes: number,
): Promise<ApiAnswer> {
  return new Promise((resolve) => {
    let sent = false;
    let status = 0;
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
      onHeaders(statusCode: number) {
        sent = true;
        status = statusCode;
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
        settle({ kind: 'response', status, body: decodeBody(Buffer.concat(chunks)) });
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
