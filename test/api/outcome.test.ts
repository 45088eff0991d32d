import { describe, expect, it } from 'vitest';
import {
  type ApiAnswer,
  classifyBalance,
  classifyPoll,
  classifySubmission,
  networkErrorCode,
  parseQuotaMessage,
} from '../../src/api/outcome.js';

const response = (status: number, body: unknown): ApiAnswer => ({ kind: 'response', status, body });
const network = (code: string | undefined, sent: boolean): ApiAnswer => {
  const error = Object.assign(new Error(`boom ${code ?? ''}`), code ? { code } : {});
  return { kind: 'network', error, sent };
};
const uuid = '0b6f7c4e-8f4e-4a39-9a53-2b1f2d7f0e11';

describe('classifySubmission', () => {
  it.each<[string, ApiAnswer, string, boolean, boolean]>([
    // name, answer, type, mayHaveCharged, retrySafe
    [
      'code 0 with a result',
      response(200, { code: 0, msg: 'Success', data: { img_uuid: uuid, cost: 30 } }),
      'accepted',
      true,
      false,
    ],
    [
      'code 0 with a zero cost (discount)',
      response(200, { code: 0, msg: 'Success', data: { img_uuid: uuid, cost: 0 } }),
      'accepted',
      true,
      false,
    ],
    ['code 0 without data', response(200, { code: 0, msg: 'Success' }), 'in-doubt', true, false],
    [
      'code 0 with data lacking img_uuid',
      response(200, { code: 0, msg: 'Success', data: { cost: 3 } }),
      'in-doubt',
      true,
      false,
    ],
    [
      'code 0 with a string cost',
      response(200, { code: 0, msg: 'Success', data: { img_uuid: uuid, cost: '3' } }),
      'in-doubt',
      true,
      false,
    ],
    [
      'HTTP 400 code 400',
      response(400, { code: 400, msg: 'duration: must be 5 or 10, got 7' }),
      'rejected',
      false,
      false,
    ],
    ['HTTP 200 code 400', response(200, { code: 400, msg: 'bad' }), 'rejected', false, false],
    ['HTTP 400 with an HTML body', response(400, '<html>Bad Request</html>'), 'rejected', false, false],
    ['HTTP 404 from a wrong base URL', response(404, 'Not Found'), 'rejected', false, false],
    ['HTTP 301 redirect', response(301, ''), 'rejected', false, false],
    [
      'code 100',
      response(200, { code: 100, msg: 'tokens is not enough' }),
      'insufficient-tokens',
      false,
      false,
    ],
    [
      'code 101',
      response(200, { code: 101, msg: 'API key quota exceeded: 5 of 5 tokens used (monthly)' }),
      'quota-exceeded',
      false,
      false,
    ],
    [
      'HTTP 401 code 401',
      response(401, { code: 401, msg: 'Token is required' }),
      'unauthorized',
      false,
      false,
    ],
    ['HTTP 401 without an envelope', response(401, 'Unauthorized'), 'unauthorized', false, false],
    ['HTTP 500 code 500', response(500, { code: 500, msg: '' }), 'retryable', false, true],
    ['HTTP 429', response(429, 'slow down'), 'retryable', false, true],
    ['HTTP 408', response(408, ''), 'retryable', false, true],
    [
      'HTTP 500 with an HTML body',
      response(500, '<html><body>Internal Server Error</body></html>'),
      'in-doubt',
      true,
      false,
    ],
    ['HTTP 502 from a gateway', response(502, 'Bad Gateway'), 'in-doubt', true, false],
    ['HTTP 503 with an empty body', response(503, ''), 'in-doubt', true, false],
    ['HTTP 200 with code 500', response(200, { code: 500, msg: '' }), 'in-doubt', true, false],
    ['HTTP 200 with an unknown code', response(200, { code: 7, msg: '?' }), 'in-doubt', true, false],
    ['HTTP 200 with a non-envelope body', response(200, 'ok'), 'in-doubt', true, false],
    ['HTTP 200 with an empty body', response(200, ''), 'in-doubt', true, false],
    [
      'HTTP 500 code 0',
      response(500, { code: 0, msg: 'Success', data: { img_uuid: uuid, cost: 1 } }),
      'in-doubt',
      true,
      false,
    ],
  ])('%s -> %s', (_name, answer, type, mayHaveCharged, retrySafe) => {
    const outcome = classifySubmission(answer);
    expect(outcome.type).toBe(type);
    expect(outcome.mayHaveCharged).toBe(mayHaveCharged);
    expect(outcome.retrySafe).toBe(retrySafe);
  });

  it.each<[string | undefined, boolean, string]>([
    ['ECONNREFUSED', false, 'retryable'],
    ['ENOTFOUND', false, 'retryable'],
    ['EAI_AGAIN', false, 'retryable'],
    ['UND_ERR_CONNECT_TIMEOUT', false, 'retryable'],
    ['EHOSTUNREACH', false, 'retryable'],
    // Connect-phase failures cannot follow a sent request, whatever the flag says.
    ['ECONNREFUSED', true, 'retryable'],
    ['UND_ERR_HEADERS_TIMEOUT', true, 'in-doubt'],
    ['UND_ERR_BODY_TIMEOUT', true, 'in-doubt'],
    // Those timers only run once the request is written: in doubt even if the flag was lost.
    ['UND_ERR_HEADERS_TIMEOUT', false, 'in-doubt'],
    ['UND_ERR_BODY_TIMEOUT', false, 'in-doubt'],
    ['UND_ERR_SOCKET', true, 'in-doubt'],
    ['UND_ERR_SOCKET', false, 'retryable'],
    ['ECONNRESET', true, 'in-doubt'],
    ['ECONNRESET', false, 'retryable'],
    ['EPIPE', true, 'in-doubt'],
    ['UND_ERR_ABORTED', true, 'in-doubt'],
    ['UND_ERR_ABORTED', false, 'retryable'],
    ['MEDIABATCH_RESPONSE_TOO_LARGE', true, 'in-doubt'],
    [undefined, true, 'in-doubt'],
    [undefined, false, 'retryable'],
  ])('network error %s (sent: %s) -> %s', (code, sent, type) => {
    const outcome = classifySubmission(network(code, sent));
    expect(outcome.type).toBe(type);
    expect(outcome.mayHaveCharged).toBe(type === 'in-doubt');
    expect(outcome.retrySafe).toBe(type === 'retryable');
  });

  it('reads the error code from a cause chain and from an AggregateError', () => {
    const wrapped = new Error('fetch failed', {
      cause: Object.assign(new Error('x'), { code: 'ECONNRESET' }),
    });
    expect(networkErrorCode(wrapped)).toBe('ECONNRESET');
    const aggregate = new AggregateError(
      [Object.assign(new Error('a'), { code: 'ECONNREFUSED' })],
      'all failed',
    );
    expect(networkErrorCode(aggregate)).toBe('ECONNREFUSED');
    expect(classifySubmission({ kind: 'network', error: aggregate, sent: false }).type).toBe('retryable');
  });

  it('keeps the id and the cost of an accepted task', () => {
    expect(
      classifySubmission(
        response(200, { code: 0, msg: 'Success', data: { img_uuid: uuid, cost: 1.63, extra: 1 } }),
      ),
    ).toEqual({ type: 'accepted', imgUuid: uuid, cost: 1.63, mayHaveCharged: true, retrySafe: false });
  });

  it('passes the API message of a rejection through, naming the field', () => {
    const outcome = classifySubmission(response(400, { code: 400, msg: 'duration: must be 5 or 10, got 7' }));
    expect(outcome).toMatchObject({
      type: 'rejected',
      httpStatus: 400,
      message: 'duration: must be 5 or 10, got 7',
    });
  });

  it('tells to check the base URL on a 404', () => {
    const outcome = classifySubmission(response(404, 'Not Found'));
    expect(outcome.type === 'rejected' && outcome.message).toMatch(/check the base URL/);
  });

  it('reads the quota figures of a code 101 answer', () => {
    const outcome = classifySubmission(
      response(200, { code: 101, msg: 'API key quota exceeded: 4990 of 5000 tokens used (monthly)' }),
    );
    expect(outcome).toMatchObject({ type: 'quota-exceeded', used: 4990, quota: 5000, period: 'monthly' });
  });

  it('says why an answer is in doubt', () => {
    const outcome = classifySubmission(response(502, '<html>Bad Gateway</html>'));
    expect(outcome.type === 'in-doubt' && outcome.reason).toMatch(
      /HTTP 502 .*not the API envelope.*Bad Gateway/,
    );
    const reset = classifySubmission(network('ECONNRESET', true));
    expect(reset.type === 'in-doubt' && reset.reason).toMatch(
      /connection reset \(ECONNRESET\) after the request was sent/,
    );
  });
});

describe('parseQuotaMessage', () => {
  it.each<[string, ReturnType<typeof parseQuotaMessage>]>([
    [
      'API key quota exceeded: 120 of 100 tokens used (monthly)',
      { used: 120, quota: 100, period: 'monthly' },
    ],
    [
      'API key quota exceeded: 1,250.5 of 2,000 tokens used (weekly)',
      { used: 1250.5, quota: 2000, period: 'weekly' },
    ],
    ['api key QUOTA EXCEEDED: 3 of 4 tokens used (daily)', { used: 3, quota: 4, period: 'daily' }],
    ['API key quota exceeded', {}],
    ['', {}],
  ])('%j', (msg, expected) => {
    expect(parseQuotaMessage(msg)).toEqual(expected);
  });
});

describe('classifyPoll', () => {
  const job = { img_uuid: uuid, status: 'pending', json: null };
  it.each<[string, ApiAnswer, string]>([
    ['a pending job', response(200, { code: 0, msg: 'ok', data: job }), 'ok'],
    ['an unknown status', response(200, { code: 0, msg: 'ok', data: { ...job, status: 'WAITING' } }), 'ok'],
    ['HTTP 404 code 404', response(404, { code: 404, msg: 'job not found' }), 'not-found'],
    ['HTTP 200 code 404', response(200, { code: 404, msg: 'job not found' }), 'not-found'],
    ['HTTP 401', response(401, { code: 401, msg: 'Token is required' }), 'unauthorized'],
    ['HTTP 400', response(400, { code: 400, msg: 'img_uuid: required' }), 'rejected'],
    ['HTTP 500', response(500, { code: 500, msg: '' }), 'retryable'],
    ['HTTP 502 HTML', response(502, '<html/>'), 'retryable'],
    ['HTTP 429', response(429, ''), 'retryable'],
    ['a record without status', response(200, { code: 0, msg: 'ok', data: { img_uuid: uuid } }), 'retryable'],
    ['a reset', network('ECONNRESET', true), 'retryable'],
    ['a DNS failure', network('ENOTFOUND', false), 'retryable'],
  ])('%s -> %s', (_name, answer, type) => {
    expect(classifyPoll(answer).type).toBe(type);
  });

  it('returns the job record with its unknown fields', () => {
    const data = {
      img_uuid: uuid,
      status: 'success',
      type: 'audio',
      start_time: '2024-10-11T10:55:32.596Z',
      end_time: '2024-10-11T10:56:01.100Z',
      json: [{ type: 'audio', value: 'https://cdn.example/a.mp3', audio_id: 'a1', audio_duration: 92.5 }],
      link_expired_at: '2024-10-11T22:56:01.100Z',
      duration: 28.5,
      something_new: { x: 1 },
    };
    const outcome = classifyPoll(response(200, { code: 0, msg: 'ok', data }));
    expect(outcome).toEqual({ type: 'ok', value: data });
  });
});

describe('classifyBalance', () => {
  it.each<[string, ApiAnswer, unknown]>([
    ['a balance', response(200, { code: 0, msg: 'ok', data: { count: 1000 } }), { type: 'ok', value: 1000 }],
    [
      'a fractional balance',
      response(200, { code: 0, msg: 'ok', data: { count: 12.37 } }),
      { type: 'ok', value: 12.37 },
    ],
    [
      'a missing token',
      response(401, { code: 401, msg: 'Token is required' }),
      { type: 'unauthorized', message: 'Token is required' },
    ],
  ])('%s', (_name, answer, expected) => {
    expect(classifyBalance(answer)).toEqual(expected);
  });

  it('retries a balance without a count', () => {
    expect(classifyBalance(response(200, { code: 0, msg: 'ok', data: {} })).type).toBe('retryable');
  });
});
