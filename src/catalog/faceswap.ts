// video-face-swap: POST /api/v1/videofaceswap/generate, which has no `model` field on the wire.
// Its list price is our assumption (notes.md): 1 token per converted second, rounded up, x1.5 for
// upscaler 2, x1.5 for enhance_face; estimates say so with `assumedPrice`.
import { defineEntry } from './define.js';
import { bool, httpUrl, num, oneOf } from './fields.js';
import { DEFAULT_PRICES } from './prices.js';
import { billedSeconds, range, roundTokens, tokens, usableHint } from './pricing.js';
import { MB, VIDEO_RESULT } from './results.js';
import { ENDPOINTS, type MediaDurations, type RequestBody } from './types.js';

const WINDOW_MAX = 120;

/** The converted window in seconds, or why it is unknown. */
function windowOf(body: RequestBody, media: MediaDurations, hint: number | undefined) {
  const start = typeof body.start_time === 'number' ? body.start_time : undefined;
  const end = typeof body.end_time === 'number' ? body.end_time : undefined;
  const video = media.reference_video;
  const length = video ?? hint;
  const source = video !== undefined ? 'measured' : 'media_seconds';
  if (end !== undefined)
    return { seconds: end - (start ?? 0), text: `end_time ${end} - start_time ${start ?? 0}` };
  if (length !== undefined) {
    const whole = `${roundTokens(length)} s video (${source})`;
    return start === undefined
      ? { seconds: length, text: `whole ${whole}` }
      : { seconds: Math.max(0, length - start), text: `${whole} - start_time ${start}` };
  }
  return { seconds: undefined, max: WINDOW_MAX - (start ?? 0) };
}

export const faceSwap = defineEntry({
  model: 'video-face-swap',
  endpoint: ENDPOINTS.faceSwap,
  wireModel: null,
  kind: 'video',
  fields: {
    reference_video: httpUrl,
    reference_img: httpUrl,
    upscaler: oneOf([1, 2]),
    start_time: num(0, WINDOW_MAX),
    end_time: num(0, WINDOW_MAX),
    enhance_face: bool,
  },
  // Not marked required in the spec, but a swap needs a target video and a face.
  required: ['reference_video', 'reference_img'],
  rules(valid, issues) {
    const { start_time: start, end_time: end } = valid;
    if (typeof start === 'number' && typeof end === 'number' && end <= start) {
      issues.push({ path: 'end_time', message: `must be greater than start_time (${start}), got ${end}` });
    }
  },
  mediaFields: [
    { field: 'reference_video', kind: 'video', maxBytes: 200 * MB, needsDuration: true },
    { field: 'reference_img', kind: 'image', maxBytes: 10 * MB, needsDuration: false },
  ],
  result: VIDEO_RESULT,
  checkMedia(body, media) {
    // Not a spec rule, but a window starting after the video ends converts nothing a user wants.
    const video = media.reference_video;
    if (video === undefined || typeof body.start_time !== 'number' || body.start_time < roundTokens(video))
      return [];
    return [
      {
        path: 'start_time',
        message: `must be before the end of reference_video (measured ${roundTokens(video)} s), got ${body.start_time}`,
      },
    ];
  },
  estimate(body, media, prices, hintSeconds) {
    const p = prices['video-face-swap'];
    const win = windowOf(body, media, usableHint(hintSeconds));
    const enhance = body.enhance_face === true ? p.enhanceFaceMultiplier : 1;
    // The upscaler's default is not shown: without it, price both 720p and 1080p.
    const upLow = body.upscaler === 2 ? p.upscalerMultiplier : 1;
    const upHigh = body.upscaler === 1 ? 1 : p.upscalerMultiplier;
    const parts: string[] = [];
    if (body.upscaler === 2) parts.push(`× ${p.upscalerMultiplier} (upscaler 2)`);
    if (body.upscaler === undefined) parts.push(`× 1-${p.upscalerMultiplier} (upscaler 1 or 2)`);
    if (enhance !== 1) parts.push(`× ${enhance} (enhance_face)`);
    const notes: string[] = [];
    if (win.seconds === undefined) {
      notes.push(
        'video length not measured and no media_seconds given: priced up to the 120 s window maximum',
      );
    }
    if (body.upscaler === undefined) notes.push('upscaler default not shown: set upscaler to price exactly');
    // Our figure until the user sets their own under `prices:` (the multipliers follow the base price).
    const assumed = p.perSecond === DEFAULT_PRICES['video-face-swap'].perSecond;
    notes.push(assumed ? 'assumed list price (not in the spec)' : 'list price from your configuration');
    const billed = win.seconds === undefined ? undefined : billedSeconds(win.seconds);
    const up = billed !== undefined && win.seconds !== undefined && billed !== roundTokens(win.seconds);
    const seconds =
      billed === undefined ? `0-${win.max} s` : `${billed} s (${win.text}${up ? ', rounded up' : ''})`;
    const basis = [[`${seconds} × ${tokens(p.perSecond)}`, ...parts].join(' '), ...notes].join('; ');
    const lowS = billed ?? 0;
    const highS = billed ?? win.max ?? WINDOW_MAX;
    return range(
      lowS * p.perSecond * upLow * enhance,
      highS * p.perSecond * upHigh * enhance,
      basis,
      assumed,
    );
  },
});
