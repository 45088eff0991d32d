// ai_dance_move: the person in an image follows the motion of a reference video.
import { defineEntry } from './define.js';
import { httpUrl, int, oneOf } from './fields.js';
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
import { NO_SIZE_LIMIT, VIDEO_RESULT } from './results.js';
import { ENDPOINTS, type RequestIssue } from './types.js';

const MAX_VIDEO_S = 30;
const RESOLUTIONS = ['480p', '720p'] as const;

export const dance = defineEntry({
  model: 'ai_dance_move',
  endpoint: ENDPOINTS.videos,
  wireModel: 'ai_dance_move',
  kind: 'video',
  fields: {
    image_url: httpUrl,
    video_url: httpUrl,
    duration: int(1, MAX_VIDEO_S),
    resolution: oneOf(RESOLUTIONS),
  },
  // Not marked required in the spec, but there is no dance without a person and a motion to follow.
  required: ['image_url', 'video_url'],
  mediaFields: [{ field: 'video_url', kind: 'video', maxBytes: NO_SIZE_LIMIT, needsDuration: true }],
  result: VIDEO_RESULT,
  checkMedia(body, media) {
    const video = media.video_url;
    if (video === undefined) return [];
    const s = roundTokens(video);
    const issues: RequestIssue[] = [];
    if (s > MAX_VIDEO_S) {
      issues.push({
        path: 'video_url',
        message: `reference video must be at most ${MAX_VIDEO_S} s, measured ${s} s; trim it`,
      });
    }
    // A duration above the real length is rejected by the service, not clamped.
    if (typeof body.duration === 'number' && body.duration > s) {
      issues.push({
        path: 'duration',
        message: `must not exceed the reference video's measured length ${s} s, got ${body.duration}`,
      });
    }
    return issues;
  },
  estimate(body, media, prices, hintSeconds) {
    const p = prices.ai_dance_move;
    const hint = usableHint(hintSeconds);
    let billed: Billed | undefined;
    if (typeof body.duration === 'number') billed = fromDuration(body.duration);
    else if (media.video_url !== undefined) billed = fromLength(media.video_url, 'measured');
    else if (hint !== undefined) billed = fromLength(hint, 'media_seconds');
    const res = typeof body.resolution === 'string' ? body.resolution : undefined;
    const low = res === '720p' ? p.perSecond720p : p.perSecond480p;
    const high = res === '480p' ? p.perSecond480p : p.perSecond720p;
    const per = res === undefined ? `${low}-${tokens(high)} (480p or 720p)` : `${tokens(low)} (${res})`;
    const notes: string[] = [];
    if (billed === undefined) {
      notes.push(
        `video length not measured and no media_seconds given: priced up to the ${MAX_VIDEO_S} s maximum`,
      );
    }
    if (res === undefined) notes.push('resolution default not shown: set resolution to price exactly');
    const seconds = billed?.text ?? `1-${MAX_VIDEO_S} s`;
    const basis = [`${seconds} × ${per}`, ...notes].join('; ');
    if (billed !== undefined && res !== undefined) return exact(billed.seconds * low, basis);
    return range((billed?.seconds ?? 1) * low, (billed?.seconds ?? MAX_VIDEO_S) * high, basis);
  },
});
