// What the user's money and the run's next step hang on, beyond outcome.test.ts: answers that look alike
// but differ in whether a POST may have charged, the reasons a person reads in the log and the report,
// and error chains that would loop or throw. Outcomes are compared strictly: a field present but
// undefined (a `retryAfterMs` of nothing) is a different answer for the code that spreads it.
import { describe, expect, it } from 'vitest';
import {
  type ApiAnswer,
  classifyBalance,
  classifyPoll,
  classifySubmission,
  describeNetworkError,
  networkErrorCode,
  parseQuotaMessage,
} from '../../src/api/outcome.js';

type ResponseAnswer = Extract<ApiAnswer, { kind: 'response' }>;
const response = (status: number, body: unknown, headers?: ResponseAnswer['headers']): ResponseAnswer =>
  headers === undefined ? { kind: 'response', status, body } : { kind: 'response', status, body, headers };
const UNAUTHORIZED = 'the API refused the API key (HTTP 401): check MEDIABATCH_API_KEY';

describe('a POST answered with Retry-After', () => {
  // Only a 503 says "not now" by HTTP's rules; a 500, 502 or 504 may come after the service acted on the
  // request, Retry-After or not: sending it again could charge twice.
  it.each([500, 502, 504])('HTTP %d with Retry-After is in doubt, never retried on its own', (status) => {
    expect(classifySubmission(response(status, 'Bad Gateway', { retryAfterMs: 5000 }))).toStrictEqual({
      type: 'in-doubt',
      reason: `HTTP ${status} with a body that is not the API envelope: Bad Gateway; the request may have been charged`,
      mayHaveCharged: true,
      retrySafe: false,
    });
  });

  it('HTTP 503 with Retry-After is a throttled retry', () => {
    expect(classifySubmission(response(503, '', { retryAfterMs: 5000 }))).toStrictEqual({
      type: 'retryable',
      reason: 'HTTP 503 with Retry-After: the API asked to try again later',
      retryAfterMs: 5000,
      throttled: true,
      mayHaveCharged: false,
      retrySafe: true,
    });
  });

  it('HTTP 200 with code 429 slows the run down like an HTTP 429', () => {
    expect(classifySubmission(response(200, { code: 429, msg: 'slow down' }))).toStrictEqual({
      type: 'retryable',
      reason: 'HTTP 200 with code 429 (slow down): the API asked to slow down',
      throttled: true,
      mayHaveCharged: false,
      retrySafe: true,
    });
  });

  it('a retry without Retry-After carries no pace at all', () => {
    expect(classifySubmission(response(200, { code: 500, msg: 'busy' }))).toStrictEqual({
      type: 'retryable',
      reason: 'HTTP 200 with code 500 (busy): not accepted, nothing charged',
      mayHaveCharged: false,
      retrySafe: true,
    });
  });
});

describe('a POST answered with code 0', () => {
  it.each([199, 300, 302, 500])('on HTTP %d is in doubt, not accepted', (status) => {
    const outcome = classifySubmission(response(status, { code: 0, data: { img_uuid: 'u-1', cost: 1 } }));
    expect(outcome).toStrictEqual({
      type: 'in-doubt',
      reason: `HTTP ${status} with code 0; the request may have been charged`,
      mayHaveCharged: true,
      retrySafe: false,
    });
  });

  it.each<[string, unknown, string]>([
    ['without data', undefined, '(root): Invalid input: expected object, received undefined'],
    ['with a list', [], '(root): Invalid input: expected object, received array'],
    [
      'with an empty task id',
      { img_uuid: '', cost: 3 },
      'img_uuid: Too small: expected string to have >=1 characters; img_uuid: must be printable characters; img_uuid: must not be blank',
    ],
  ])('%s says why the task id is unusable', (_name, data, issues) => {
    const outcome = classifySubmission(response(200, { code: 0, msg: 'Success', data }));
    expect(outcome).toStrictEqual({
      type: 'in-doubt',
      reason: `the API answered code 0 without a usable task id (${issues}); it was probably charged`,
      mayHaveCharged: true,
      retrySafe: false,
    });
  });
});

describe('the cost of an accepted POST', () => {
  // A figure too large for a double reads as Infinity: the charge is then booked at the list price
  // (marked assumed), never as Infinity tokens in the ledger.
  it.each([`1${'0'.repeat(400)}`, -1, 'NaN', 'Infinity'])('%s is not a cost', (cost) => {
    expect(classifySubmission(response(200, { code: 0, data: { img_uuid: 'u-1', cost } }))).toStrictEqual({
      type: 'accepted',
      imgUuid: 'u-1',
      cost: undefined,
      mayHaveCharged: true,
      retrySafe: false,
    });
  });
});

describe('a POST refused', () => {
  it.each<[string, ResponseAnswer, object]>([
    [
      'code 100 without a message',
      response(402, { code: 100, msg: null }),
      { type: 'insufficient-tokens', message: 'tokens is not enough' },
    ],
    [
      'code 100 with its message',
      response(200, { code: 100, msg: 'balance 3, needed 5' }),
      { type: 'insufficient-tokens', message: 'balance 3, needed 5' },
    ],
    [
      'code 101 without a message',
      response(200, { code: 101, msg: '' }),
      { type: 'quota-exceeded', message: 'API key quota exceeded' },
    ],
    [
      'code 400 without a message',
      response(200, { code: 400 }),
      { type: 'rejected', httpStatus: 200, message: 'the API rejected the request (code 400)' },
    ],
    ['a bare HTTP 401', response(401, 'Unauthorized'), { type: 'unauthorized', message: UNAUTHORIZED }],
    [
      'code 401 without a message',
      response(200, { code: 401 }),
      { type: 'unauthorized', message: UNAUTHORIZED },
    ],
    [
      'code 401 with its message',
      response(200, { code: 401, msg: 'Token Error' }),
      { type: 'unauthorized', message: 'Token Error' },
    ],
  ])('%s', (_name, answer, expected) => {
    expect(classifySubmission(answer)).toStrictEqual({
      ...expected,
      mayHaveCharged: false,
      retrySafe: false,
    });
  });
});

describe('a POST that never reached the API', () => {
  it.each<[number, string]>([
    [300, 'HTTP 300 with an empty body: the request did not reach the API (check the base URL)'],
    [399, 'HTTP 399 with an empty body: the request did not reach the API (check the base URL)'],
    [400, 'HTTP 400 with an empty body: the request did not reach the API'],
    [403, 'HTTP 403 with an empty body: the request did not reach the API'],
    [404, 'HTTP 404 with an empty body: the request did not reach the API (check the base URL)'],
    [405, 'HTTP 405 with an empty body: the request did not reach the API (check the base URL)'],
    [406, 'HTTP 406 with an empty body: the request did not reach the API'],
    [499, 'HTTP 499 with an empty body: the request did not reach the API'],
  ])('HTTP %d from something in front of it is retried: %s', (status, reason) => {
    expect(classifySubmission(response(status, ''))).toStrictEqual({
      type: 'retryable',
      reason,
      mayHaveCharged: false,
      retrySafe: true,
    });
  });

  it('HTTP 500 without an envelope may have been acted on', () => {
    expect(classifySubmission(response(500, undefined)).type).toBe('in-doubt');
  });
});

describe('the body a person reads in a reason', () => {
  it('is flattened to one line', () => {
    const outcome = classifySubmission(response(502, '<html>\n  <b>Bad</b>\t\tGateway  \n</html>'));
    expect(outcome.type === 'in-doubt' && outcome.reason).toBe(
      'HTTP 502 with a body that is not the API envelope: <html> <b>Bad</b> Gateway </html>; the request may have been charged',
    );
  });

  it('is cut after 120 characters', () => {
    const long = 'x'.repeat(121);
    const cut = classifySubmission(response(502, long));
    expect(cut.type === 'in-doubt' && cut.reason).toBe(
      `HTTP 502 with a body that is not the API envelope: ${'x'.repeat(120)}…; the request may have been charged`,
    );
    const whole = classifySubmission(response(502, 'y'.repeat(120)));
    expect(whole.type === 'in-doubt' && whole.reason).toBe(
      `HTTP 502 with a body that is not the API envelope: ${'y'.repeat(120)}; the request may have been charged`,
    );
  });

  it('has no blank ends', () => {
    const outcome = classifySubmission(response(502, '\n  Bad Gateway \n'));
    expect(outcome.type === 'in-doubt' && outcome.reason).toBe(
      'HTTP 502 with a body that is not the API envelope: Bad Gateway; the request may have been charged',
    );
  });

  it('says so when there is none', () => {
    const outcome = classifySubmission(response(502, undefined));
    expect(outcome.type === 'in-doubt' && outcome.reason).toBe(
      'HTTP 502 with an empty body; the request may have been charged',
    );
  });
});

describe('network errors', () => {
  const coded = (code: string, extra: object = {}) =>
    Object.assign(new Error(`boom ${code}`), { code }, extra);

  it.each<[string, ApiAnswer, string]>([
    [
      'refused before sending',
      { kind: 'network', error: coded('ECONNREFUSED'), sent: true },
      'connection refused (ECONNREFUSED): the request was not sent',
    ],
    [
      'a headers timeout',
      { kind: 'network', error: coded('UND_ERR_HEADERS_TIMEOUT'), sent: false },
      'no answer within the headers timeout (UND_ERR_HEADERS_TIMEOUT) after the request was sent: it may have been charged',
    ],
    [
      'a reset before sending',
      { kind: 'network', error: coded('ECONNRESET'), sent: false },
      'connection reset (ECONNRESET) before the request was sent',
    ],
    [
      'an unknown code after sending',
      { kind: 'network', error: coded('E_ODD'), sent: true },
      'boom E_ODD (E_ODD) after the request was sent: it may have been charged',
    ],
    [
      'no code after sending',
      { kind: 'network', error: new Error('socket hang up'), sent: true },
      'socket hang up after the request was sent: it may have been charged',
    ],
  ])('%s reads: %s', (_name, answer, reason) => {
    const outcome = classifySubmission(answer);
    expect('reason' in outcome && outcome.reason).toBe(reason);
  });

  it.each<[string, string]>([
    ['ECONNREFUSED', 'connection refused'],
    ['ENOTFOUND', 'host name not found (DNS)'],
    ['EAI_AGAIN', 'DNS lookup failed temporarily'],
    ['UND_ERR_CONNECT_TIMEOUT', 'connect timeout'],
    ['UND_ERR_HEADERS_TIMEOUT', 'no answer within the headers timeout'],
    ['UND_ERR_BODY_TIMEOUT', 'answer body stalled past the body timeout'],
    ['UND_ERR_SOCKET', 'connection closed by the other side'],
    ['ECONNRESET', 'connection reset'],
    ['EPIPE', 'connection broken while writing'],
    ['UND_ERR_ABORTED', 'request aborted'],
  ])('names %s in words: %s', (code, words) => {
    expect(describeNetworkError(coded(code))).toBe(`${words} (${code})`);
  });

  it.each<[string, unknown, string]>([
    ['an error with a message', new Error('socket hang up'), 'socket hang up'],
    ['an error without a message', new TypeError(''), 'TypeError'],
    ['a thrown string', 'aborted', 'aborted'],
    ['null', null, 'null'],
  ])('describes %s', (_name, error, text) => {
    expect(describeNetworkError(error)).toBe(text);
  });

  it('stops at a cause that is null or that points back at itself', () => {
    const nullCause = Object.assign(new Error('x'), { cause: null });
    expect(networkErrorCode(nullCause)).toBeUndefined();
    expect(networkErrorCode(null)).toBeUndefined();
    const loop: { message: string; cause?: unknown } = { message: 'loop' };
    loop.cause = loop;
    expect(networkErrorCode(loop)).toBeUndefined();
    expect(classifySubmission({ kind: 'network', error: loop, sent: true }).type).toBe('in-doubt');
  });

  it('looks five errors deep, no deeper', () => {
    const chain = (depth: number) => {
      let error: object = { code: 'ECONNREFUSED' };
      for (let i = 1; i < depth; i++) error = { cause: error };
      return error;
    };
    expect(networkErrorCode(chain(5))).toBe('ECONNREFUSED');
    expect(networkErrorCode(chain(6))).toBeUndefined();
  });

  it('takes the first code among several connection attempts, then the cause', () => {
    const attempts = new AggregateError([new Error('v6'), coded('ECONNREFUSED')], 'all failed');
    expect(networkErrorCode(attempts)).toBe('ECONNREFUSED');
    const uncoded = new AggregateError([new Error('v6')], 'all failed', { cause: coded('ENOTFOUND') });
    expect(networkErrorCode(uncoded)).toBe('ENOTFOUND');
  });
});

describe('the figures of a quota answer', () => {
  it('trims the period', () => {
    expect(parseQuotaMessage('API key quota exceeded: 5 of 5 tokens used ( monthly )')).toStrictEqual({
      used: 5,
      quota: 5,
      period: 'monthly',
    });
  });

  it('reads the figures however the message is spaced', () => {
    expect(parseQuotaMessage('API key quota exceeded:  120  of  100  tokens used  (monthly)')).toStrictEqual({
      used: 120,
      quota: 100,
      period: 'monthly',
    });
    expect(parseQuotaMessage('API key quota exceeded:120 of 100 tokens used(monthly)')).toStrictEqual({
      used: 120,
      quota: 100,
      period: 'monthly',
    });
  });

  it('leaves out what it cannot read, instead of undefined fields', () => {
    expect(parseQuotaMessage('API key quota exceeded: 1.2.3 of 2,000 tokens used ()')).toStrictEqual({
      quota: 2000,
    });
    expect(parseQuotaMessage('API key quota exceeded: 10 of 1.2.3 tokens used ( )')).toStrictEqual({
      used: 10,
    });
  });
});

describe('a poll', () => {
  it.each<[string, ResponseAnswer, object]>([
    // The key is refused: the run stops and says so, instead of polling again and again.
    ['HTTP 200 with code 401', response(200, { code: 401 }), { type: 'unauthorized', message: UNAUTHORIZED }],
    ['a bare HTTP 401', response(401, 'Unauthorized'), { type: 'unauthorized', message: UNAUTHORIZED }],
    [
      'HTTP 200 with code 401 and its message',
      response(200, { code: 401, msg: 'Token Error' }),
      { type: 'unauthorized', message: 'Token Error' },
    ],
    // A request the API refuses is refused again if repeated: not retried forever.
    [
      'HTTP 200 with code 400',
      response(200, { code: 400 }),
      { type: 'rejected', httpStatus: 200, message: 'HTTP 200 with code 400' },
    ],
    [
      'HTTP 400 with code 500',
      response(400, { code: 500, msg: 'bad id' }),
      { type: 'rejected', httpStatus: 400, message: 'bad id' },
    ],
    [
      'an HTML 404',
      response(404, '<html>nginx</html>'),
      { type: 'not-found', message: 'job record: not found (HTTP 404)' },
    ],
    // A server error is retried, and its body is not taken for a broken job record.
    [
      'HTTP 502 with an HTML body',
      response(502, '<html/>'),
      { type: 'retryable', reason: 'HTTP 502 with a body that is not the API envelope: <html/>' },
    ],
    [
      'HTTP 200 with code 500',
      response(200, { code: 500 }),
      { type: 'retryable', reason: 'HTTP 200 with code 500' },
    ],
    [
      'a record without its id',
      response(200, { code: 0, data: { status: 'x' } }),
      { type: 'retryable', reason: 'job record is malformed (img_uuid: Invalid input)', unreadable: true },
    ],
  ])('%s', (_name, answer, expected) => {
    expect(classifyPoll(answer)).toStrictEqual(expected);
  });

  it('a network error is retried, saying what happened', () => {
    const error = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    expect(classifyPoll({ kind: 'network', error, sent: true })).toStrictEqual({
      type: 'retryable',
      reason: 'connection reset (ECONNRESET)',
    });
  });
});

describe('a balance read', () => {
  it('names the balance when its figure is missing', () => {
    expect(classifyBalance(response(200, { code: 0, data: {} }))).toStrictEqual({
      type: 'retryable',
      reason: 'balance is malformed (count: Invalid input: expected number, received undefined)',
      unreadable: true,
    });
  });
});
