// The one place where an API answer (HTTP status, envelope `code`, network error) becomes a typed
// outcome. Everything else — runner, ledger, report — reads the outcome, never the raw answer.
// The question that matters for money: could this submission have been charged?
import type { z } from 'zod';
import {
  type Balance,
  balanceSchema,
  envelopeSchema,
  type JobRecord,
  jobRecordSchema,
  submissionSchema,
} from './schemas.js';

/**
 * What came back from one HTTP exchange. `body` is the parsed JSON when the body was JSON, else
 * the raw text. `sent` says whether the request (headers and body) was handed to the socket: only
 * then can the server have acted on it.
 */
export type ApiAnswer =
  | { kind: 'response'; status: number; body: unknown }
  | { kind: 'network'; error: unknown; sent: boolean };

/**
 * `mayHaveCharged`: tokens may have been deducted for this request (certainly so when accepted).
 * `retrySafe`: sending the same request again at once cannot charge twice and may succeed.
 */
export type SubmitOutcome =
  | { type: 'accepted'; imgUuid: string; cost: number; mayHaveCharged: true; retrySafe: false }
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
  | { type: 'retryable'; reason: string; mayHaveCharged: false; retrySafe: true }
  | { type: 'in-doubt'; reason: string; mayHaveCharged: true; retrySafe: false };

/** Reads (jobs/detail, balance) are GETs: never charged, always safe to repeat. */
export type ReadOutcome<T> =
  | { type: 'ok'; value: T }
  | { type: 'not-found'; message: string }
  | { type: 'unauthorized'; message: string }
  | { type: 'rejected'; httpStatus: number; message: string }
  | { type: 'retryable'; reason: string };

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

const retryable = (reason: string): SubmitOutcome => ({
  type: 'retryable',
  reason,
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
  message: message || 'the API refused the API key (HTTP 401): check MEDIABATCH_API_KEY',
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

/** Statuses that by HTTP's rules mean "not acted upon, try again later". */
const TRY_LATER = new Set([408, 429]);

/** Maps the answer to a generation POST to what happened to the task and to the money. */
export function classifySubmission(answer: ApiAnswer): SubmitOutcome {
  if (answer.kind === 'network') return classifySubmissionError(answer.error, answer.sent);
  const { status, body } = answer;
  const parsed = envelopeSchema.safeParse(body);

  if (parsed.success) {
    const { code, msg, data } = parsed.data;
    if (code === 0 && status >= 200 && status < 300) {
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
        `the API answered code 0 without a valid submission result (${zodIssues(submission.error)})`,
      );
    }
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
    if (code === 401 || status === 401) return unauthorized(msg);
    if (code === 400 || status === 400)
      return rejected(status, msg || `the API rejected the request (HTTP ${status})`);
    if (code === 500 && status === 500) return retryable('server error (HTTP 500, code 500)');
  } else if (status === 401) {
    return unauthorized('');
  }

  if (TRY_LATER.has(status)) return retryable(`HTTP ${status}: the API asked to try again later`);
  // A 3xx or 4xx means the request was not acted upon (RFC 9110), whatever sent it — often a proxy
  // or a wrong base URL — so it cannot have been charged.
  if (status >= 300 && status < 500) {
    const found = parsed.success && parsed.data.msg ? `: ${parsed.data.msg}` : '';
    const hint = status < 400 || status === 404 || status === 405 ? ' (check the base URL)' : '';
    return rejected(status, `HTTP ${status}${found}${hint}`);
  }
  const seen = parsed.success
    ? `code ${parsed.data.code}`
    : `a body that is not the API envelope: ${snippet(body)}`;
  return inDoubt(`HTTP ${status} with ${seen}; the request may have been charged`);
}

function classifyRead<T>(answer: ApiAnswer, schema: z.ZodType<T>, what: string): ReadOutcome<T> {
  if (answer.kind === 'network') return { type: 'retryable', reason: describeNetworkError(answer.error) };
  const { status, body } = answer;
  const parsed = envelopeSchema.safeParse(body);
  const code = parsed.success ? parsed.data.code : undefined;
  const msg = parsed.success ? parsed.data.msg : '';

  if (code === 0 && status >= 200 && status < 300) {
    const value = schema.safeParse(parsed.success ? parsed.data.data : undefined);
    if (value.success) return { type: 'ok', value: value.data };
    return { type: 'retryable', reason: `${what} is malformed (${zodIssues(value.error)})` };
  }
  if (code === 401 || status === 401) {
    return {
      type: 'unauthorized',
      message: msg || 'the API refused the API key (HTTP 401): check MEDIABATCH_API_KEY',
    };
  }
  if (code === 404 || status === 404)
    return { type: 'not-found', message: msg || `${what}: not found (HTTP 404)` };
  if (status >= 400 && status < 500 && !TRY_LATER.has(status)) {
    return { type: 'rejected', httpStatus: status, message: msg || `HTTP ${status}` };
  }
  const seen = parsed.success ? `code ${code}${msg ? ` (${msg})` : ''}` : `body ${snippet(body)}`;
  return { type: 'retryable', reason: `HTTP ${status} with ${seen}` };
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
