// stream-2-0-fast: video from text or from 1-2 frames; `quality` is the canonical resolution field.
import { CALLBACK_SET_BY_MANIFEST, defineEntry } from './define.js';
import { STREAM_CALLBACK_ALIAS, STREAM_FRAMES } from './field-names.js';
import { bool, httpUrl, int, list, oneOf, scalar, str } from './fields.js';
import { exact, range, tokens } from './pricing.js';
import { VIDEO_RESULT } from './results.js';
import { ENDPOINTS, type RequestBody, type RequestIssue } from './types.js';

const MIN_S = 4;
const MAX_S = 15;
const quality = oneOf(['480p', '720p']);
const aspectRatio = oneOf(['16:9', '9:16', '1:1', '4:3', '3:4', '21:9', 'adaptive']);
const FRAME_ALIASES = ['image_url', 'image_end_url'] as const;

/** Folds `image_url` (first) and `image_end_url` (last) into the frame list. */
function foldFrames(input: RequestBody, issues: RequestIssue[]): RequestBody {
  const given = FRAME_ALIASES.filter((k) => Object.hasOwn(input, k));
  if (given.length === 0) return input;
  const out = { ...input };
  for (const k of FRAME_ALIASES) delete out[k];
  if (Object.hasOwn(input, STREAM_FRAMES)) {
    for (const k of given)
      issues.push({ path: k, message: `alias of ${STREAM_FRAMES}; give only one of them` });
    return out;
  }
  if (!given.includes('image_url')) {
    issues.push({
      path: 'image_end_url',
      message: 'requires image_url (the first frame); add it or remove image_end_url',
    });
    return out;
  }
  const frameIssues = given.flatMap((k) => httpUrl(input[k], k));
  if (frameIssues.length > 0) issues.push(...frameIssues);
  else out[STREAM_FRAMES] = given.map((k) => input[k]);
  return out;
}

export const stream = defineEntry({
  model: 'stream-2-0-fast',
  endpoint: ENDPOINTS.videos,
  wireModel: 'stream-2-0-fast',
  kind: 'video',
  fields: {
    prompt: str({ min: 1 }),
    [STREAM_FRAMES]: list(httpUrl, 1, 2, 'frame URLs'),
    duration: int(MIN_S, MAX_S),
    quality,
    aspect_ratio: aspectRatio,
    generate_audio: bool,
    // Exists and does not affect price; its type and values are not shown, so any scalar passes.
    content_filter: scalar,
  },
  aliases: {
    resolution: { to: 'quality', check: quality },
    ratio: { to: 'aspect_ratio', check: aspectRatio },
  },
  folded: FRAME_ALIASES,
  refused: { [STREAM_CALLBACK_ALIAS]: CALLBACK_SET_BY_MANIFEST },
  normalise: foldFrames,
  rules(_valid, issues, body) {
    const frameTrouble = issues.some((i) => (FRAME_ALIASES as readonly string[]).includes(i.path));
    // A video needs something to start from: a prompt or a first frame.
    if (!frameTrouble && !Object.hasOwn(body, 'prompt') && !Object.hasOwn(body, STREAM_FRAMES)) {
      issues.push({ path: 'prompt', message: `is required unless ${STREAM_FRAMES} (or image_url) is given` });
    }
  },
  result: VIDEO_RESULT,
  estimate(body, _media, prices) {
    const p = prices['stream-2-0-fast'];
    const d = typeof body.duration === 'number' ? body.duration : undefined;
    const q = typeof body.quality === 'string' ? body.quality : undefined;
    const low = q === '720p' ? p.perSecond720p : p.perSecond480p;
    const high = q === '480p' ? p.perSecond480p : p.perSecond720p;
    // Audio is on at no charge unless turned off, which adds 10%.
    const noAudio = body.generate_audio === false;
    const m = noAudio ? p.noAudioMultiplier : 1;
    const seconds = d === undefined ? `${MIN_S}-${MAX_S} s` : `${d} s`;
    const per = q === undefined ? `${low}-${tokens(high)} (480p or 720p)` : `${tokens(low)} (${q})`;
    const unset = [d === undefined ? 'duration' : '', q === undefined ? 'quality' : '']
      .filter(Boolean)
      .join(' and ');
    const basis =
      `${seconds} × ${per}` +
      (noAudio ? ` × ${m} (generate_audio false)` : '') +
      (unset
        ? `; ${unset} ${unset.includes(' and ') ? 'defaults' : 'default'} not shown: set ${unset} to price exactly`
        : '');
    if (unset === '') return exact((d ?? MAX_S) * low * m, basis);
    return range((d ?? MIN_S) * low * m, (d ?? MAX_S) * high * m, basis);
  },
});
