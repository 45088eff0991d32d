// The one place where an API answer (HTTP status, envelope `code`, network error) becomes a typed
// outcome. Everything else — runner, ledger, report — reads the outcome, never the raw answer.
// The question that matters for money: could this submission have been charged?
import type { z } from 'zod';
import {
  type Balance,
  balanceSchema,
  type Envelope,
  envelopeSchema,
  type JobRecord,
  jobRecordSchema,
  requestIdSchema,
  submissionSchema,
} from './schemas.js';

/** What the client reads from the response headers, beyond status and body. */
export interface AnswerHeaders {
  /** `Retry-After`, as milliseconds from when the answer arrived, clamped to [0, 10 min]. */
  retryAfterMs?: number;
  /** `x-request-id`, for log lines and support requests. */
  requestId?: string;
}

/**
 * What came back from one HTTP exchange. `body` is the parsed JSON when the body was JSON, else
 * the raw text. `unreadable` says why the body could not be decoded at all (an unknown or corrupt
 * content-encoding); `body` is then ''. `sent` says whether the request (headers and body) was
 * handed to the socket: only then can the server have acted on it.
 */
export type ApiAnswer =
  | { kind: 'response'; status: number; body: unknown; headers?: AnswerHeaders; unreadable?: string }
  | { kind: 'network'; error: unknown; sent: boolean };

/**
 * `mayHaveCharged`: tokens may have been deducted for this request (certainly so when accepted).
 * `retrySafe`: sending the same request again at once cannot charge twice and may succeed.
 * `requestId`: the service's id of the exchange, when it gave one (envelope, `data` or header).
 */
export type SubmitOutcome = (
  | {
      type: 'accepted';
      imgUuid: string;
      /** Tokens the service says it deducted; undefined when it did not say in a readable way. */
      cost: number | undefined;
      mayHaveCharged: true;
      retrySafe: false;
    }
  | { type: 'rejected'; httpStatus: number; message: string; mayHaveCharged: false; retrySafe: false }
  | { type: 'insufficient-tokens'; message: string; mayHaveCharged: false; retrySafe: false }
  | {
      type: 'quota-exceeded';
      used?: number;
      quota?: number;
      period?: string;
      message: string;
      mayHaveCharged: false;
      retrySafe: false;
    }
  | { type: 'unauthorized'; message: string; mayHaveCharged: false; retrySafe: false }
  | {
      type: 'retryable';
      reason: string;
      /** The server's `Retry-After`: do not send again before this many ms. */
      retryAfterMs?: number;
      /** The service asked to slow down (HTTP or code 429, or a 503 with Retry-After). */
      throttled?: boolean;
      mayHaveCharged: false;
      retrySafe: true;
    }
  | { type: 'in-doubt'; reason: string; mayHaveCharged: true; retrySafe: false }
) & { requestId?: string };

/** Reads (jobs/detail, balance) are GETs: never charged, always safe to repeat. */
export type ReadOutcome<T> = (
  | { type: 'ok'; value: T }
  | { type: 'not-found'; message: string }
  | { type: 'unauthorized'; message: string }
  | { type: 'rejected'; httpStatus: number; message: string }
  | {
      type: 'retryable';
      reason: string;
      retryAfterMs?: number;
      throttled?: boolean;
      /** The answer could not be read as the expected shape at all (not JSON, wrong fields, undecodable). */
      unreadable?: boolean;
    }
) & { requestId?: string };

export type PollOutcome = ReadOutcome<JobRecord>;
/** `value` is the balance in tokens (`data.count`). */
export type BalanceOutcome = ReadOutcome<number>;

// Failures that happen while connecting: no byte of the request can have reached the server.
const CONNECT_PHASE = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'EHOSTDOWN',
  'UND_ERR_CONNECT_TIMEOUT',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'CERT_HAS_EXPIRED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
]);

// Timers that undici only starts once the request is written: they imply it was sent.
const RESPONSE_PHASE = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'HPE_INVALID_CONSTANT']);

const DESCRIPTIONS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host name not found (DNS)',
  EAI_AGAIN: 'DNS lookup failed temporarily',
  UND_ERR_CONNECT_TIMEOUT: 'connect timeout',
  UND_ERR_HEADERS_TIMEOUT: 'no answer within the headers timeout',
  UND_ERR_BODY_TIMEOUT: 'answer body stalled past the body timeout',
  UND_ERR_SOCKET: 'connection closed by the other side',
  ECONNRESET: 'connection reset',
  EPIPE: 'connection broken while writing',
  UND_ERR_ABORTED: 'request aborted',
};

/** The most specific error code in an error, its cause chain, or an AggregateError (happy eyeballs). */
export function networkErrorCode(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e !== null && typeof e === 'object' && depth < 5; depth++) {
    const record = e as { code?: unknown; errors?: unknown; cause?: unknown };
    if (typeof record.code === 'string') return record.code;
    if (Array.isArray(record.errors)) {
      const inner = record.errors.map(networkErrorCode).find((c) => c !== undefined);
      if (inner) return inner;
    }
    e = record.cause;
  }
  return undefined;
}

export function describeNetworkError(error: unknown): string {
  const code = networkErrorCode(error);
  const text = code ? (DESCRIPTIONS[code] ?? (error instanceof Error ? error.message : String(error))) : '';
  if (code) return `${text} (${code})`;
  return error instanceof Error ? error.message || error.name : String(error);
}

function snippet(body: unknown): string {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  const flat = (text ?? '').replace(/\s+/g, ' ').trim();
  return flat.length > 120 ? `${flat.slice(0, 120)}…` : flat;
}

function zodIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
}

const QUOTA_MESSAGE = /quota exceeded:\s*([\d.,]+)\s+of\s+([\d.,]+)\s+tokens used\s*\(([^)]*)\)/i;

/** Reads "API key quota exceeded: <used> of <quota> tokens used (<period>)"; figures it cannot read stay undefined. */
export function parseQuotaMessage(msg: string): { used?: number; quota?: number; period?: string } {
  const m = QUOTA_MESSAGE.exec(msg);
  if (!m) return {};
  const num = (s: string | undefined) => {
    const n = Number((s ?? '').replace(/,/g, ''));
    return Number.isFinite(n) ? n : undefined;
  };
  const used = num(m[1]);
  const quota = num(m[2]);
  const period = m[3]?.trim() || undefined;
  return {
    ...(used !== undefined && { used }),
    ...(quota !== undefined && { quota }),
    ...(period !== undefined && { period }),
  };
}

const UNAUTHORIZED = 'the API refused the API key (HTTP 401): check MEDIABATCH_API_KEY';

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

/** What one HTTP answer says, read once for both kinds of request. */
interface Reading {
  status: number;
  /** Undefined when the body is not a well-formed envelope (or could not be decoded). */
  envelope: Envelope | undefined;
  requestId: string | undefined;
  retryAfterMs: number | undefined;
  /** The service asked to slow down: HTTP or code 429, or a 503 that says when to come back. */
  throttled: boolean;
  /** The body, for a reason text, when it is not an envelope. */
  seen: string;
  unreadable: boolean;
}

function read(answer: Extract<ApiAnswer, { kind: 'response' }>): Reading {
  const { status, body, headers } = answer;
  const unreadable = answer.unreadable !== undefined;
  const parsed = unreadable ? undefined : envelopeSchema.safeParse(body);
  const envelope = parsed?.success ? parsed.data : undefined;
  const fromData = isPlainObject(envelope?.data)
    ? requestIdSchema.parse(envelope.data.request_id)
    : undefined;
  const retryAfterMs = headers?.retryAfterMs;
  return {
    status,
    envelope,
    requestId: envelope?.request_id ?? fromData ?? headers?.requestId,
    retryAfterMs,
    throttled: status === 429 || envelope?.code === 429 || (status === 503 && retryAfterMs !== undefined),
    seen: envelope
      ? `code ${envelope.code}${envelope.msg ? ` (${envelope.msg})` : ''}`
      : unreadable
        ? `a body that cannot be read (${answer.unreadable})`
        : snippet(body) === ''
          ? 'an empty body'
          : `a body that is not the API envelope: ${snippet(body)}`,
    unreadable,
  };
}

/** The optional fields of a retryable outcome, present only when known. */
function pace(reading: Reading): { retryAfterMs?: number; throttled?: true } {
  return {
    ...(reading.retryAfterMs !== undefined && { retryAfterMs: reading.retryAfterMs }),
    ...(reading.throttled && { throttled: true }),
  };
}

function withRequestId<T extends object>(
  outcome: T,
  requestId: string | undefined,
): T & { requestId?: string } {
  return requestId === undefined ? outcome : { ...outcome, requestId };
}

const retryable = (reason: string, reading?: Reading): SubmitOutcome => ({
  type: 'retryable',
  reason,
  ...(reading && pace(reading)),
  mayHaveCharged: false,
  retrySafe: true,
});
const inDoubt = (reason: string): SubmitOutcome => ({
  type: 'in-doubt',
  reason,
  mayHaveCharged: true,
  retrySafe: false,
});
const rejected = (httpStatus: number, message: string): SubmitOutcome => ({
  type: 'rejected',
  httpStatus,
  message,
  mayHaveCharged: false,
  retrySafe: false,
});
const unauthorized = (message: string): SubmitOutcome => ({
  type: 'unauthorized',
  message: message || UNAUTHORIZED,
  mayHaveCharged: false,
  retrySafe: false,
});

function classifySubmissionError(error: unknown, sent: boolean): SubmitOutcome {
  const code = networkErrorCode(error) ?? '';
  const what = describeNetworkError(error);
  if (CONNECT_PHASE.has(code)) return retryable(`${what}: the request was not sent`);
  if (RESPONSE_PHASE.has(code))
    return inDoubt(`${what} after the request was sent: it may have been charged`);
  if (!sent) return retryable(`${what} before the request was sent`);
  return inDoubt(`${what} after the request was sent: it may have been charged`);
}

/** Codes and statuses that by HTTP's rules mean "not acted upon, try again later". */
const TRY_LATER = new Set([408, 429]);
const isClientError = (n: number) => n >= 400 && n < 500 && !TRY_LATER.has(n);
const is2xx = (status: number) => status >= 200 && status < 300;

function submissionOutcome(reading: Reading): SubmitOutcome {
  const { status, envelope } = reading;
  if (envelope) {
    const { code, msg, data } = envelope;
    if (code === 0) {
      if (!is2xx(status)) return inDoubt(`HTTP ${status} with code 0; the request may have been charged`);
      const submission = submissionSchema.safeParse(data);
      if (submission.success) {
        return {
          type: 'accepted',
          imgUuid: submission.data.img_uuid,
          cost: submission.data.cost,
          mayHaveCharged: true,
          retrySafe: false,
        };
      }
      return inDoubt(
        `the API answered code 0 without a usable task id (${zodIssues(submission.error)}); it was probably charged`,
      );
    }
    // A well-formed answer with a non-zero code is the service saying "not accepted", whatever
    // the HTTP status around it.
    if (code === 100) {
      return {
        type: 'insufficient-tokens',
        message: msg || 'tokens is not enough',
        mayHaveCharged: false,
        retrySafe: false,
      };
    }
    if (code === 101) {
      return {
        type: 'quota-exceeded',
        ...parseQuotaMessage(msg),
        message: msg || 'API key quota exceeded',
        mayHaveCharged: false,
        retrySafe: false,
      };
    }
    if (code === 401) return unauthorized(msg);
    if (isClientError(code)) return rejected(status, msg || `the API rejected the request (code ${code})`);
    const why = reading.throttled ? 'the API asked to slow down' : 'not accepted, nothing charged';
    return retryable(`HTTP ${status} with ${reading.seen}: ${why}`, reading);
  }
  if (status === 401) return unauthorized('');
  // A 3xx or 4xx that is not the API's envelope comes from something in front of the service — a
  // proxy, a deploy page, a wrong base URL — so the service never saw the request (RFC 9110).
  if (status >= 300 && status < 500) {
    const hint = status < 400 || status === 404 || status === 405 ? ' (check the base URL)' : '';
    const why = reading.throttled ? 'the API asked to slow down' : `the request did not reach the API${hint}`;
    return retryable(`HTTP ${status} with ${reading.seen}: ${why}`, reading);
  }
  if (reading.throttled)
    return retryable(`HTTP ${status} with Retry-After: the API asked to try again later`, reading);
  return inDoubt(`HTTP ${status} with ${reading.seen}; the request may have been charged`);
}

/** Maps the answer to a generation POST to what happened to the task and to the money. */
export function classifySubmission(answer: ApiAnswer): SubmitOutcome {
  if (answer.kind === 'network') return classifySubmissionError(answer.error, answer.sent);
  const reading = read(answer);
  return withRequestId(submissionOutcome(reading), reading.requestId);
}

function readOutcome<T>(reading: Reading, schema: z.ZodType<T>, what: string): ReadOutcome<T> {
  const { status, envelope } = reading;
  const code = envelope?.code;
  const msg = envelope?.msg ?? '';
  const later = (reason: string, unreadable = reading.unreadable): ReadOutcome<T> => ({
    type: 'retryable',
    reason,
    ...pace(reading),
    ...(unreadable && { unreadable: true }),
  });

  if (code === 0 && is2xx(status)) {
    const value = schema.safeParse(envelope?.data);
    if (value.success) return { type: 'ok', value: value.data };
    return later(`${what} is malformed (${zodIssues(value.error)})`, true);
  }
  if (code === 401 || status === 401) return { type: 'unauthorized', message: msg || UNAUTHORIZED };
  if (code === 404 || status === 404)
    return { type: 'not-found', message: msg || `${what}: not found (HTTP 404)` };
  if (reading.throttled) return later(`HTTP ${status} with ${reading.seen}: the API asked to slow down`);
  if (envelope && (isClientError(envelope.code) || isClientError(status))) {
    return {
      type: 'rejected',
      httpStatus: status,
      message: msg || `HTTP ${status} with code ${envelope.code}`,
    };
  }
  if (!envelope && is2xx(status)) return later(`HTTP ${status} with ${reading.seen}`, true);
  return later(`HTTP ${status} with ${reading.seen}`);
}

function classifyRead<T>(answer: ApiAnswer, schema: z.ZodType<T>, what: string): ReadOutcome<T> {
  if (answer.kind === 'network') return { type: 'retryable', reason: describeNetworkError(answer.error) };
  const reading = read(answer);
  return withRequestId(readOutcome(reading, schema, what), reading.requestId);
}

/** Maps the answer to GET /api/v1/jobs/detail. */
export function classifyPoll(answer: ApiAnswer): PollOutcome {
  return classifyRead(answer, jobRecordSchema, 'job record');
}

/** Maps the answer to GET /api/v1/user/tokens. */
export function classifyBalance(answer: ApiAnswer): BalanceOutcome {
  return classifyRead(
    answer,
    balanceSchema.transform((b: Balance) => b.count),
    'balance',
  );
}
