// Shared fixtures: one valid request per model, and a helper to vary it.
import type { ModelId, RequestBody } from '../../src/catalog/index.js';

export const V = 'https://media.example/clip.mp4';
export const A = 'https://media.example/song.mp3';
export const I = 'https://media.example/face.png';

export const BASE: Record<ModelId, RequestBody> = {
  'ai-talking-avatar-video': { video_url: V, audio_url: A },
  'studio-2-6': { prompt: 'A red fox in snow' },
  ai_dance_move: { image_url: I, video_url: V },
  flow22_spicy: { prompt: 'A red fox in snow' },
  'stream-2-0-fast': { prompt: 'A red fox in snow' },
  'video-face-swap': { reference_video: V, reference_img: I },
  'flat-image': { prompt: 'A mug' },
  'anime-waifu': { prompt: 'A girl' },
  'pixel-lite': { prompt: 'A castle' },
  'oc-maker': { prompt: 'Return a JSON object with an oc_prompt field', image_render_model: 'render-a' },
  'speech-v3': { text: 'Hello there' },
  'song-replace-section': {
    audio_url: A,
    infill_start_s: 30,
    infill_end_s: 45,
    lyrics: '[Verse] new words',
    full_lyrics: '[Verse] old\n[Verse] new words',
    style: 'pop',
    title: 'Spring',
  },
  'voice-cover': { audio_url: A, reference_audio_url: 'https://media.example/voice.wav' },
};

/** BASE[model] with `patch` applied; a patch value of `undefined` removes the field. */
export function vary(model: ModelId, patch: RequestBody = {}): RequestBody {
  const body: RequestBody = { ...BASE[model] };
  for (const [k, v] of Object.entries(patch)) {
    if (v === undefined) delete body[k];
    else body[k] = v;
  }
  return body;
}

export const chars = (n: number) => 'a'.repeat(n);
