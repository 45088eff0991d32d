import { describe, expect, it } from 'vitest';
import {
  CATALOG,
  DEFAULT_PRICES,
  type MediaDurations,
  type ModelId,
  mergePrices,
  type RequestBody,
  roundTokens,
} from '../../src/catalog/index.js';
import { chars, vary } from './cases.js';

const U = undefined;

// [model, change to the base request, measured lengths, media_seconds hint, tokens, min, max], by hand from the spec.
const prices: [string, ModelId, RequestBody, MediaDurations, number | undefined, number, number, number][] = [
  ['30 s avatar at 540p', 'ai-talking-avatar-video', { duration: 30 }, {}, U, 30, 30, 30],
  ['30 s avatar at 720p', 'ai-talking-avatar-video', { duration: 30, resolution: '720p' }, {}, U, 45, 45, 45],
  [
    'avatar, normal: shorter of 30.2 s video and 40 s audio -> 31 s',
    'ai-talking-avatar-video',
    {},
    { video_url: 30.2, audio_url: 40 },
    U,
    31,
    31,
    31,
  ],
  [
    'avatar, loop: 12.5 s audio -> 13 s at 720p',
    'ai-talking-avatar-video',
    { video_mode: 'loop', resolution: '720p' },
    { video_url: 3, audio_url: 12.5 },
    U,
    19.5,
    19.5,
    19.5,
  ],
  [
    'avatar, duration wins over measured',
    'ai-talking-avatar-video',
    { duration: 10 },
    { video_url: 50, audio_url: 50 },
    U,
    10,
    10,
    10,
  ],
  ['avatar, media_seconds hint', 'ai-talking-avatar-video', {}, {}, 20, 20, 20, 20],
  ['avatar, nothing known: 3-60 s', 'ai-talking-avatar-video', {}, {}, U, 60, 3, 60],
  [
    'studio 10 s 1080p audio + voice',
    'studio-2-6',
    {
      image_url: 'https://x/i.png',
      prompt: U,
      duration: 10,
      resolution: '1080p',
      generate_audio: true,
      voice_ids: ['v'],
    },
    {},
    U,
    84,
    84,
    84,
  ],
  [
    'studio 5 s 1080p audio',
    'studio-2-6',
    { duration: 5, resolution: '1080p', generate_audio: true },
    {},
    U,
    35,
    35,
    35,
  ],
  ['studio 5 s 720p', 'studio-2-6', { duration: 5, resolution: '720p' }, {}, U, 10.5, 10.5, 10.5],
  ['studio 10 s 1080p', 'studio-2-6', { duration: 10, resolution: '1080p' }, {}, U, 35, 35, 35],
  [
    'studio first+last frame forces 720p',
    'studio-2-6',
    { image_url: 'https://x/a.png', image_end_url: 'https://x/b.png', duration: 10 },
    {},
    U,
    21,
    21,
    21,
  ],
  ['studio duration unset at 1080p', 'studio-2-6', { resolution: '1080p' }, {}, U, 35, 17.5, 35],
  ['studio duration and resolution unset', 'studio-2-6', {}, {}, U, 35, 10.5, 35],
  [
    'dance 12.3 s measured at 720p -> 13 s',
    'ai_dance_move',
    { resolution: '720p' },
    { video_url: 12.3 },
    U,
    52,
    52,
    52,
  ],
  [
    'dance duration 10 at 480p',
    'ai_dance_move',
    { duration: 10, resolution: '480p' },
    { video_url: 20 },
    U,
    20,
    20,
    20,
  ],
  ['dance hint 7.5 s at 480p -> 8 s', 'ai_dance_move', { resolution: '480p' }, {}, 7.5, 16, 16, 16],
  ['dance nothing known at 720p', 'ai_dance_move', { resolution: '720p' }, {}, U, 120, 4, 120],
  ['dance resolution unset, 10 s', 'ai_dance_move', { duration: 10 }, {}, U, 40, 20, 40],
  ['flow22 480p', 'flow22_spicy', { resolution: '480p' }, {}, U, 5, 5, 5],
  ['flow22 720p', 'flow22_spicy', { resolution: '720p' }, {}, U, 10, 10, 10],
  ['flow22 resolution unset', 'flow22_spicy', {}, {}, U, 10, 5, 10],
  [
    'stream 5 s 720p generate_audio false',
    'stream-2-0-fast',
    { duration: 5, quality: '720p', generate_audio: false },
    {},
    U,
    57.585,
    57.585,
    57.585,
  ],
  ['stream 4 s 480p', 'stream-2-0-fast', { duration: 4, quality: '480p' }, {}, U, 19.24, 19.24, 19.24],
  [
    'stream 15 s 720p via alias',
    'stream-2-0-fast',
    { duration: 15, resolution: '720p', generate_audio: true },
    {},
    U,
    157.05,
    157.05,
    157.05,
  ],
  [
    'stream 10 s 480p generate_audio false',
    'stream-2-0-fast',
    { duration: 10, quality: '480p', generate_audio: false },
    {},
    U,
    52.91,
    52.91,
    52.91,
  ],
  ['stream duration and quality unset', 'stream-2-0-fast', {}, {}, U, 157.05, 19.24, 157.05],
  [
    'face swap 10 s upscaler 2 + enhance',
    'video-face-swap',
    { start_time: 0, end_time: 10, upscaler: 2, enhance_face: true },
    {},
    U,
    22.5,
    22.5,
    22.5,
  ],
  [
    'face swap 2.5-14.2 s -> 12 s',
    'video-face-swap',
    { start_time: 2.5, end_time: 14.2, upscaler: 1 },
    {},
    U,
    12,
    12,
    12,
  ],
  [
    'face swap whole measured video 30.4 s',
    'video-face-swap',
    { upscaler: 1 },
    { reference_video: 30.4 },
    U,
    31,
    31,
    31,
  ],
  [
    'face swap from 10 s to the end of 30 s',
    'video-face-swap',
    { start_time: 10, upscaler: 1 },
    { reference_video: 30 },
    U,
    20,
    20,
    20,
  ],
  [
    'face swap only end_time',
    'video-face-swap',
    { end_time: 12, upscaler: 1, enhance_face: true },
    {},
    U,
    18,
    18,
    18,
  ],
  ['face swap upscaler unset', 'video-face-swap', { start_time: 0, end_time: 10 }, {}, U, 15, 10, 15],
  ['face swap media_seconds hint', 'video-face-swap', { upscaler: 1 }, {}, 12, 12, 12, 12],
  ['face swap nothing known', 'video-face-swap', { upscaler: 1 }, {}, U, 120, 0, 120],
  ['flat-image', 'flat-image', {}, {}, U, 0.2, 0.2, 0.2],
  ['anime-waifu', 'anime-waifu', {}, {}, U, 0.2, 0.2, 0.2],
  ['pixel-lite', 'pixel-lite', {}, {}, U, 2, 2, 2],
  ['oc-maker', 'oc-maker', {}, {}, U, 2, 2, 2],
  ['speech 1 character', 'speech-v3', { text: 'a' }, {}, U, 2, 2, 2],
  ['speech 200 characters', 'speech-v3', { text: chars(200) }, {}, U, 2, 2, 2],
  ['speech 201 characters', 'speech-v3', { text: chars(201) }, {}, U, 4, 4, 4],
  ['speech 5000 characters', 'speech-v3', { text: chars(5000) }, {}, U, 50, 50, 50],
  ['song-replace-section', 'song-replace-section', {}, {}, U, 1.63, 1.63, 1.63],
  ['voice cover 90.2 s -> 91 s', 'voice-cover', {}, { audio_url: 90.2 }, U, 1.82, 1.82, 1.82],
  ['voice cover 5 s', 'voice-cover', {}, { audio_url: 5 }, U, 0.1, 0.1, 0.1],
  ['voice cover 360 s', 'voice-cover', {}, { audio_url: 360 }, U, 7.2, 7.2, 7.2],
  ['voice cover hint 60 s', 'voice-cover', {}, {}, 60, 1.2, 1.2, 1.2],
  ['voice cover nothing known', 'voice-cover', {}, {}, U, 7.2, 0.1, 7.2],
];

describe('list prices from the spec', () => {
  it.each(prices)('%s', (_name, model, patch, media, hint, tokens, min, max) => {
    const entry = CATALOG[model];
    const checked = entry.check(vary(model, patch));
    if (!checked.ok) throw new Error(JSON.stringify(checked.issues));
    const estimate = entry.estimate(checked.body, media, DEFAULT_PRICES, hint);
    expect({ tokens: estimate.tokens, min: estimate.min, max: estimate.max }).toEqual({ tokens, min, max });
    expect(estimate.assumedPrice).toBe(model === 'video-face-swap' || model === 'oc-maker');
    expect(estimate.basis.length).toBeGreaterThan(0);
  });
});

describe('the basis a person reads', () => {
  const basis = (model: ModelId, patch: RequestBody, media: MediaDurations = {}, hint?: number) =>
    CATALOG[model].estimate(vary(model, patch), media, DEFAULT_PRICES, hint).basis;

  it.each<[ModelId, RequestBody, MediaDurations, number | undefined, string]>([
    ['ai-talking-avatar-video', { duration: 30, resolution: '720p' }, {}, U, '30 s × 1.5 tokens (720p)'],
    ['voice-cover', {}, { audio_url: 90.2 }, U, '91 s (90.2 s measured, rounded up) × 0.02 tokens'],
    [
      'stream-2-0-fast',
      { duration: 5, quality: '720p', generate_audio: false },
      {},
      U,
      '5 s × 10.47 tokens (720p) × 1.1 (generate_audio false)',
    ],
    ['speech-v3', { text: chars(201) }, {}, U, '201 characters = 2 units of 200 × 2 tokens'],
    [
      'studio-2-6',
      { duration: 10, resolution: '1080p', generate_audio: true, voice_ids: ['v'] },
      {},
      U,
      '10 s × 8.4 tokens (1080p, native audio + voice)',
    ],
    [
      'ai_dance_move',
      { resolution: '480p' },
      {},
      7.5,
      '8 s (7.5 s media_seconds, rounded up) × 2 tokens (480p)',
    ],
  ])('%s %j', (model, patch, media, hint, expected) => {
    expect(basis(model, patch, media, hint)).toBe(expected);
  });

  it('says where a range comes from and how to price exactly', () => {
    expect(basis('studio-2-6', {})).toContain('set duration and resolution to price exactly');
    expect(basis('stream-2-0-fast', { quality: '480p' })).toContain('set duration to price exactly');
    expect(basis('voice-cover', {})).toContain('not measured and no media_seconds given');
    expect(basis('video-face-swap', { start_time: 0, end_time: 10, upscaler: 1 })).toContain(
      'assumed list price',
    );
    expect(basis('oc-maker', {})).toContain('assumed list price');
  });

  it('ignores a media_seconds hint that is not a positive number', () => {
    const e = CATALOG['voice-cover'].estimate(vary('voice-cover'), {}, DEFAULT_PRICES, -3);
    expect([e.min, e.max]).toEqual([0.1, 7.2]);
  });
});

describe('roundTokens', () => {
  it.each([
    [91 * 0.02, 1.82],
    [5 * 10.47 * 1.1, 57.585],
    [0.1 + 0.2, 0.3],
    [1.0000004, 1],
    [1.0000006, 1.000001],
  ])('%d -> %d', (n, expected) => {
    expect(roundTokens(n)).toBe(expected);
  });
});

describe('mergePrices', () => {
  it('returns the defaults when nothing is overridden', () => {
    expect(mergePrices(undefined)).toEqual({ prices: DEFAULT_PRICES, issues: [] });
    expect(mergePrices({})).toEqual({ prices: DEFAULT_PRICES, issues: [] });
  });

  it('overrides single figures and keeps the rest', () => {
    const { prices, issues } = mergePrices({
      'video-face-swap': { perSecond: 2 },
      'flat-image': { perImage: 0.1 },
    });
    expect(issues).toEqual([]);
    expect(prices['video-face-swap']).toEqual({
      perSecond: 2,
      upscalerMultiplier: 1.5,
      enhanceFaceMultiplier: 1.5,
    });
    expect(prices['flat-image'].perImage).toBe(0.1);
    expect(prices['pixel-lite']).toEqual(DEFAULT_PRICES['pixel-lite']);
    const e = CATALOG['video-face-swap'].estimate({ start_time: 0, end_time: 10, upscaler: 2 }, {}, prices);
    expect(e.tokens).toBe(30);
  });

  it('never changes the defaults', () => {
    mergePrices({ 'flat-image': { perImage: 9 } });
    expect(DEFAULT_PRICES['flat-image'].perImage).toBe(0.2);
    expect(Object.isFrozen(DEFAULT_PRICES['flat-image'])).toBe(true);
  });

  it('reports unknown models, unknown keys and non-positive numbers, and applies the rest', () => {
    const { prices, issues } = mergePrices({
      'flat-imag': { perImage: 1 },
      'speech-v3': { perUnit: 0, perChar: 1, charactersPerUnit: 100 },
      'voice-cover': { perSecond: '0.03' },
      'pixel-lite': 3,
    });
    expect(issues).toEqual([
      {
        path: 'flat-imag',
        message: expect.stringContaining('unknown model; known models are: ai-talking-avatar-video'),
      },
      { path: 'speech-v3.perUnit', message: 'must be a number > 0, got 0' },
      { path: 'speech-v3.perChar', message: 'unknown price; known prices: perUnit, charactersPerUnit' },
      { path: 'voice-cover.perSecond', message: 'must be a number > 0, got "0.03"' },
      { path: 'pixel-lite', message: 'must be a mapping of price names to tokens, got 3' },
    ]);
    expect(prices['speech-v3']).toEqual({ perUnit: 2, charactersPerUnit: 100 });
    expect(CATALOG['speech-v3'].estimate({ text: chars(201) }, {}, prices).tokens).toBe(6);
  });

  it('refuses overrides that are not a mapping', () => {
    expect(mergePrices([1]).issues).toEqual([
      { path: '', message: 'must be a mapping of model to prices, got a list of 1' },
    ]);
  });
});

describe('assumed prices a user confirms', () => {
  it('are no longer called an assumption once set under prices:', () => {
    const { prices } = mergePrices({ 'video-face-swap': { perSecond: 1.2 }, 'oc-maker': { perJob: 3 } });
    const swap = CATALOG['video-face-swap'].estimate(
      {
        reference_video: 'https://x/v.mp4',
        reference_img: 'https://x/f.png',
        start_time: 0,
        end_time: 10,
        upscaler: 1,
      },
      {},
      prices,
    );
    expect(swap).toMatchObject({ tokens: 12, assumedPrice: false });
    expect(swap.basis).toContain('list price from your configuration');
    const sheet = CATALOG['oc-maker'].estimate({ prompt: 'x', image_render_model: 'render-a' }, {}, prices);
    expect(sheet).toEqual({
      tokens: 3,
      min: 3,
      max: 3,
      basis: '1 job × 3 tokens (both stages billed once); list price from your configuration',
      assumedPrice: false,
    });
    // With our own figures, they say so.
    expect(
      CATALOG['oc-maker'].estimate({ prompt: 'x', image_render_model: 'render-a' }, {}, DEFAULT_PRICES)
        .assumedPrice,
    ).toBe(true);
  });
});
