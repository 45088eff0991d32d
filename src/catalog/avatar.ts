// ai-talking-avatar-video: the person in a video speaks an audio track.
import { defineEntry } from './define.js';
import { httpUrl, int, oneOf, str } from './fields.js';
import {
  type Billed,
  exact,
  fromDuration,
  fromLength,
  range,
  roundTokens,
  tokens,
  usableHint,
} from './pricing.js';
import { MB, VIDEO_RESULT } from './results.js';
import { ENDPOINTS, type MediaDurations, type RequestBody, type RequestIssue } from './types.js';

const MIN_S = 3;
const MAX_S = 60;

/** The output length the service measures and bills: normal = shorter of video and audio; loop = audio. */
interface Output {
  seconds: number;
  field: 'video_url' | 'audio_url';
  how: string;
}

function outputLength(body: RequestBody, media: MediaDurations): Output | undefined {
  const audio = media.audio_url;
  const video = media.video_url;
  if (body.video_mode === 'loop') {
    return audio === undefined
      ? undefined
      : { seconds: audio, field: 'audio_url', how: 'loop mode: the audio length' };
  }
  if (audio === undefined || video === undefined) return undefined;
  const how = `the shorter of video ${roundTokens(video)} s and audio ${roundTokens(audio)} s`;
  return video <= audio
    ? { seconds: video, field: 'video_url', how }
    : { seconds: audio, field: 'audio_url', how };
}

function checkMedia(body: RequestBody, media: MediaDurations): RequestIssue[] {
  const duration = typeof body.duration === 'number' ? body.duration : undefined;
  // "When [duration is] set, the video and audio may be longer than 60 s": without it, neither may be.
  if (duration === undefined) {
    const long: RequestIssue[] = [];
    for (const field of ['video_url', 'audio_url'] as const) {
      const seconds = media[field];
      if (seconds !== undefined && roundTokens(seconds) > MAX_S) {
        long.push({
          path: field,
          message: `must be at most ${MAX_S} s without duration, measured ${roundTokens(seconds)} s; set duration (${MIN_S} to ${MAX_S}) to use only the first seconds`,
        });
      }
    }
    if (long.length > 0) return long;
  }
  const out = outputLength(body, media);
  // In normal mode one measured file already bounds the output from above.
  const bound: Output | undefined =
    out ??
    (body.video_mode === 'loop'
      ? undefined
      : media.video_url !== undefined
        ? {
            seconds: media.video_url,
            field: 'video_url',
            how: `the video is ${roundTokens(media.video_url)} s`,
          }
        : media.audio_url !== undefined
          ? {
              seconds: media.audio_url,
              field: 'audio_url',
              how: `the audio is ${roundTokens(media.audio_url)} s`,
            }
          : undefined);
  if (bound === undefined) return [];
  const s = roundTokens(bound.seconds);
  if (duration !== undefined) {
    return duration > s
      ? [
          {
            path: 'duration',
            message: `must not exceed the output length ${s} s (${bound.how}), got ${duration}`,
          },
        ]
      : [];
  }
  const tooShort = s < MIN_S;
  const tooLong = out !== undefined && s > MAX_S;
  if (!tooShort && !tooLong) return [];
  const advice = tooShort
    ? 'use longer media'
    : `set duration (${MIN_S} to ${MAX_S}) to use only the first seconds`;
  return [
    {
      path: bound.field,
      message: `output length must be ${MIN_S} to ${MAX_S} s, measured ${s} s (${bound.how}); ${advice}`,
    },
  ];
}

export const talkingAvatar = defineEntry({
  model: 'ai-talking-avatar-video',
  endpoint: ENDPOINTS.videos,
  wireModel: 'ai-talking-avatar-video',
  kind: 'video',
  fields: {
    video_url: httpUrl,
    audio_url: httpUrl,
    prompt: str({ min: 1 }),
    resolution: oneOf(['540p', '720p']),
    video_mode: oneOf(['normal', 'loop']),
    duration: int(MIN_S, MAX_S),
  },
  required: ['video_url', 'audio_url'],
  mediaFields: [
    { field: 'video_url', kind: 'video', maxBytes: 300 * MB, needsDuration: true },
    { field: 'audio_url', kind: 'audio', maxBytes: 50 * MB, needsDuration: true },
  ],
  result: VIDEO_RESULT,
  checkMedia,
  estimate(body, media, prices, hintSeconds) {
    const p = prices['ai-talking-avatar-video'];
    // 540p is the spec's default resolution.
    const res = body.resolution === '720p' ? '720p' : '540p';
    const rate = res === '720p' ? p.perSecond720p : p.perSecond540p;
    const out = outputLength(body, media);
    const hint = usableHint(hintSeconds);
    // The spec bills "per second of output" without saying how fractions count; like dance and voice
    // cover, we round measured lengths up to whole seconds so the estimate never undershoots.
    let billed: Billed | undefined;
    if (typeof body.duration === 'number') billed = fromDuration(body.duration);
    else if (out !== undefined) billed = fromLength(out.seconds, 'measured');
    else if (hint !== undefined) billed = fromLength(hint, 'media_seconds');
    const per = `${tokens(rate)} (${res})`;
    if (billed !== undefined) return exact(billed.seconds * rate, `${billed.text} × ${per}`);
    return range(
      MIN_S * rate,
      MAX_S * rate,
      `${MIN_S}-${MAX_S} s × ${per}; output length not measured and no media_seconds given: priced up to the ${MAX_S} s maximum, or set duration`,
    );
  },
});
