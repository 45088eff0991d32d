// The HTTP client of the Media Generation API: the only code that talks to it. It never throws for
// anything the network or the server does; it returns the typed outcomes of ./outcome.ts, exactly as
// the server said them: redacting the API key is the job of the edges (logs, error lines, files),
// because rewriting outcomes here corrupted ids and keys that happened to contain a short key.
import { Agent, type Dispatcher } from 'undici';
import type { Endpoint, RequestBody } from '../catalog/types.js';
import { ApiSettingsError } from './errors.js';
import { ACCEPT_ENCODING, exchange } from './exchange.js';
import {
  type ApiAnswer,
  type BalanceOutcome,
  classifyBalance,
  classifyPoll,
  classifySubmission,
  describeNetworkError,
  type PollOutcome,
  type SubmitOutcome,
} from './outcome.js';
import { redactText, secretForms } from './redact.js';
import { defaultSleep, type RequestClass, Throttle, type ThrottleState, type Ticket } from './throttle.js';

export interface ApiTimeouts {
  /** TCP (and TLS) connect. */
  connectMs: number;
  /**
   * Wait for the answer to a generation POST. Generous: the service copies and measures input media
   * (up to 300 MB) before it answers, and a timeout after sending leaves the task in doubt.
   */
  submitHeadersMs: number;
  /** Wait for the answer to a GET (jobs/detail, balance). */
  readHeadersMs: number;
  /** Longest pause between two chunks of an answer body. */
  bodyMs: number;
}

export const DEFAULT_TIMEOUTS: ApiTimeouts = {
  connectMs: 10_000,
  submitHeadersMs: 300_000,
  readHeadersMs: 30_000,
  bodyMs: 30_000,
};

/**
 * Idle connections are dropped after this long: shorter than common servers' keep-alive (5 s for
 * Node, 60-75 s for nginx), so a POST is never written to a socket the server is closing — that
 * would surface as a reset after sending and put the task in doubt for nothing.
 */
export const KEEP_ALIVE_MS = 4_000;

/** Envelope answers are small; a job record with song lyrics is a few kB. */
const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

export interface ApiRequestEvent {
  method: 'GET' | 'POST';
  /** Path and query, never headers. */
  path: string;
  status?: number;
  /** Redacted description of a network error. */
  error?: string;
  sent: boolean;
  durationMs: number;
  /** The service's id of the exchange (`x-request-id`), when it sent one. */
  requestId?: string;
}

export interface ApiClientOptions {
  /** e.g. `https://api.example.com` or `http://127.0.0.1:8787`; a path prefix is kept. */
  baseUrl: string;
  apiKey: string;
  /** An undici Agent, Pool, Client or MockAgent; not a `compose()`d one (see ./exchange.ts). Not closed by `close()`. */
  dispatcher?: Dispatcher;
  timeouts?: Partial<ApiTimeouts>;
  /** Connections per origin when the client makes its own Agent. */
  maxConnections?: number;
  /** Called after every exchange, for logs and metrics. */
  onRequest?: (event: ApiRequestEvent) => void;
  /** Wall clock in epoch ms (Retry-After dates, throttling, durations). Default `Date.now`. */
  now?: () => number;
  /** Waits `ms`, or rejects when `signal` aborts. Default a timer. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export interface RequestOptions {
  /**
   * Gives up a request still waiting for the throttle (Retry-After, rate limit); it comes back as
   * `retryable`, never sent. A request already sent is always waited for: its answer may carry a charge.
   */
  signal?: AbortSignal;
}

export interface ApiClient {
  readonly baseUrl: string;
  submit(endpoint: Endpoint, wireBody: RequestBody, options?: RequestOptions): Promise<SubmitOutcome>;
  getJob(imgUuid: string, options?: RequestOptions): Promise<PollOutcome>;
  getBalance(options?: RequestOptions): Promise<BalanceOutcome>;
  /** The limits in force, for a progress display: submissions per second, and when the gates open. */
  throttleState(): ThrottleState;
  /** Also releases requests waiting for the throttle (as `retryable`, not sent). */
  close(): Promise<void>;
}

const PRINTABLE_TOKEN = /^[\x21-\x7e]+$/;

/**
 * Shorter keys are refused: redacting a 2-letter key from logs would rewrite ordinary words, and no
 * real key is that short (a short value is usually a placeholder or a truncated paste).
 */
export const MIN_API_KEY_LENGTH = 8;

export { ApiSettingsError };

function checkOptions(options: ApiClientOptions): URL {
  let url: URL;
  try {
    url = new URL(options.baseUrl);
  } catch {
    throw new ApiSettingsError(
      `baseUrl: must be an http(s) URL such as https://api.example.com, got ${options.baseUrl}`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ApiSettingsError(
      `baseUrl: must be an http(s) URL, got ${url.protocol} (set MEDIABATCH_BASE_URL or --base-url)`,
    );
  }
  // The key itself is never quoted: this message may end up in a log.
  if (typeof options.apiKey !== 'string' || !PRINTABLE_TOKEN.test(options.apiKey)) {
    throw new ApiSettingsError(
      'apiKey: must be non-empty printable ASCII without spaces or line breaks (check MEDIABATCH_API_KEY)',
    );
  }
  if (options.apiKey.length < MIN_API_KEY_LENGTH) {
    throw new ApiSettingsError(
      `apiKey: MEDIABATCH_API_KEY is too short (${options.apiKey.length} characters); a real API key has at least ${MIN_API_KEY_LENGTH}`,
    );
  }
  for (const [name, value] of Object.entries(options.timeouts ?? {})) {
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
      throw new ApiSettingsError(
        `timeouts.${name}: must be a positive number of milliseconds, got ${String(value)}`,
      );
    }
  }
  return url;
}

class HttpApiClient implements ApiClient {
  readonly baseUrl: string;
  #origin: string;
  #prefix: string;
  #authorization: string;
  #secrets: string[];
  #dispatcher: Dispatcher;
  #ownsDispatcher: boolean;
  #timeouts: ApiTimeouts;
  #onRequest: ((event: ApiRequestEvent) => void) | undefined;
  #now: () => number;
  #throttle: Throttle;
  /** Aborted by close(), to release requests waiting for the throttle. */
  #closing = new AbortController();

  constructor(options: ApiClientOptions) {
    const url = checkOptions(options);
    this.#origin = url.origin;
    this.#prefix = url.pathname.replace(/\/+$/, '');
    this.baseUrl = `${this.#origin}${this.#prefix}`;
    this.#authorization = `Bearer ${options.apiKey}`;
    this.#secrets = secretForms(options.apiKey);
    this.#timeouts = { ...DEFAULT_TIMEOUTS, ...options.timeouts };
    this.#onRequest = options.onRequest;
    this.#now = options.now ?? Date.now;
    this.#throttle = new Throttle({ now: this.#now, sleep: options.sleep ?? defaultSleep });
    this.#ownsDispatcher = options.dispatcher === undefined;
    this.#dispatcher =
      options.dispatcher ??
      new Agent({
        connect: { timeout: this.#timeouts.connectMs },
        headersTimeout: this.#timeouts.readHeadersMs,
        bodyTimeout: this.#timeouts.bodyMs,
        keepAliveTimeout: KEEP_ALIVE_MS,
        keepAliveMaxTimeout: KEEP_ALIVE_MS,
        connections: options.maxConnections ?? 16,
      });
  }

  async submit(endpoint: Endpoint, wireBody: RequestBody, options?: RequestOptions): Promise<SubmitOutcome> {
    if (!endpoint.startsWith('/api/v1/')) {
      throw new Error(`endpoint: must be a path under /api/v1/, got ${endpoint}`);
    }
    const body = Buffer.from(JSON.stringify(wireBody), 'utf8');
    return this.#request(
      'submit',
      classifySubmission,
      options?.signal,
      'POST',
      endpoint,
      this.#timeouts.submitHeadersMs,
      body,
    );
  }

  async getJob(imgUuid: string, options?: RequestOptions): Promise<PollOutcome> {
    if (typeof imgUuid !== 'string' || imgUuid.length === 0) {
      throw new Error(`imgUuid: must be a non-empty string, got ${JSON.stringify(imgUuid)}`);
    }
    const path = `/api/v1/jobs/detail?img_uuid=${encodeURIComponent(imgUuid)}`;
    return this.#request('read', classifyPoll, options?.signal, 'GET', path, this.#timeouts.readHeadersMs);
  }

  async getBalance(options?: RequestOptions): Promise<BalanceOutcome> {
    const path = '/api/v1/user/tokens';
    return this.#request('read', classifyBalance, options?.signal, 'GET', path, this.#timeouts.readHeadersMs);
  }

  throttleState(): ThrottleState {
    return this.#throttle.state();
  }

  async close(): Promise<void> {
    this.#closing.abort();
    if (this.#ownsDispatcher) await this.#dispatcher.close();
  }

  /** Waits for the throttle, sends, classifies, and tells the throttle what the answer said. */
  async #request<T extends { type: string; retryAfterMs?: number; throttled?: boolean }>(
    kind: RequestClass,
    classify: (answer: ApiAnswer) => T,
    signal: AbortSignal | undefined,
    method: 'GET' | 'POST',
    path: string,
    headersTimeout: number,
    body?: Buffer,
  ): Promise<T> {
    const stop = signal ? AbortSignal.any([signal, this.#closing.signal]) : this.#closing.signal;
    let ticket: Ticket;
    try {
      ticket = await this.#throttle.acquire(kind, stop);
    } catch (error) {
      // Given up while waiting for the throttle: a network failure before sending is exactly that case.
      return classify({ kind: 'network', error, sent: false });
    }
    const answer = await this.#send(method, path, headersTimeout, body);
    const outcome = classify(answer);
    // Retry-After is honoured on any answer that is not a success, whatever its class.
    const retryAfterMs =
      answer.kind === 'response' && (answer.status < 200 || answer.status >= 300)
        ? answer.headers?.retryAfterMs
        : outcome.retryAfterMs;
    this.#throttle.observe(kind, ticket, {
      retryAfterMs,
      throttled: outcome.type === 'retryable' && outcome.throttled === true,
    });
    return outcome;
  }

  async #send(
    method: 'GET' | 'POST',
    path: string,
    headersTimeout: number,
    body?: Buffer,
  ): Promise<ApiAnswer> {
    const headers: Record<string, string> = {
      authorization: this.#authorization,
      accept: 'application/json',
      'user-agent': 'mediabatch',
      'accept-encoding': ACCEPT_ENCODING,
    };
    if (body) headers['content-type'] = 'application/json';
    const started = this.#now();
    const answer = await exchange(
      this.#dispatcher,
      {
        origin: this.#origin,
        path: `${this.#prefix}${path}`,
        method,
        headers,
        ...(body && { body }),
        headersTimeout,
        bodyTimeout: this.#timeouts.bodyMs,
      },
      MAX_ANSWER_BYTES,
      { now: this.#now },
    );
    this.#report(method, path, answer, this.#now() - started);
    return answer;
  }

  #report(method: 'GET' | 'POST', path: string, answer: ApiAnswer, durationMs: number): void {
    if (!this.#onRequest) return;
    const event: ApiRequestEvent =
      answer.kind === 'response'
        ? {
            method,
            path,
            status: answer.status,
            sent: true,
            durationMs,
            ...(answer.headers?.requestId !== undefined && { requestId: answer.headers.requestId }),
          }
        : {
            method,
            path,
            error: redactText(describeNetworkError(answer.error), this.#secrets),
            sent: answer.sent,
            durationMs,
          };
    this.#onRequest(event);
  }
}

export function createApiClient(options: ApiClientOptions): ApiClient {
  return new HttpApiClient(options);
}
