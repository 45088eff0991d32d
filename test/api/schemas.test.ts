import { describe, expect, it } from 'vitest';
import {
  balanceSchema,
  envelopeSchema,
  isDocumentedJobStatus,
  jobPhase,
  jobRecordSchema,
  looseNumber,
  submissionSchema,
} from '../../src/api/schemas.js';

const uuid = '0b6f7c4e-8f4e-4a39-9a53-2b1f2d7f0e11';

describe('job record', () => {
  it.each([
    ['pending with json null', { img_uuid: uuid, status: 'pending', json: null }],
    ['an unknown status', { img_uuid: uuid, status: 'WAITING' }],
    ['a status named completed', { img_uuid: uuid, status: 'completed', json: [] }],
    [
      'oc-maker: a json item whose value is an object, then an image',
      {
        img_uuid: uuid,
        status: 'success',
        json: [
          { type: 'json', value: { oc_prompt: 'a knight', name: 'Ser Ada' } },
          { type: 'image', value: 'https://cdn.example/1.png' },
        ],
        link_expired_at: '2024-10-11T22:55:32.596Z',
        duration: 12.5,
      },
    ],
    [
      'song items with their metadata',
      {
        img_uuid: uuid,
        status: 'success',
        json: [
          {
            type: 'audio',
            value: 'https://cdn.example/1.mp3',
            audio_id: 'a-1',
            title: 'Spring',
            audio_duration: 121.4,
            style: 'pop',
            lyrics: '[Verse] la la',
          },
        ],
      },
    ],
    [
      'a failed job with an error field',
      { img_uuid: uuid, status: 'failed', json: null, error: 'oc_prompt missing' },
    ],
  ])('accepts %s and keeps every field', (_name, record) => {
    const parsed = jobRecordSchema.safeParse(record);
    expect(parsed.success).toBe(true);
    expect(parsed.data).toEqual(record);
  });

  it.each([
    ['no img_uuid', { status: 'pending' }],
    ['an empty img_uuid', { img_uuid: '', status: 'pending' }],
    ['an img_uuid with a line break', { img_uuid: 'a\nb', status: 'pending' }],
    ['no status', { img_uuid: uuid }],
    ['a numeric status', { img_uuid: uuid, status: 2 }],
    ['not an object', 'pending'],
  ])('refuses %s', (_name, record) => {
    expect(jobRecordSchema.safeParse(record).success).toBe(false);
  });

  it.each<[string, Record<string, unknown>, Record<string, unknown>]>([
    [
      'numbers as strings, on the record and its items',
      {
        img_uuid: uuid,
        status: 'success',
        duration: '12.5',
        link_expired_at: ' 1728687332 ',
        json: [
          { type: 'audio', value: 'https://cdn.example/1.mp3', audio_duration: '121.40', duration: '3' },
        ],
      },
      {
        img_uuid: uuid,
        status: 'success',
        duration: 12.5,
        link_expired_at: 1728687332,
        json: [{ type: 'audio', value: 'https://cdn.example/1.mp3', audio_duration: 121.4, duration: 3 }],
      },
    ],
    [
      'an item with its own ISO expiry',
      {
        img_uuid: uuid,
        status: 'success',
        json: [{ type: 'image', value: 'https://x/1.png', link_expired_at: '2024-10-11T22:55:32.596Z' }],
      },
      {
        img_uuid: uuid,
        status: 'success',
        json: [{ type: 'image', value: 'https://x/1.png', link_expired_at: '2024-10-11T22:55:32.596Z' }],
      },
    ],
    [
      'an item without type, a bare URL item, and junk items',
      { img_uuid: uuid, status: 'success', json: [{ value: 'https://x/1.png' }, 'https://x/2.png', 7, null] },
      {
        img_uuid: uuid,
        status: 'success',
        json: [
          { type: '', value: 'https://x/1.png' },
          { type: '', value: 'https://x/2.png' },
        ],
      },
    ],
    [
      'fields of the wrong type, which become undefined',
      {
        img_uuid: uuid,
        status: 'processing',
        type: 5,
        start_time: {},
        duration: 'long',
        link_expired_at: true,
        json: [{ type: 'image', value: 5, audio_duration: 'n/a', title: 9 }],
      },
      { img_uuid: uuid, status: 'processing', json: [{ type: 'image' }] },
    ],
    [
      'a numeric img_uuid and a numeric audio_id',
      {
        img_uuid: 123456,
        status: 'success',
        json: [{ type: 'audio', value: 'https://x/a.mp3', audio_id: 17 }],
      },
      {
        img_uuid: '123456',
        status: 'success',
        json: [{ type: 'audio', value: 'https://x/a.mp3', audio_id: '17' }],
      },
    ],
    ['json missing', { img_uuid: uuid, status: 'pending' }, { img_uuid: uuid, status: 'pending' }],
    [
      'json as one item object',
      { img_uuid: uuid, status: 'success', json: { type: 'image', value: 'https://x/1.png' } },
      { img_uuid: uuid, status: 'success', json: [{ type: 'image', value: 'https://x/1.png' }] },
    ],
    [
      'json as a string',
      { img_uuid: uuid, status: 'success', json: 'oops' },
      { img_uuid: uuid, status: 'success' },
    ],
  ])('reads %s', (_name, record, expected) => {
    const parsed = jobRecordSchema.safeParse(record);
    expect(parsed.success).toBe(true);
    // JSON drops the keys that read as undefined, as a file or the store would.
    expect(JSON.parse(JSON.stringify(parsed.data))).toEqual(expected);
  });
});

describe('looseNumber', () => {
  it.each<[unknown, number | undefined]>([
    [3, 3],
    ['3', 3],
    [' 1.63 ', 1.63],
    ['-2', -2],
    ['.5', 0.5],
    ['0', 0],
    ['', undefined],
    ['1e3', undefined],
    ['0x10', undefined],
    ['12 tokens', undefined],
    [null, undefined],
    [true, undefined],
    [Number.POSITIVE_INFINITY, undefined],
    [Number.NaN, undefined],
  ])('%j -> %j', (input, expected) => {
    const parsed = looseNumber.safeParse(input);
    expect(parsed.success ? parsed.data : undefined).toBe(expected);
  });
});

describe('job status vocabulary', () => {
  it.each<[string, string, boolean]>([
    ['pending', 'waiting', true],
    ['processing', 'waiting', true],
    ['success', 'success', true],
    ['failed', 'failed', true],
    ['completed', 'success', false],
    ['Succeeded', 'success', false],
    [' DONE ', 'success', false],
    ['finished', 'success', false],
    ['FAILURE', 'failed', false],
    ['error', 'failed', false],
    ['cancelled', 'failed', false],
    ['canceled', 'failed', false],
    ['WAITING', 'waiting', false],
    ['queued', 'waiting', false],
    ['', 'waiting', false],
    ['Success', 'success', false],
  ])('%j is %s (documented: %s)', (status, phase, documented) => {
    expect(jobPhase(status)).toBe(phase);
    expect(isDocumentedJobStatus(status)).toBe(documented);
  });
});

describe('envelope, submission and balance', () => {
  it.each<[unknown, Record<string, unknown>]>([
    [{ code: 500 }, { code: 500, msg: '' }],
    [
      { code: '0', msg: null, data: { x: 1 } },
      { code: 0, msg: '', data: { x: 1 } },
    ],
    [
      { code: ' 101 ', msg: 5 },
      { code: 101, msg: '' },
    ],
    [
      { code: 0, msg: 'ok', request_id: 'r-1', extra: true },
      { code: 0, msg: 'ok', request_id: 'r-1', extra: true },
    ],
  ])('reads %j as an envelope', (body, expected) => {
    expect(envelopeSchema.parse(body)).toEqual(expected);
  });

  it.each([[{ msg: 'x' }], [{ code: 'zero' }], [{ code: 1.5 }], [{ code: null }], ['text'], [null], [[0]]])(
    'refuses %j as an envelope',
    (body) => {
      expect(envelopeSchema.safeParse(body).success).toBe(false);
    },
  );

  it.each<[unknown, string, number | undefined]>([
    [{ img_uuid: uuid, cost: 5 }, uuid, 5],
    [{ img_uuid: uuid, cost: '1.63' }, uuid, 1.63],
    [{ img_uuid: uuid }, uuid, undefined],
    [{ img_uuid: uuid, cost: null }, uuid, undefined],
    [{ img_uuid: uuid, cost: 'free' }, uuid, undefined],
    [{ img_uuid: uuid, cost: -1 }, uuid, undefined],
    [{ img_uuid: 987654321, cost: 0 }, '987654321', 0],
    [{ img_uuid: 'x'.repeat(200), cost: 1 }, 'x'.repeat(200), 1],
  ])('reads %j as a submission result', (data, imgUuid, cost) => {
    const parsed = submissionSchema.parse(data);
    expect(parsed.img_uuid).toBe(imgUuid);
    expect(parsed.cost).toBe(cost);
  });

  it.each([
    [{ img_uuid: '', cost: 1 }],
    [{ img_uuid: '   ', cost: 1 }],
    [{ img_uuid: 'x'.repeat(201), cost: 1 }],
    [{ img_uuid: 'abc\u0000', cost: 1 }],
    [{ img_uuid: 'abc\r\nSet-Cookie: x', cost: 1 }],
    [{ img_uuid: { id: 1 }, cost: 1 }],
    [{ cost: 3 }],
    [null],
  ])('refuses %j as a submission result', (data) => {
    expect(submissionSchema.safeParse(data).success).toBe(false);
  });

  it.each<[unknown, number | undefined]>([
    [{ count: 1000 }, 1000],
    [{ count: '12.37' }, 12.37],
    [{ count: 'many' }, undefined],
    [{}, undefined],
  ])('reads %j as a balance', (data, count) => {
    const parsed = balanceSchema.safeParse(data);
    expect(parsed.success ? parsed.data.count : undefined).toBe(count);
  });
});
