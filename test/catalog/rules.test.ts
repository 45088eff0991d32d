import { describe, expect, it } from 'vitest';
import { CATALOG, checkRequest, MODEL_IDS, type ModelId, type RequestBody } from '../../src/catalog/index.js';
import { BASE, chars, I, V, vary } from './cases.js';

const U = undefined;

// Requests the spec allows, each at or inside a bound.
const valid: [ModelId, RequestBody][] = [
  [
    'ai-talking-avatar-video',
    { prompt: 'person talking', resolution: '540p', video_mode: 'normal', duration: 3 },
  ],
  ['ai-talking-avatar-video', { resolution: '720p', video_mode: 'loop', duration: 60 }],
  ['studio-2-6', { prompt: chars(2500), duration: 5, resolution: '720p', aspect_ratio: '16:9' }],
  ['studio-2-6', { duration: 10, resolution: '1080p', aspect_ratio: '9:16', generate_audio: false }],
  ['studio-2-6', { aspect_ratio: '1:1', generate_audio: true, resolution: '1080p' }],
  ['studio-2-6', { prompt: U, image_url: I }],
  ['studio-2-6', { image_url: I, image_end_url: I }],
  ['studio-2-6', { image_url: I, image_end_url: I, resolution: '720p' }],
  ['studio-2-6', { image_url: I, voice_ids: ['v1', 'v2'], generate_audio: true, resolution: '1080p' }],
  [
    'studio-2-6',
    { prompt: '@1 says hi', image_url: I, voice_id: 'v1', generate_audio: true, quality: '1080p' },
  ],
  ['studio-2-6', { ratio: '9:16' }],
  ['ai_dance_move', { duration: 1, resolution: '480p' }],
  ['ai_dance_move', { duration: 30, resolution: '720p' }],
  ['flow22_spicy', { resolution: '480p' }],
  ['flow22_spicy', { prompt: U, image_url: I, resolution: '720p' }],
  ['stream-2-0-fast', { duration: 4, quality: '480p', aspect_ratio: 'adaptive', generate_audio: false }],
  ['stream-2-0-fast', { duration: 15, resolution: '720p', ratio: '21:9', content_filter: true }],
  ['stream-2-0-fast', { prompt: U, image_urls: [I] }],
  ['stream-2-0-fast', { image_urls: [I, I] }],
  ['stream-2-0-fast', { prompt: U, image_url: I }],
  ['stream-2-0-fast', { image_url: I, image_end_url: I }],
  ['video-face-swap', { upscaler: 1, start_time: 0, end_time: 120, enhance_face: false }],
  ['video-face-swap', { upscaler: 2, start_time: 0.5, end_time: 0.6, enhance_face: true }],
  ['video-face-swap', { start_time: 120 }],
  ['flat-image', { prompt: 'x', ratio: '3:2' }],
  ['flat-image', { prompt: chars(2000), ratio: '9:16' }],
  ['anime-waifu', { prompt: chars(2000), ratio: '1:1', negative_prompt: chars(2000), seed: -1 }],
  ['anime-waifu', { seed: 0 }],
  ['anime-waifu', { seed: 123456, negative_prompt: '' }],
  ['pixel-lite', { aspect_ratio: 'auto' }],
  ['pixel-lite', { aspect_ratio: '2:3', prompt: chars(10_000) }],
  ['oc-maker', { prompt: `oc_prompt ${chars(7990)}`, image_render_model: 'render-b' }],
  ['oc-maker', { system_prompt: chars(4000), text_model: chars(100), ratio: '16:9' }],
  ['oc-maker', { prompt: 'Make a knight', system_prompt: 'Answer as JSON with oc_prompt and oc_ratio' }],
  ['speech-v3', { text: 'a' }],
  ['speech-v3', { text: chars(5000), voice: chars(100), speed: 0.7 }],
  ['speech-v3', { speed: 1.2, voice: 'Alloy' }],
  ['song-replace-section', { infill_start_s: 0, infill_end_s: 10 }],
  ['song-replace-section', { infill_start_s: 12.34, infill_end_s: 22.34 }],
  ['song-replace-section', { audio_url: U, task_id: 'b1c2', audio_id: 'a9' }],
  [
    'song-replace-section',
    { lyrics: chars(5000), full_lyrics: chars(5000), style: chars(1000), title: chars(80) },
  ],
  [
    'song-replace-section',
    {
      negative_tags: chars(200),
      vocal_gender: 'female',
      style_weight: 0,
      weirdness_constraint: 1,
      audio_weight: 0.55,
      variation: 0,
      instrumental: false,
    },
  ],
  ['song-replace-section', { vocal_gender: 'm', style_weight: 1, weirdness_constraint: 0, variation: 4 }],
  ['song-replace-section', { instrumental: true }],
  ['voice-cover', { pitch_shift: -12, output_format: 'mp3' }],
  ['voice-cover', { pitch_shift: 12, output_format: 'wav' }],
  ['voice-cover', { audio_url: 'http://127.0.0.1:8787/song.mp3' }],
];

// [model, change to the valid base request, path of the issue, words of its message]
const invalid: [ModelId, RequestBody, string, string][] = [
  // talking avatar
  ['ai-talking-avatar-video', { video_url: U }, 'video_url', 'is required'],
  ['ai-talking-avatar-video', { audio_url: U }, 'audio_url', 'is required'],
  ['ai-talking-avatar-video', { video_url: 'ftp://x/y.mp4' }, 'video_url', 'must be an http(s) URL'],
  ['ai-talking-avatar-video', { audio_url: 'song.mp3' }, 'audio_url', 'must be an http(s) URL'],
  ['ai-talking-avatar-video', { resolution: '1080p' }, 'resolution', 'must be 540p or 720p, got "1080p"'],
  ['ai-talking-avatar-video', { video_mode: 'bounce' }, 'video_mode', 'must be normal or loop'],
  ['ai-talking-avatar-video', { duration: 2 }, 'duration', 'must be an integer from 3 to 60, got 2'],
  ['ai-talking-avatar-video', { duration: 61 }, 'duration', 'must be an integer from 3 to 60, got 61'],
  ['ai-talking-avatar-video', { duration: 10.5 }, 'duration', 'must be an integer from 3 to 60'],
  ['ai-talking-avatar-video', { prompt: '' }, 'prompt', 'must not be empty'],
  // studio-2-6
  ['studio-2-6', { prompt: chars(2501) }, 'prompt', 'must be 1 to 2500 characters, got 2501'],
  ['studio-2-6', { prompt: U }, 'prompt', 'is required unless image_url'],
  ['studio-2-6', { duration: 7 }, 'duration', 'must be 5 or 10, got 7'],
  ['studio-2-6', { resolution: '4K' }, 'resolution', 'must be 720p or 1080p, got "4K"'],
  ['studio-2-6', { quality: '480p' }, 'quality', 'must be 720p or 1080p'],
  [
    'studio-2-6',
    { quality: '720p', resolution: '720p' },
    'quality',
    'alias of resolution; give only one of them',
  ],
  ['studio-2-6', { ratio: '1:1', aspect_ratio: '1:1' }, 'ratio', 'alias of aspect_ratio'],
  ['studio-2-6', { aspect_ratio: '4:3' }, 'aspect_ratio', 'must be one of 16:9, 9:16, 1:1'],
  ['studio-2-6', { image_url: I, aspect_ratio: '16:9' }, 'aspect_ratio', 'text-to-video only'],
  ['studio-2-6', { image_end_url: I }, 'image_end_url', 'requires image_url'],
  ['studio-2-6', { image_url: 'not a url' }, 'image_url', 'must be an http(s) URL'],
  ['studio-2-6', { generate_audio: 'yes' }, 'generate_audio', 'must be true or false, got "yes"'],
  // impossible combination 1: voices without generate_audio true
  [
    'studio-2-6',
    { image_url: I, voice_ids: ['v1'], resolution: '1080p' },
    'voice_ids',
    'require generate_audio: true',
  ],
  [
    'studio-2-6',
    { image_url: I, voice_ids: ['v1'], generate_audio: false, resolution: '1080p' },
    'voice_ids',
    'generate_audio: true',
  ],
  // impossible combination 2: native audio below 1080p
  [
    'studio-2-6',
    { generate_audio: true, resolution: '720p' },
    'generate_audio',
    'requires resolution 1080p, got 720p',
  ],
  ['studio-2-6', { generate_audio: true }, 'generate_audio', 'set resolution: 1080p'],
  // impossible combination 3: first+last frame above 720p
  [
    'studio-2-6',
    { image_url: I, image_end_url: I, resolution: '1080p' },
    'resolution',
    'must be 720p with a first and last',
  ],
  // rules 2 and 3 exclude each other
  [
    'studio-2-6',
    { image_url: I, image_end_url: I, generate_audio: true, resolution: '1080p' },
    'image_end_url',
    'no native audio or voices',
  ],
  [
    'studio-2-6',
    { voice_ids: ['v1'], generate_audio: true, resolution: '1080p' },
    'voice_ids',
    'requires image_url',
  ],
  [
    'studio-2-6',
    { image_url: I, voice_ids: ['a', 'b', 'c'], generate_audio: true },
    'voice_ids',
    'list of 1 to 2',
  ],
  ['studio-2-6', { image_url: I, voice_ids: [], generate_audio: true }, 'voice_ids', 'list of 1 to 2'],
  ['studio-2-6', { image_url: I, voice_id: 'v1', voice_ids: ['v2'] }, 'voice_id', 'alias of voice_ids'],
  ['studio-2-6', { voice_id: 7 }, 'voice_id', 'must be a string, got 7'],
  // dance
  ['ai_dance_move', { image_url: U }, 'image_url', 'is required'],
  ['ai_dance_move', { video_url: U }, 'video_url', 'is required'],
  ['ai_dance_move', { duration: 0 }, 'duration', 'must be an integer from 1 to 30, got 0'],
  ['ai_dance_move', { duration: 31 }, 'duration', 'must be an integer from 1 to 30, got 31'],
  ['ai_dance_move', { resolution: '1080p' }, 'resolution', 'must be 480p or 720p'],
  // flow22
  ['flow22_spicy', { prompt: U }, 'prompt', 'is required unless image_url'],
  ['flow22_spicy', { resolution: '540p' }, 'resolution', 'must be 480p or 720p'],
  ['flow22_spicy', { image_url: 'javascript:alert(1)' }, 'image_url', 'must be an http(s) URL'],
  // stream
  ['stream-2-0-fast', { prompt: U }, 'prompt', 'is required unless image_urls'],
  ['stream-2-0-fast', { duration: 3 }, 'duration', 'must be an integer from 4 to 15, got 3'],
  ['stream-2-0-fast', { duration: 16 }, 'duration', 'must be an integer from 4 to 15, got 16'],
  ['stream-2-0-fast', { quality: '1080p' }, 'quality', 'must be 480p or 720p'],
  ['stream-2-0-fast', { resolution: '1080p' }, 'resolution', 'must be 480p or 720p'],
  ['stream-2-0-fast', { resolution: '720p', quality: '720p' }, 'resolution', 'alias of quality'],
  [
    'stream-2-0-fast',
    { aspect_ratio: '2:1' },
    'aspect_ratio',
    'must be one of 16:9, 9:16, 1:1, 4:3, 3:4, 21:9, adaptive',
  ],
  ['stream-2-0-fast', { ratio: '16:9', aspect_ratio: '16:9' }, 'ratio', 'alias of aspect_ratio'],
  ['stream-2-0-fast', { image_urls: [] }, 'image_urls', 'must be a list of 1 to 2 frame URLs'],
  ['stream-2-0-fast', { image_urls: [I, I, I] }, 'image_urls', 'must be a list of 1 to 2 frame URLs'],
  ['stream-2-0-fast', { image_urls: [I, 'nope'] }, 'image_urls.1', 'must be an http(s) URL'],
  ['stream-2-0-fast', { image_end_url: I }, 'image_end_url', 'requires image_url'],
  ['stream-2-0-fast', { image_url: I, image_urls: [I] }, 'image_url', 'alias of image_urls'],
  ['stream-2-0-fast', { image_url: 'nope' }, 'image_url', 'must be an http(s) URL'],
  ['stream-2-0-fast', { generate_audio: 0 }, 'generate_audio', 'must be true or false'],
  ['stream-2-0-fast', { content_filter: { a: 1 } }, 'content_filter', 'must be a string, number or boolean'],
  [
    'stream-2-0-fast',
    { callback_url: 'https://h/x' },
    'callback_url',
    'set by the manifest (callback_url: at the top)',
  ],
  // face swap
  ['video-face-swap', { reference_video: U }, 'reference_video', 'is required'],
  ['video-face-swap', { reference_img: U }, 'reference_img', 'is required'],
  ['video-face-swap', { upscaler: 3 }, 'upscaler', 'must be 1 or 2, got 3'],
  ['video-face-swap', { upscaler: '2' }, 'upscaler', 'must be 1 or 2, got "2"'],
  ['video-face-swap', { start_time: -0.1 }, 'start_time', 'must be a number from 0 to 120, got -0.1'],
  ['video-face-swap', { end_time: 120.5 }, 'end_time', 'must be a number from 0 to 120, got 120.5'],
  [
    'video-face-swap',
    { start_time: 10, end_time: 10 },
    'end_time',
    'must be greater than start_time (10), got 10',
  ],
  ['video-face-swap', { start_time: 10, end_time: 5 }, 'end_time', 'must be greater than start_time'],
  ['video-face-swap', { enhance_face: 1 }, 'enhance_face', 'must be true or false'],
  ['video-face-swap', { model: 'video-face-swap' }, 'model', "set by the manifest (the task's model:)"],
  // images
  ['flat-image', { prompt: U }, 'prompt', 'is required'],
  ['flat-image', { prompt: '' }, 'prompt', 'must be 1 to 2000 characters, got 0'],
  ['flat-image', { prompt: chars(2001) }, 'prompt', 'must be 1 to 2000 characters, got 2001'],
  ['flat-image', { ratio: '21:9' }, 'ratio', 'must be one of'],
  ['flat-image', { aspect_ratio: '1:1' }, 'aspect_ratio', 'unknown field; known fields are: prompt, ratio'],
  ['anime-waifu', { prompt: chars(2001) }, 'prompt', 'must be 1 to 2000 characters'],
  [
    'anime-waifu',
    { negative_prompt: chars(2001) },
    'negative_prompt',
    'must be at most 2000 characters, got 2001',
  ],
  ['anime-waifu', { seed: -2 }, 'seed', 'must be an integer >= -1, got -2'],
  ['anime-waifu', { seed: 1.5 }, 'seed', 'must be an integer >= -1'],
  ['anime-waifu', { ratio: 'auto' }, 'ratio', 'must be one of'],
  ['pixel-lite', { prompt: U }, 'prompt', 'is required'],
  ['pixel-lite', { aspect_ratio: '21:9' }, 'aspect_ratio', 'must be one of auto,'],
  ['pixel-lite', { ratio: '1:1' }, 'ratio', 'unknown field; known fields are: prompt, aspect_ratio'],
  ['oc-maker', { prompt: U }, 'prompt', 'is required'],
  ['oc-maker', { image_render_model: U }, 'image_render_model', 'is required'],
  ['oc-maker', { image_render_model: 'render-c' }, 'image_render_model', 'must be render-a or render-b'],
  ['oc-maker', { prompt: `oc_prompt${chars(7992)}` }, 'prompt', 'must be 1 to 8000 characters, got 8001'],
  ['oc-maker', { prompt: 'Draw a knight' }, 'prompt', 'mention oc_prompt'],
  ['oc-maker', { system_prompt: chars(4001) }, 'system_prompt', 'must be at most 4000 characters'],
  ['oc-maker', { text_model: chars(101) }, 'text_model', 'must be 1 to 100 characters, got 101'],
  ['oc-maker', { ratio: '21:9' }, 'ratio', 'must be one of'],
  // speech
  ['speech-v3', { text: U }, 'text', 'is required'],
  ['speech-v3', { text: '' }, 'text', 'must be 1 to 5000 characters, got 0'],
  ['speech-v3', { text: chars(5001) }, 'text', 'must be 1 to 5000 characters, got 5001'],
  ['speech-v3', { speed: 0.69 }, 'speed', 'must be a number from 0.7 to 1.2, got 0.69'],
  ['speech-v3', { speed: 1.21 }, 'speed', 'must be a number from 0.7 to 1.2, got 1.21'],
  ['speech-v3', { speed: '1' }, 'speed', 'must be a number'],
  ['speech-v3', { voice: chars(101) }, 'voice', 'must be 1 to 100 characters, got 101'],
  // song-replace-section
  ['song-replace-section', { audio_url: U }, '', 'needs a source: task_id + audio_id'],
  ['song-replace-section', { task_id: 't', audio_id: 'a' }, 'audio_url', 'not both'],
  ['song-replace-section', { audio_url: U, task_id: 't' }, 'audio_id', 'is required with task_id'],
  ['song-replace-section', { audio_url: U, audio_id: 'a' }, 'task_id', 'is required with audio_id'],
  ['song-replace-section', { audio_url: 'file:///song.mp3' }, 'audio_url', 'must be an http(s) URL'],
  ['song-replace-section', { infill_start_s: U }, 'infill_start_s', 'is required'],
  ['song-replace-section', { infill_end_s: U }, 'infill_end_s', 'is required'],
  ['song-replace-section', { infill_start_s: -1 }, 'infill_start_s', 'must be a number >= 0, got -1'],
  [
    'song-replace-section',
    { infill_start_s: 30, infill_end_s: 39.99 },
    'infill_end_s',
    'at least 10 s, got 9.99',
  ],
  [
    'song-replace-section',
    { infill_start_s: 1.234 },
    'infill_start_s',
    'must have at most 2 decimals, got 1.234',
  ],
  ['song-replace-section', { lyrics: U }, 'lyrics', 'is required'],
  ['song-replace-section', { full_lyrics: U }, 'full_lyrics', 'is required'],
  ['song-replace-section', { style: U }, 'style', 'is required'],
  ['song-replace-section', { title: U }, 'title', 'is required'],
  ['song-replace-section', { lyrics: chars(5001) }, 'lyrics', 'must be 1 to 5000 characters, got 5001'],
  ['song-replace-section', { full_lyrics: chars(5001) }, 'full_lyrics', 'must be 1 to 5000 characters'],
  ['song-replace-section', { style: chars(1001) }, 'style', 'must be 1 to 1000 characters, got 1001'],
  ['song-replace-section', { title: chars(81) }, 'title', 'must be 1 to 80 characters, got 81'],
  [
    'song-replace-section',
    { negative_tags: chars(201) },
    'negative_tags',
    'must be at most 200 characters, got 201',
  ],
  ['song-replace-section', { vocal_gender: 'x' }, 'vocal_gender', 'must be male or female, got "x"'],
  ['song-replace-section', { style_weight: 1.01 }, 'style_weight', 'must be a number from 0 to 1'],
  [
    'song-replace-section',
    { weirdness_constraint: -0.01 },
    'weirdness_constraint',
    'must be a number from 0 to 1',
  ],
  ['song-replace-section', { audio_weight: 2 }, 'audio_weight', 'must be a number from 0 to 1'],
  ['song-replace-section', { variation: 5 }, 'variation', 'must be an integer from 0 to 4, got 5'],
  ['song-replace-section', { variation: -1 }, 'variation', 'must be an integer from 0 to 4'],
  [
    'song-replace-section',
    { audio_weight: 0.5, instrumental: true },
    'audio_weight',
    'unavailable when instrumental is true',
  ],
  ['song-replace-section', { variant: 'v2' }, 'variant', 'not accepted by song-replace-section'],
  ['song-replace-section', { instrumental: 'no' }, 'instrumental', 'must be true or false'],
  // voice cover
  ['voice-cover', { audio_url: U }, 'audio_url', 'is required'],
  ['voice-cover', { reference_audio_url: U }, 'reference_audio_url', 'is required'],
  ['voice-cover', { pitch_shift: -13 }, 'pitch_shift', 'must be an integer from -12 to 12, got -13'],
  ['voice-cover', { pitch_shift: 13 }, 'pitch_shift', 'must be an integer from -12 to 12, got 13'],
  ['voice-cover', { pitch_shift: 1.5 }, 'pitch_shift', 'must be an integer from -12 to 12'],
  ['voice-cover', { output_format: 'flac' }, 'output_format', 'must be mp3 or wav, got "flac"'],
];

describe('request rules from the spec', () => {
  it.each(MODEL_IDS.map((m) => [m]))('accepts the base request of %s', (model) => {
    expect(checkRequest(model, BASE[model])).toEqual({ ok: true, body: BASE[model] });
  });

  it.each(valid)('%s accepts %j', (model, patch) => {
    const result = checkRequest(model, vary(model, patch));
    expect(result.ok ? [] : result.issues).toEqual([]);
  });

  it.each(invalid)('%s refuses %j at %s: %s', (model, patch, path, words) => {
    const result = checkRequest(model, vary(model, patch));
    expect(result.ok).toBe(false);
    const issues = result.ok ? [] : result.issues;
    expect(issues).toContainEqual({ path, message: expect.stringContaining(words) });
  });
});

describe('exact messages', () => {
  it('refuses a typo and lists the known fields', () => {
    expect(checkRequest('flow22_spicy', { prompt: 'x', reslution: '720p' })).toEqual({
      ok: false,
      issues: [
        { path: 'reslution', message: 'unknown field; known fields are: prompt, image_url, resolution' },
      ],
    });
  });

  it('names the unknown model and lists the known ones', () => {
    const result = checkRequest('flat-imag', { prompt: 'x' });
    expect(result).toEqual({
      ok: false,
      issues: [
        { path: 'model', message: `unknown model "flat-imag"; known models are: ${MODEL_IDS.join(', ')}` },
      ],
    });
  });

  it('says the manifest sets model and custom_callback_url', () => {
    expect(
      checkRequest('flat-image', { prompt: 'x', model: 'flat-image', custom_callback_url: 'https://h' }),
    ).toEqual({
      ok: false,
      issues: [
        { path: 'model', message: "set by the manifest (the task's model:), not in input; remove it" },
        {
          path: 'custom_callback_url',
          message: 'set by the manifest (callback_url: at the top), not in input; remove it',
        },
      ],
    });
  });

  it('reports every problem at once, not only the first', () => {
    const result = checkRequest('speech-v3', { text: '', speed: 2, voice: chars(101), pitch: 1 });
    expect(result.ok ? [] : result.issues.map((i) => i.path)).toEqual(['pitch', 'text', 'speed', 'voice']);
  });

  it('refuses a request that is not a mapping', () => {
    expect(checkRequest('flat-image', ['x'] as unknown as RequestBody)).toEqual({
      ok: false,
      issues: [{ path: '', message: 'must be a mapping of request fields, got a list of 1' }],
    });
  });

  it('counts characters, not UTF-16 units', () => {
    expect(checkRequest('flat-image', { prompt: '🦊'.repeat(2000) }).ok).toBe(true);
  });
});

describe('aliases are normalised to one canonical field', () => {
  it.each<[ModelId, RequestBody, RequestBody]>([
    ['studio-2-6', { prompt: 'p', quality: '1080p' }, { prompt: 'p', resolution: '1080p' }],
    ['studio-2-6', { prompt: 'p', ratio: '9:16' }, { prompt: 'p', aspect_ratio: '9:16' }],
    [
      'studio-2-6',
      { image_url: I, voice_id: 'v1', generate_audio: true, resolution: '1080p' },
      { image_url: I, voice_ids: ['v1'], generate_audio: true, resolution: '1080p' },
    ],
    ['stream-2-0-fast', { prompt: 'p', resolution: '720p' }, { prompt: 'p', quality: '720p' }],
    ['stream-2-0-fast', { prompt: 'p', ratio: '4:3' }, { prompt: 'p', aspect_ratio: '4:3' }],
    ['stream-2-0-fast', { image_url: I }, { image_urls: [I] }],
    ['stream-2-0-fast', { image_url: I, image_end_url: V }, { image_urls: [I, V] }],
    [
      'song-replace-section',
      vary('song-replace-section', { vocal_gender: 'f' }),
      vary('song-replace-section', { vocal_gender: 'female' }),
    ],
    [
      'song-replace-section',
      vary('song-replace-section', { vocal_gender: 'm' }),
      vary('song-replace-section', { vocal_gender: 'male' }),
    ],
  ])('%s %j -> %j', (model, input, body) => {
    expect(checkRequest(model, input)).toEqual({ ok: true, body });
  });
});

describe('catalog entries', () => {
  it('has one entry per model, on the spec endpoint', () => {
    expect(Object.keys(CATALOG).sort()).toEqual([...MODEL_IDS].sort());
    const paths = Object.fromEntries(MODEL_IDS.map((m) => [m, CATALOG[m].endpoint]));
    expect(paths['video-face-swap']).toBe('/api/v1/videofaceswap/generate');
    expect(paths['oc-maker']).toBe('/api/v1/images/generations');
    expect(paths['voice-cover']).toBe('/api/v1/audio/generations');
    expect(paths.ai_dance_move).toBe('/api/v1/videos/generations');
    expect(CATALOG['video-face-swap'].wireModel).toBeNull();
    for (const m of MODEL_IDS.filter((x) => x !== 'video-face-swap')) expect(CATALOG[m].wireModel).toBe(m);
  });

  it.each<[ModelId, string[], Record<string, string>]>([
    ['flat-image', ['image'], { image: 'png' }],
    ['oc-maker', ['json', 'image'], { json: 'json', image: 'png' }],
    ['speech-v3', ['audio'], { audio: 'mp3' }],
    ['song-replace-section', ['audio', 'audio'], { audio: 'mp3' }],
    ['voice-cover', ['audio'], { audio: 'mp3' }],
    ['studio-2-6', ['video'], { video: 'mp4' }],
    ['video-face-swap', ['video'], { video: 'mp4' }],
  ])('%s results in %j', (model, items, extension) => {
    expect(CATALOG[model].result).toEqual({ items, extension });
  });

  it('voice-cover with output_format wav downloads a .wav', () => {
    const entry = CATALOG['voice-cover'];
    expect(entry.resultFor?.({ ...BASE['voice-cover'], output_format: 'wav' }).extension.audio).toBe('wav');
    expect(entry.resultFor?.(BASE['voice-cover']).extension.audio).toBe('mp3');
  });

  it('names the media whose length must be probed', () => {
    const probed = (m: ModelId) => CATALOG[m].mediaFields.filter((f) => f.needsDuration).map((f) => f.field);
    expect(probed('ai-talking-avatar-video')).toEqual(['video_url', 'audio_url']);
    expect(probed('ai_dance_move')).toEqual(['video_url']);
    expect(probed('voice-cover')).toEqual(['audio_url', 'reference_audio_url']);
    expect(probed('video-face-swap')).toEqual(['reference_video']);
    expect(CATALOG['ai-talking-avatar-video'].mediaFields.map((f) => f.maxBytes)).toEqual([300e6, 50e6]);
    expect(probed('flat-image')).toEqual([]);
  });

  it('lists aliases among the known fields', () => {
    expect(CATALOG['stream-2-0-fast'].knownFields).toEqual(
      expect.arrayContaining(['image_urls', 'image_url', 'image_end_url', 'quality', 'resolution', 'ratio']),
    );
  });
});
