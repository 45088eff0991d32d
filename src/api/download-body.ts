// One GET of a result link through undici's dispatch with a handler of our own: the body's chunks go
// straight to the reading loop's callback, with no stream between (undici's request() pushes each chunk
// through a Readable and an async iterator, CPU the download spends per 64 KB chunk). Backpressure is
// the dispatch controller's pause and resume; every failure (network, timeouts, abort) arrives as the
// same undici error request() would have thrown, so the messages stay the same.
import type { Dispatcher } from 'undici';

/** Takes one chunk (it may keep it: undici hands out a view of the socket's own fresh read buffer). */
export type ChunkTaker = (chunk: Buffer) => Promise<void> | undefined;

/** Undici's dump(): a short unwanted body is read to keep the connection; a long one ends it. */
const DUMP_LIMIT_BYTES = 128 * 1024;

type Headers = Record<string, string | string[] | undefined>;

/** The body of a response, read once: by consume(), dump() or destroy(). */
export class RawBody {
  #controller: Dispatcher.DispatchController | undefined;
  #take: ChunkTaker | undefined;
  /** Chunks that arrived before consume() or while a taker's promise was pending, in order. */
  readonly #queue: Buffer[] = [];
  #pending = false;
  #ended = false;
  #error: unknown;
  #done: { resolve: () => void; reject: (error: unknown) => void } | undefined;

  /** Delivers every chunk to `take` in order, waiting whenever it returns a promise; resolves at the end. */
  consume(take: ChunkTaker): Promise<void> {
    this.#take = take;
    const done = new Promise<void>((resolve, reject) => {
      this.#done = { resolve, reject };
    });
    // Failed before anyone read (cut off right after the headers, the deadline): the reader hears it now.
    if (this.#error !== undefined) this.#done?.reject(this.#error);
    this.#drain();
    return done;
  }

  /** Reads and drops the body (a redirect's, a refusal's); resolves when it is gone either way. */
  dump(): Promise<void> {
    let seen = 0;
    return this.consume((chunk) => {
      seen += chunk.length;
      if (seen > DUMP_LIMIT_BYTES) this.destroy(new Error('body dumped'));
      return undefined;
    }).catch(() => {});
  }

  /** Stops the transfer; a consumer waiting sees `error`. */
  destroy(error: unknown): void {
    this.#fail(error);
    this.#controller?.abort(error instanceof Error ? error : new Error(String(error)));
  }

  /** Called by the handler. */
  started(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    // Nothing reads until consume(): chunks wait in the socket, not in memory.
    if (this.#take === undefined) controller.pause();
  }

  data(chunk: Buffer): void {
    if (this.#error !== undefined) return;
    this.#queue.push(chunk);
    this.#drain();
  }

  end(): void {
    this.#ended = true;
    this.#drain();
  }

  #fail(error: unknown): void {
    if (this.#error !== undefined || (this.#ended && this.#queue.length === 0 && !this.#pending)) return;
    this.#error = error;
    this.#queue.length = 0;
    this.#done?.reject(error);
  }

  failed(error: unknown): void {
    this.#fail(error);
  }

  /** Hands queued chunks to the taker until it asks to wait; pauses the socket while it waits. */
  #drain(): void {
    const take = this.#take;
    if (take === undefined || this.#pending || this.#error !== undefined) return;
    while (this.#queue.length > 0) {
      const chunk = this.#queue.shift() as Buffer;
      let waiting: Promise<void> | undefined;
      try {
        waiting = take(chunk);
      } catch (error) {
        this.destroy(error);
        return;
      }
      if (waiting !== undefined) {
        this.#pending = true;
        this.#controller?.pause();
        waiting.then(
          () => {
            this.#pending = false;
            this.#drain();
          },
          (error: unknown) => {
            this.#pending = false;
            this.destroy(error);
          },
        );
        return;
      }
    }
    if (this.#ended) this.#done?.resolve();
    else this.#controller?.resume();
  }
}

export interface RawResponse {
  statusCode: number;
  headers: Headers;
  body: RawBody;
}

/** Sends one GET; resolves with the status and headers, the body still to be read (or refused). */
export function dispatchGet(
  dispatcher: Dispatcher,
  url: URL,
  options: { timeoutMs: number; signal?: AbortSignal | undefined },
): Promise<RawResponse> {
  const { signal } = options;
  return new Promise<RawResponse>((resolve, reject) => {
    const body = new RawBody();
    let answered = false;
    let started: Dispatcher.DispatchController | undefined;
    // Listened to from the start: a request still waiting for a connection stops at once, as request()'s does.
    const onAbort = (): void => {
      if (started) started.abort(signal?.reason);
      else reject(signal?.reason);
    };
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    const settle = (): void => signal?.removeEventListener('abort', onAbort);
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(controller) {
        started = controller;
        if (signal?.aborted) controller.abort(signal.reason);
      },
      onResponseStart(controller, statusCode, headers) {
        answered = true;
        body.started(controller);
        resolve({ statusCode, headers: headers as Headers, body });
      },
      onResponseData(_controller, chunk) {
        body.data(chunk);
      },
      onResponseEnd() {
        settle();
        body.end();
      },
      onResponseError(_controller, error) {
        settle();
        if (answered) body.failed(error);
        else reject(error);
      },
    };
    dispatcher.dispatch(
      {
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: 'GET',
        headersTimeout: options.timeoutMs,
        bodyTimeout: options.timeoutMs,
      },
      handler,
    );
  });
}
