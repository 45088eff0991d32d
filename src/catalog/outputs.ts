// What a model's result holds, for chains: whether a task of this model can give what a
// downstream `{{after…}}` reference asks for, and how long its video or audio will be when the request
// alone decides it (a studio-2-6 clip of `duration: 5` is 5 s long), so a downstream is priced exactly.

import { CHARACTER_RESULT, SONGS_RESULT } from './results.js';
import type { CatalogEntry, MediaDurations, RequestBody } from './types.js';

/** The part of an upstream's result a reference names. */
export type Output =
  | { kind: 'image' | 'video' | 'audio' }
  /** The n-th result file (from 1), whatever its kind. */
  | { kind: 'file'; n: number }
  | { kind: 'img_uuid' }
  /** A field of the n-th song (from 1) of a song task. */
  | { kind: 'song'; n: number; field: SongField }
  /** A field of an oc-maker character sheet. */
  | { kind: 'sheet'; key: string };

export const SONG_FIELDS = ['audio_id', 'title', 'style', 'lyrics', 'audio_duration'] as const;
export type SongField = (typeof SONG_FIELDS)[number];

function describeMakes(entry: CatalogEntry): string {
  if (entry.result === SONGS_RESULT) return 'makes 2 songs (audio)';
  if (entry.result === CHARACTER_RESULT) return 'makes a character sheet and an image';
  const files = entry.result.items.filter((kind) => kind !== 'json');
  const kinds = [...new Set(files)].join(' and ');
  return `makes ${files.length === 1 ? `one ${kinds}` : `${files.length} files (${kinds})`}`;
}

/**
 * Why a task of `entry` cannot give `output`, as the end of a sentence ("a speech-v3 task, which makes
 * one audio, not a video"); undefined when it can.
 */
export function outputProblem(entry: CatalogEntry, output: Output): string | undefined {
  const files = entry.result.items.filter((kind) => kind !== 'json');
  const makes = `a ${entry.model} task, which ${describeMakes(entry)}`;
  switch (output.kind) {
    case 'image':
    case 'video':
    case 'audio':
      return files.includes(output.kind)
        ? undefined
        : `${makes}, not ${output.kind === 'image' ? 'an' : 'a'} ${output.kind}`;
    case 'file':
      return output.n <= files.length
        ? undefined
        : `${makes}: there is no file ${output.n} (files.1${files.length > 1 ? ` to files.${files.length}` : ''})`;
    case 'img_uuid':
      return undefined;
    case 'song':
      if (entry.result !== SONGS_RESULT) return `${makes}, not songs`;
      return output.n <= files.length
        ? undefined
        : `${makes}: there is no song ${output.n} (songs.1 or songs.2)`;
    case 'sheet':
      return entry.result === CHARACTER_RESULT
        ? undefined
        : `${makes}, not a character sheet (oc-maker does)`;
  }
}

/**
 * Seconds of the video or audio a task of `entry` makes, when its request (and its measured inputs)
 * decide it; undefined when only the service knows (speech from text, songs, a clip of default length).
 */
export function outputSeconds(
  entry: CatalogEntry,
  body: RequestBody,
  media: MediaDurations,
): number | undefined {
  const duration = typeof body.duration === 'number' ? body.duration : undefined;
  switch (entry.model) {
    case 'studio-2-6':
    case 'stream-2-0-fast':
      return duration;
    case 'ai_dance_move':
      return duration ?? media.video_url;
    case 'ai-talking-avatar-video': {
      if (duration !== undefined) return duration;
      const { audio_url: audio, video_url: video } = media;
      if (body.video_mode === 'loop') return audio;
      return audio === undefined || video === undefined ? undefined : Math.min(audio, video);
    }
    case 'voice-cover':
      return media.audio_url;
    case 'video-face-swap': {
      const video = media.reference_video;
      if (video === undefined) return undefined;
      const start = typeof body.start_time === 'number' ? body.start_time : 0;
      const end = typeof body.end_time === 'number' ? Math.min(body.end_time, video) : video;
      return Math.max(0, end - start);
    }
    default:
      return undefined;
  }
}
