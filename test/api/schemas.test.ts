import { describe, expect, it } from 'vitest';
import {
  envelopeSchema,
  isFinalJobStatus,
  isKnownJobStatus,
  jobRecordSchema,
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
    ['no status', { img_uuid: uuid }],
    ['json is an object', { img_uuid: uuid, status: 'success', json: { type: 'image' } }],
    ['an item without type', { img_uuid: uuid, status: 'success', json: [{ value: 'https://x' }] }],
    ['a numeric value', { img_uuid: uuid, status: 'success', json: [{ type: 'image', value: 5 }] }],
  ])('refuses %s', (_name, record) => {
    expect(jobRecordSchema.safeParse(record).success).toBe(false);
  });
});

describe('status helpers', () => {
  it.each([
    ['pending', true, false],
    ['processing', true, false],
    ['success', true, true],
    ['failed', true, true],
    ['completed', false, false],
    ['WAITING', false, false],
  ])('%s: known %s, final %s', (status, known, final) => {
    expect(isKnownJobStatus(status)).toBe(known);
    expect(isFinalJobStatus(status)).toBe(final);
  });
});

describe('envelope and submission', () => {
  it('accepts an envelope without msg or data (500 bodies are terse)', () => {
    expect(envelopeSchema.parse({ code: 500 })).toEqual({ code: 500, msg: '' });
  });
  it.each([[{ msg: 'x' }], [{ code: '0' }], [{ code: 1.5 }], ['text'], [null]])(
    'refuses %j as an envelope',
    (body) => {
      expect(envelopeSchema.safeParse(body).success).toBe(false);
    },
  );
  it.each([[{ img_uuid: '', cost: 1 }], [{ img_uuid: uuid, cost: -1 }], [{ img_uuid: uuid }]])(
    'refuses %j as a submission result',
    (data) => {
      expect(submissionSchema.safeParse(data).success).toBe(false);
    },
  );
});
