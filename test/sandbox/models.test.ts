// Every model accepted at its list price, and every kind of rejection refused before any charge.
import { afterEach, describe, expect, it } from 'vitest';
import { closeAll, type MediaServer, openSandbox, PATHS, serveFixtures } from './helpers.js';

afterEach(closeAll);

type Body = (media: MediaServer) => Record<string, unknown>;

const accepted: Array<[string, string, Body, number]> = [
  ['flat-image', PATHS.images, () => ({ model: 'flat-image', prompt: 'a mug', ratio: '1:1' }), 0.2],
  ['anime-waifu', PATHS.images, () => ({ model: 'anime-waifu', prompt: 'a cat girl', seed: 7 }), 0.2],
  ['pixel-lite', PATHS.images, () => ({ model: 'pixel-lite', prompt: 'a castle' }), 2],
  [
    'oc-maker',
    PATHS.images,
    () => ({ model: 'oc-maker', prompt: 'Return JSON with oc_prompt', image_render_model: 'render-a' }),
    2,
  ],
  [
    'speech-v3, 201 characters = 2 units',
    PATHS.audio,
    () => ({ model: 'speech-v3', text: 'a'.repeat(201) }),
    4,
  ],
  [
    'song-replace-section (song measured 30.07 s, 12 s section)',
    PATHS.audio,
    (m) => ({
      model: 'song-replace-section',
      audio_url: m.url('song-30s.mp3'),
      infill_start_s: 0,
      infill_end_s: 12,
      lyrics: '[Verse] new',
      full_lyrics: '[Verse] new\n[Chorus] old',
      style: 'pop',
      title: 'Song',
    }),
    1.63,
  ],
  [
    'voice-cover (song measured 90.23 s, billed 91 s)',
    PATHS.audio,
    (m) => ({
      model: 'voice-cover',
      audio_url: m.url('tone-90.2s.mp3'),
      reference_audio_url: m.url('voice-4s.wav'),
    }),
    1.82,
  ],
  [
    'flow22_spicy 720p',
    PATHS.videos,
    () => ({ model: 'flow22_spicy', prompt: 'a wave', resolution: '720p' }),
    10,
  ],
  [
    'studio-2-6 1080p 5 s',
    PATHS.videos,
    () => ({ model: 'studio-2-6', prompt: 'a wave', duration: 5, resolution: '1080p' }),
    17.5,
  ],
  [
    'studio-2-6 native audio + voice, 10 s',
    PATHS.videos,
    (m) => ({
      model: 'studio-2-6',
      prompt: '@1 says hello',
      image_url: m.url('person.png'),
      voice_id: 'voice-1',
      generate_audio: true,
      duration: 10,
      quality: '1080p',
    }),
    84,
  ],
  [
    'stream-2-0-fast 480p 4 s without audio (+10%)',
    PATHS.videos,
    () => ({
      model: 'stream-2-0-fast',
      prompt: 'a wave',
      duration: 4,
      quality: '480p',
      generate_audio: false,
    }),
    21.164,
  ],
  [
    'ai_dance_move 480p, video measured 12 s',
    PATHS.videos,
    (m) => ({
      model: 'ai_dance_move',
      image_url: m.url('person.png'),
      video_url: m.url('video-12s.mp4'),
      resolution: '480p',
    }),
    24,
  ],
  [
    'ai-talking-avatar-video 720p, normal: shorter of 12 s video and 8.1 s audio, billed 9 s',
    PATHS.videos,
    (m) => ({
      model: 'ai-talking-avatar-video',
      video_url: m.url('video-12s.mp4'),
      audio_url: m.url('speech-8s.mp3'),
      resolution: '720p',
    }),
    13.5,
  ],
  [
    'face swap 1080p, 10 s window',
    PATHS.faceSwap,
    (m) => ({
      reference_video: m.url('video-12s.mp4'),
      reference_img: m.url('face.png'),
      start_time: 0,
      end_time: 10,
      upscaler: 2,
    }),
    15,
  ],
  [
    'face swap 720p, whole video measured 12 s',
    PATHS.faceSwap,
    (m) => ({ reference_video: m.url('video-12s.mp4'), reference_img: m.url('face.png'), upscaler: 1 }),
    12,
  ],
];

describe('accepted submissions', () => {
  it.each(accepted)('%s', async (_name, path, body, cost) => {
    const media = await serveFixtures();
    const { sandbox, api } = await openSandbox({ balance: 100 });
    const answer = await api.submit(path, body(media));
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ code: 0, msg: 'Success', data: { cost } });
    expect(answer.body.data.img_uuid).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    const state = sandbox.state();
    expect(state.balance).toBeCloseTo(100 - cost, 6);
    expect(state.jobs).toHaveLength(1);
    expect(state.jobs[0]).toMatchObject({
      img_uuid: answer.body.data.img_uuid,
      cost,
      list_price: cost,
      refunded: 0,
    });
  });
});

const rejected: Array<[string, string, Body, RegExp]> = [
  ['no model', PATHS.images, () => ({ prompt: 'x' }), /^model: is required/],
  [
    'model of another endpoint',
    PATHS.images,
    () => ({ model: 'speech-v3', text: 'x' }),
    /^model: must be one of/,
  ],
  ['model on the face swap endpoint', PATHS.faceSwap, () => ({ model: 'x' }), /model: not accepted/],
  ['empty prompt', PATHS.images, () => ({ model: 'flat-image', prompt: '' }), /^prompt: /],
  [
    'unknown field',
    PATHS.images,
    () => ({ model: 'flat-image', prompt: 'x', size: 3 }),
    /^size: unknown field/,
  ],
  [
    'studio-2-6 duration 7',
    PATHS.videos,
    () => ({ model: 'studio-2-6', prompt: 'x', duration: 7, resolution: '720p' }),
    /duration: .*7/,
  ],
  [
    'studio-2-6 native audio at 720p',
    PATHS.videos,
    () => ({ model: 'studio-2-6', prompt: 'x', duration: 5, resolution: '720p', generate_audio: true }),
    /generate_audio|resolution/,
  ],
  [
    'studio-2-6 voices without native audio',
    PATHS.videos,
    (m) => ({
      model: 'studio-2-6',
      prompt: 'x',
      image_url: m.url('person.png'),
      voice_ids: ['a'],
      resolution: '1080p',
    }),
    /voice_ids/,
  ],
  [
    'stream-2-0-fast duration 3',
    PATHS.videos,
    () => ({ model: 'stream-2-0-fast', prompt: 'x', duration: 3 }),
    /duration/,
  ],
  ['speech-v3 speed 2', PATHS.audio, () => ({ model: 'speech-v3', text: 'hi', speed: 2 }), /speed/],
  [
    'avatar: 65 s video with 90 s audio makes a 65 s output',
    PATHS.videos,
    (m) => ({
      model: 'ai-talking-avatar-video',
      video_url: m.url('video-65s.mp4'),
      audio_url: m.url('tone-90.2s.mp3'),
    }),
    /65/,
  ],
  [
    'face swap: a 12 MB reference image (the limit is 10 MB)',
    PATHS.faceSwap,
    (m) => ({
      reference_video: m.url('video-12s.mp4'),
      reference_img: m.url('big-12000000.png'),
      start_time: 0,
      end_time: 5,
    }),
    /^reference_img: the file is 12 MB; the limit is 10 MB/,
  ],
  [
    'dance: 35 s reference video',
    PATHS.videos,
    (m) => ({
      model: 'ai_dance_move',
      image_url: m.url('person.png'),
      video_url: m.url('video-35s.mp4'),
      resolution: '480p',
    }),
    /^video_url: reference video must be at most 30 s, measured 35 s/,
  ],
  [
    'dance: duration longer than the 12 s video',
    PATHS.videos,
    (m) => ({
      model: 'ai_dance_move',
      image_url: m.url('person.png'),
      video_url: m.url('video-12s.mp4'),
      duration: 20,
      resolution: '480p',
    }),
    /^duration: must not exceed .*12 s, got 20/,
  ],
  [
    'voice-cover: 2 s reference voice',
    PATHS.audio,
    (m) => ({
      model: 'voice-cover',
      audio_url: m.url('song-30s.mp3'),
      reference_audio_url: m.url('voice-2s.wav'),
    }),
    /^reference_audio_url: must be at least 3 s/,
  ],
  [
    'song-replace-section: section over half of a 30 s song',
    PATHS.audio,
    (m) => ({
      model: 'song-replace-section',
      audio_url: m.url('song-30s.mp3'),
      infill_start_s: 0,
      infill_end_s: 16,
      lyrics: 'l',
      full_lyrics: 'l',
      style: 's',
      title: 't',
    }),
    /infill_end_s: section must be at most 50%/,
  ],
  [
    'song-replace-section: task_id unknown to the sandbox',
    PATHS.audio,
    () => ({
      model: 'song-replace-section',
      task_id: 'nope',
      audio_id: 'nope',
      infill_start_s: 0,
      infill_end_s: 12,
      lyrics: 'l',
      full_lyrics: 'l',
      style: 's',
      title: 't',
    }),
    /^task_id: no successful song task "nope"/,
  ],
  [
    'media that cannot be fetched',
    PATHS.videos,
    (m) => ({
      model: 'ai_dance_move',
      image_url: m.url('person.png'),
      video_url: m.url('missing.mp4'),
      resolution: '480p',
    }),
    /^video_url: could not measure the video's duration/,
  ],
  [
    'callback URL that is not http(s)',
    PATHS.images,
    () => ({ model: 'flat-image', prompt: 'x', custom_callback_url: 'ftp://example.org/hook' }),
    /^custom_callback_url: must be an http\(s\) URL/,
  ],
  ['an empty object', PATHS.images, () => ({}), /^model: is required/],
];

describe('rejected submissions: HTTP 400, code 400, nothing deducted', () => {
  it.each(rejected)('%s', async (_name, path, body, message) => {
    const media = await serveFixtures();
    const { sandbox, api } = await openSandbox({ balance: 100 });
    const answer = await api.submit(path, body(media));
    expect(answer.status).toBe(400);
    expect(answer.body.code).toBe(400);
    expect(answer.body.msg).toMatch(message);
    expect(answer.body).not.toHaveProperty('data');
    expect(sandbox.state()).toMatchObject({ balance: 100, jobs: [], quota: { used: 0 } });
  });

  it('names every broken rule at once', async () => {
    const { api } = await openSandbox();
    const answer = await api.submit(PATHS.videos, {
      model: 'studio-2-6',
      prompt: 'x'.repeat(2501),
      duration: 7,
    });
    expect(answer.body.msg).toMatch(/prompt: .*; duration: /);
  });

  it.each([
    ['invalid JSON', '{"model":', 400],
    ['a JSON array', '[1,2]', 400],
  ])('refuses %s with the envelope', async (_name, raw, status) => {
    const { sandbox, api } = await openSandbox();
    const answer = await api.post(PATHS.images, raw);
    expect(answer.status).toBe(status);
    expect(answer.body).toMatchObject({ code: status, msg: expect.stringMatching(/\S/) });
    expect(sandbox.state().balance).toBe(1000);
  });

  it('refuses a body over the size limit with 413', async () => {
    const { sandbox, api } = await openSandbox({ bodyLimit: 1000 });
    const answer = await api.post(PATHS.images, { model: 'flat-image', prompt: 'x'.repeat(2000) });
    expect(answer.status).toBe(413);
    expect(answer.body.code).toBe(413);
    expect(sandbox.state().jobs).toEqual([]);
  });
});
