// Status-change notifications: POST the job record to the job's callback URL, each attempt with a
// timeout, retried up to 3 times when the receiver does not answer 200, then dropped. Deliveries of
// one job go out in order (processing before success); jobs do not wait for each other.
import { setTimeout as sleep } from 'node:timers/promises';
import type { CallbackLog } from './jobs.js';

/** The part of `fetch` the sandbox needs; the global fetch and undici's both fit. */
export type CallbackFetch = (
  url: string,
  init: { method: 'POST'; headers: Record<string, string>; body: string; signal: AbortSignal },
) => Promise<{ status: number; arrayBuffer(): Promise<ArrayBuffer> }>;

export interface CallbackSenderOptions {
  fetch: CallbackFetch;
  timeoutMs: number;
  retries: number;
  retryDelayMs: () => number;
  now: () => number;
}

export class CallbackSender {
  readonly #options: CallbackSenderOptions;
  readonly #chains = new Map<string, Promise<void>>();
  readonly #closing = new AbortController();

  constructor(options: CallbackSenderOptions) {
    this.#options = options;
  }

  /** Queues one notification; `log` is appended to the job's callback history and updated as attempts go. */
  send(jobId: string, url: string, body: string, log: CallbackLog): void {
    const previous = this.#chains.get(jobId) ?? Promise.resolve();
    const next = previous.then(() => this.#deliver(url, body, log));
    this.#chains.set(jobId, next);
    void next.finally(() => {
      if (this.#chains.get(jobId) === next) this.#chains.delete(jobId);
    });
  }

  /** Resolves once every queued notification is delivered or dropped. */
  async settled(): Promise<void> {
    while (this.#chains.size > 0) await Promise.all([...this.#chains.values()]);
  }

  /** Stops retrying and aborts attempts in flight. */
  close(): void {
    this.#closing.abort();
  }

  async #deliver(url: string, body: string, log: CallbackLog): Promise<void> {
    const { fetch, timeoutMs, retries, now } = this.#options;
    for (let attempt = 0; attempt <= retries; attempt++) {
      if (this.#closing.signal.aborted) break;
      if (attempt > 0) {
        try {
          await sleep(this.#options.retryDelayMs(), undefined, { signal: this.#closing.signal });
        } catch {
          break;
        }
      }
      const at = new Date(now()).toISOString();
      try {
        const signal = AbortSignal.any([this.#closing.signal, AbortSignal.timeout(timeoutMs)]);
        const response = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
          signal,
        });
        await response.arrayBuffer().catch(() => undefined);
        log.attempts.push({ at, statusCode: response.status });
        if (response.status === 200) {
          log.outcome = 'delivered';
          return;
        }
      } catch (error) {
        log.attempts.push({ at, error: describeError(error, timeoutMs) });
      }
    }
    log.outcome = 'dropped';
  }
}

function describeError(error: unknown, timeoutMs: number): string {
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')) {
    return `no answer within ${timeoutMs} ms`;
  }
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause.message : undefined;
  return cause ?? (error instanceof Error ? error.message : String(error));
}
