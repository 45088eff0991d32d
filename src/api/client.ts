// The HTTP client of the Media Generation API: the only code that talks to it. It never throws for
// anything the network or the server does; it returns the typed outcomes of ./outcome.ts.
import { Agent, type Dispatcher } from 'undici';
import type { Endpoint, RequestBody } from '../catalog/types.js';
import { exchange } from './exchange.js';
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
import { redactDeep, redactText, secretForms } from './redact.js';

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
  now?: () => number;
}

export interface ApiClient {
  readonly baseUrl: string;
  submit(endpoint: Endpoint, wireBody: RequestBody): Promise<SubmitOutcome>;
  getJob(imgUuid: string): Promise<PollOutcome>;
  getBalance(): Promise<BalanceOutcome>;
  close(): Promise<void>;
}

const PRINTABLE_TOKEN = /^[\x21-\x7e]+$/;

function checkOptions(options: ApiClientOptions): URL {
  let url: URL;
  try {
    url = new URL(options.baseUrl);
  } catch {
    throw new Error(
      `baseUrl: must be an http(s) URL such as https://api.example.com, got ${options.baseUrl}`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new Error(
      `baseUrl: must be an http(s) URL, got ${url.protocol} (set MEDIABATCH_BASE_URL or --base-url)`,
    );
  }
  // The key itself is never quoted: this message may end up in a log.
  if (typeof options.apiKey !== 'string' || !PRINTABLE_TOKEN.test(options.apiKey)) {
    throw new Error(
      'apiKey: must be non-empty printable ASCII without spaces or line breaks (check MEDIABATCH_API_KEY)',
    );
  }
  for (const [name, value] of Object.entries(options.timeouts ?? {})) {
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
      throw new Error(`timeouts.${name}: must be a positive number of milliseconds, got ${String(value)}`);
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

  constructor(options: ApiClientOptions) {
    const url = checkOptions(options);
    this.#origin = url.origin;
    this.#prefix = url.pathname.replace(/\/+$/, '');
    this.baseUrl = `${this.#origin}${this.#prefix}`;
    this.#authorization = `Bearer ${options.apiKey}`;
    this.#secrets = secretForms(options.apiKey);
    this.#timeouts = { ...DEFAULT_TIMEOUTS, ...options.timeouts };
    this.#onRequest = options.onRequest;
    this.#now = options.now ?? (() => performance.now());
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

  async submit(endpoint: Endpoint, wireBody: RequestBody): Promise<SubmitOutcome> {
    if (!endpoint.startsWith('/api/v1/')) {
      throw new Error(`endpoint: must be a path under /api/v1/, got ${endpoint}`);
    }
    const body = Buffer.from(JSON.stringify(wireBody), 'utf8');
    const answer = await this.#send('POST', endpoint, this.#timeouts.submitHeadersMs, body);
    return redactDeep(classifySubmission(answer), this.#secrets);
  }

  async getJob(imgUuid: string): Promise<PollOutcome> {
    if (typeof imgUuid !== 'string' || imgUuid.length === 0) {
      throw new Error(`imgUuid: must be a non-empty string, got ${JSON.stringify(imgUuid)}`);
    }
    const path = `/api/v1/jobs/detail?img_uuid=${encodeURIComponent(imgUuid)}`;
    const answer = await this.#send('GET', path, this.#timeouts.readHeadersMs);
    return redactDeep(classifyPoll(answer), this.#secrets);
  }

  async getBalance(): Promise<BalanceOutcome> {
    const answer = await this.#send('GET', '/api/v1/user/tokens', this.#timeouts.readHeadersMs);
    return redactDeep(classifyBalance(answer), this.#secrets);
  }

  async close(): Promise<void> {
    if (this.#ownsDispatcher) await this.#dispatcher.close();
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
    );
    this.#report(method, path, answer, this.#now() - started);
    return answer;
  }

  #report(method: 'GET' | 'POST', path: string, answer: ApiAnswer, durationMs: number): void {
    if (!this.#onRequest) return;
    const event: ApiRequestEvent =
      answer.kind === 'response'
        ? { method, path, status: answer.status, sent: true, durationMs }
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
