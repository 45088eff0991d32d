import { describe, expect, it } from 'vitest';
import {
  type ApiAnswer,
  classifyBalance,
  classifyPoll,
  classifySubmission,
  networkErrorCode,
  type PollOutcome,
  parseQuotaMessage,
  type SubmitOutcome,
} from '../../src/api/outcome.js';

type ResponseAnswer = Extract<ApiAnswer, { kind: 'response' }>;
const response = (status: number, body: unknown): ResponseAnswer => ({ kind: 'response', status, body });
const network = (code: string | undefined, sent: boolean): ApiAnswer => {
  const error = Object.assign(new Error(`boom ${code ?? ''}`), code ? { code } : {});
  return { kind: 'network', error, sent };
};
const uuid = '0b6f7c4e-8f4e-4a39-9a53-2b1f2d7f0e11';

const html404 = '<html><head><title>404 Not Found</title></head><body>nginx</body></html>';
const ok = (data: unknown) => ({ code: 0, msg: 'Success', data });

describe('classifySubmission', () => {
  it.each<[string, ApiAnswer, string, boolean, boolean]>([
    // name, answer, type, mayHaveCharged, retrySafe
    ['code 0 with a result', response(200, ok({ img_uuid: uuid, cost: 30 })), 'accepted', true, false],
    [
      'code 0 with a zero cost (discount)',
      response(200, ok({ img_uuid: uuid, cost: 0 })),
      'accepted',
      true,
      false,
    ],
    [
      'code "0" as a string',
      response(200, { code: '0', msg: null, data: { img_uuid: uuid, cost: '3' } }),
      'accepted',
      true,
      false,
    ],
    [
      'code 0 with a string cost',
      response(200, ok({ img_uuid: uuid, cost: '1.63' })),
      'accepted',
      true,
      false,
    ],
    ['code 0 without cost', response(200, ok({ img_uuid: uuid })), 'accepted', true, false],
    [
      'code 0 with an unreadable cost',
      response(200, ok({ img_uuid: uuid, cost: 'n/a' })),
      'accepted',
      true,
      false,
    ],
    ['code 0 on HTTP 201', response(201, ok({ img_uuid: uuid, cost: 1 })), 'accepted', true, false],
    ['code 0 without data', response(200, { code: 0, msg: 'Success' }), 'in-doubt', true, false],
    ['code 0 with data lacking img_uuid', response(200, ok({ cost: 3 })), 'in-doubt', true, false],
    ['code 0 with an empty img_uuid', response(200, ok({ img_uuid: '', cost: 3 })), 'in-doubt', true, false],
    [
      'code 0 with a control character in img_uuid',
      response(200, ok({ img_uuid: 'a\u0007b', cost: 3 })),
      'in-doubt',
      true,
      false,
    ],
    ['HTTP 500 code 0', response(500, ok({ img_uuid: uuid, cost: 1 })), 'in-doubt', true, false],
    ['HTTP 302 code 0', response(302, ok({ img_uuid: uuid, cost: 1 })), 'in-doubt', true, false],
    [
      'HTTP 400 code 400',
      response(400, { code: 400, msg: 'duration: must be 5 or 10, got 7' }),
      'rejected',
      false,
      false,
    ],
    ['HTTP 200 code 400', response(200, { code: 400, msg: 'bad' }), 'rejected', false, false],
    ['HTTP 200 code "422"', response(200, { code: '422', msg: 'bad' }), 'rejected', false, false],
    ['HTTP 500 code 403', response(500, { code: 403, msg: 'forbidden model' }), 'rejected', false, false],
    [
      'code 100',
      response(200, { code: 100, msg: 'tokens is not enough' }),
      'insufficient-tokens',
      false,
      false,
    ],
    ['code 100 on HTTP 402', response(402, { code: 100, msg: null }), 'insufficient-tokens', false, false],
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
    ['HTTP 200 code 401', response(200, { code: 401, msg: 'Token Error' }), 'unauthorized', false, false],
    ['HTTP 401 without an envelope', response(401, 'Unauthorized'), 'unauthorized', false, false],
    ['HTTP 500 code 500', response(500, { code: 500, msg: '' }), 'retryable', false, true],
    ['HTTP 200 code 500', response(200, { code: 500, msg: '' }), 'retryable', false, true],
    ['HTTP 200 code 502', response(200, { code: 502 }), 'retryable', false, true],
    ['HTTP 200 code 1003', response(200, { code: 1003, msg: 'busy' }), 'retryable', false, true],
    ['HTTP 200 code 408', response(200, { code: 408, msg: 'timeout' }), 'retryable', false, true],
    ['HTTP 200 code 429', response(200, { code: 429, msg: 'slow down' }), 'retryable', false, true],
    ['HTTP 429 without an envelope', response(429, 'slow down'), 'retryable', false, true],
    ['HTTP 408', response(408, ''), 'retryable', false, true],
    ['an HTML 404 from a proxy', response(404, html404), 'retryable', false, true],
    ['HTTP 400 with an HTML body', response(400, '<html>Bad Request</html>'), 'retryable', false, true],
    ['HTTP 301 redirect', response(301, ''), 'retryable', false, true],
    ['HTTP 403 from a firewall', response(403, 'Forbidden'), 'retryable', false, true],
    [
      'HTTP 400 with an unreadable body',
      { ...response(400, ''), unreadable: 'content-encoding zstd is not supported' },
      'retryable',
      false,
      true,
    ],
    [
      'HTTP 500 with an HTML body',
      response(500, '<html><body>Internal Server Error</body></html>'),
      'in-doubt',
      true,
      false,
    ],
    ['HTTP 502 from a gateway', response(502, 'Bad Gateway'), 'in-doubt', true, false],
    ['HTTP 503 with an empty body', response(503, ''), 'in-doubt', true, false],
    [
      'HTTP 503 with Retry-After',
      { ...response(503, ''), headers: { retryAfterMs: 5000 } },
      'retryable',
      false,
      true,
    ],
    ['HTTP 200 with a non-envelope body', response(200, 'ok'), 'in-doubt', true, false],
    ['HTTP 200 with an empty body', response(200, ''), 'in-doubt', true, false],
    [
      'HTTP 200 with a body that cannot be decoded',
      { ...response(200, ''), unreadable: 'corrupt gzip body' },
      'in-doubt',
      true,
      false,
    ],
    [
      'HTTP 200 with a non-numeric code',
      response(200, { code: 'ok', data: { img_uuid: uuid } }),
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

  it.each<[string, ApiAnswer, SubmitOutcome]>([
    [
      'the id and the cost',
      response(200, ok({ img_uuid: uuid, cost: 1.63, extra: 1 })),
      { type: 'accepted', imgUuid: uuid, cost: 1.63, mayHaveCharged: true, retrySafe: false },
    ],
    [
      'a cost of "1.63"',
      response(200, ok({ img_uuid: uuid, cost: '1.63' })),
      { type: 'accepted', imgUuid: uuid, cost: 1.63, mayHaveCharged: true, retrySafe: false },
    ],
    [
      'a missing cost as undefined',
      response(200, ok({ img_uuid: uuid })),
      { type: 'accepted', imgUuid: uuid, cost: undefined, mayHaveCharged: true, retrySafe: false },
    ],
    [
      'a numeric img_uuid as a string, and the envelope request id',
      response(200, { code: 0, msg: 'Success', request_id: 'req-1', data: { img_uuid: 42, cost: 2 } }),
      {
        type: 'accepted',
        imgUuid: '42',
        cost: 2,
        mayHaveCharged: true,
        retrySafe: false,
        requestId: 'req-1',
      },
    ],
    [
      'the request id of data',
      response(200, ok({ img_uuid: uuid, cost: 2, request_id: 'req-2' })),
      {
        type: 'accepted',
        imgUuid: uuid,
        cost: 2,
        mayHaveCharged: true,
        retrySafe: false,
        requestId: 'req-2',
      },
    ],
    [
      'the x-request-id header when the body has none',
      { ...response(400, { code: 400, msg: 'prompt: required' }), headers: { requestId: 'hdr-3' } },
      {
        type: 'rejected',
        httpStatus: 400,
        message: 'prompt: required',
        mayHaveCharged: false,
        retrySafe: false,
        requestId: 'hdr-3',
      },
    ],
    [
      'a 429 with Retry-After as a throttled retry',
      { ...response(429, { code: 429, msg: 'Too many requests' }), headers: { retryAfterMs: 30_000 } },
      {
        type: 'retryable',
        reason: 'HTTP 429 with code 429 (Too many requests): the API asked to slow down',
        retryAfterMs: 30_000,
        throttled: true,
        mayHaveCharged: false,
        retrySafe: true,
      },
    ],
    [
      'a 429 without a body as throttled',
      response(429, ''),
      {
        type: 'retryable',
        reason: 'HTTP 429 with an empty body: the API asked to slow down',
        throttled: true,
        mayHaveCharged: false,
        retrySafe: true,
      },
    ],
    [
      'HTTP 200 code 500 as not accepted',
      response(200, { code: 500, msg: null }),
      {
        type: 'retryable',
        reason: 'HTTP 200 with code 500: not accepted, nothing charged',
        mayHaveCharged: false,
        retrySafe: true,
      },
    ],
    [
      'a 503 with Retry-After as throttled',
      { ...response(503, '<html>maintenance</html>'), headers: { retryAfterMs: 120_000 } },
      {
        type: 'retryable',
        reason: 'HTTP 503 with Retry-After: the API asked to try again later',
        retryAfterMs: 120_000,
        throttled: true,
        mayHaveCharged: false,
        retrySafe: true,
      },
    ],
  ])('reads %s', (_name, answer, expected) => {
    expect(classifySubmission(answer)).toEqual(expected);
  });

  it('passes the API message of a rejection through, naming the field', () => {
    const outcome = classifySubmission(response(400, { code: 400, msg: 'duration: must be 5 or 10, got 7' }));
    expect(outcome).toMatchObject({
      type: 'rejected',
      httpStatus: 400,
      message: 'duration: must be 5 or 10, got 7',
    });
  });

  it('tells to check the base URL on an HTML 404', () => {
    const outcome = classifySubmission(response(404, html404));
    expect(outcome.type === 'retryable' && outcome.reason).toBe(
      'HTTP 404 with a body that is not the API envelope: <html><head><title>404 Not Found</title></head><body>nginx</body></html>: the request did not reach the API (check the base URL)',
    );
  });

  it('says an undecodable 2xx body may have been charged', () => {
    const outcome = classifySubmission({
      ...response(200, ''),
      unreadable: 'content-encoding zstd is not supported',
    });
    expect(outcome.type === 'in-doubt' && outcome.reason).toBe(
      'HTTP 200 with a body that cannot be read (content-encoding zstd is not supported); the request may have been charged',
    );
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
    ['code "0" and msg null', response(200, { code: '0', msg: null, data: job }), 'ok'],
    ['no msg at all', response(200, { code: 0, data: job }), 'ok'],
    ['an HTML 404', response(404, html404), 'not-found'],
    ['an HTML 403 from a firewall', response(403, '<html>denied</html>'), 'retryable'],
    ['HTTP 200 code 500', response(200, { code: 500, msg: '' }), 'retryable'],
  ])('%s -> %s', (_name, answer, type) => {
    expect(classifyPoll(answer).type).toBe(type);
  });

  it.each<[string, ApiAnswer, PollOutcome]>([
    [
      'a completed job with numbers as strings',
      response(200, {
        code: '0',
        msg: null,
        data: {
          img_uuid: uuid,
          status: 'completed',
          duration: '12.5',
          json: [{ type: 'image', value: 'https://cdn.example/1.png', link_expired_at: '1728687332' }],
        },
      }),
      {
        type: 'ok',
        value: {
          img_uuid: uuid,
          status: 'completed',
          duration: 12.5,
          json: [{ type: 'image', value: 'https://cdn.example/1.png', link_expired_at: 1728687332 }],
        },
      },
    ],
    [
      'a 429 with Retry-After',
      { ...response(429, ''), headers: { retryAfterMs: 2000, requestId: 'r-9' } },
      {
        type: 'retryable',
        reason: 'HTTP 429 with an empty body: the API asked to slow down',
        retryAfterMs: 2000,
        throttled: true,
        requestId: 'r-9',
      },
    ],
    [
      'a 503 with Retry-After',
      { ...response(503, { code: 503, msg: 'maintenance' }), headers: { retryAfterMs: 60_000 } },
      {
        type: 'retryable',
        reason: 'HTTP 503 with code 503 (maintenance): the API asked to slow down',
        retryAfterMs: 60_000,
        throttled: true,
      },
    ],
    [
      'a 200 HTML page as unreadable',
      response(200, '<html>login</html>'),
      {
        type: 'retryable',
        reason: 'HTTP 200 with a body that is not the API envelope: <html>login</html>',
        unreadable: true,
      },
    ],
    [
      'a record without status as unreadable',
      response(200, { code: 0, data: { img_uuid: uuid } }),
      {
        type: 'retryable',
        reason: 'job record is malformed (status: Invalid input: expected string, received undefined)',
        unreadable: true,
      },
    ],
    [
      'an undecodable body as unreadable',
      { ...response(502, ''), unreadable: 'corrupt gzip body' },
      {
        type: 'retryable',
        reason: 'HTTP 502 with a body that cannot be read (corrupt gzip body)',
        unreadable: true,
      },
    ],
    [
      'a 404 with its request id',
      response(404, { code: 404, msg: 'job not found', request_id: 'r-1' }),
      { type: 'not-found', message: 'job not found', requestId: 'r-1' },
    ],
  ])('reads %s', (_name, answer, expected) => {
    expect(classifyPoll(answer)).toEqual(expected);
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
      'a count as a string',
      response(200, { code: '0', msg: null, data: { count: ' 250.5 ' } }),
      { type: 'ok', value: 250.5 },
    ],
    [
      'a throttled read',
      { ...response(429, { code: 429 }), headers: { retryAfterMs: 1000 } },
      {
        type: 'retryable',
        reason: 'HTTP 429 with code 429: the API asked to slow down',
        retryAfterMs: 1000,
        throttled: true,
      },
    ],
    [
      'a missing token',
      response(401, { code: 401, msg: 'Token is required' }),
      { type: 'unauthorized', message: 'Token is required' },
    ],
  ])('%s', (_name, answer, expected) => {
    expect(classifyBalance(answer)).toEqual(expected);
  });

  it.each([[{}], [{ count: 'plenty' }], [null]])('retries a balance of %j as unreadable', (data) => {
    expect(classifyBalance(response(200, { code: 0, msg: 'ok', data }))).toMatchObject({
      type: 'retryable',
      unreadable: true,
    });
  });
});
