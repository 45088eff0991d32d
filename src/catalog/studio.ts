// studio-2-6: text-to-video or image-to-video, with optional native audio and designated voices.
import { defineEntry } from './define.js';
import { bool, httpUrl, list, oneOf, str } from './fields.js';
import { exact, range, tokens } from './pricing.js';
import { VIDEO_RESULT } from './results.js';
import { ENDPOINTS, type PriceTable, type RequestBody, type RequestIssue } from './types.js';

const RESOLUTIONS = ['720p', '1080p'] as const;
const DURATIONS = [5, 10] as const;
const resolution = oneOf(RESOLUTIONS);
const aspectRatio = oneOf(['16:9', '9:16', '1:1']);

const has = (body: RequestBody, key: string) => Object.hasOwn(body, key);

function rules(valid: RequestBody, issues: RequestIssue[], body: RequestBody): void {
  // A video needs something to start from: a prompt or a first frame.
  if (!has(body, 'prompt') && !has(body, 'image_url')) {
    issues.push({ path: 'prompt', message: 'is required unless image_url (a first frame) is given' });
  }
  if (has(body, 'image_end_url') && !has(body, 'image_url')) {
    issues.push({
      path: 'image_end_url',
      message: 'requires image_url (the first frame); add it or remove image_end_url',
    });
  }
  if (has(body, 'voice_ids') && !has(body, 'image_url')) {
    issues.push({
      path: 'voice_ids',
      message: 'requires image_url (voices are for image-to-video); add it or remove voice_ids',
    });
  }
  if (has(body, 'aspect_ratio') && has(body, 'image_url')) {
    issues.push({
      path: 'aspect_ratio',
      message:
        'applies to text-to-video only; with image_url the image decides the ratio, remove aspect_ratio',
    });
  }
  const audio = valid.generate_audio === true;
  // Impossible combination 1.
  if (has(body, 'voice_ids') && valid.generate_audio !== true) {
    issues.push({ path: 'voice_ids', message: 'require generate_audio: true (and resolution 1080p)' });
  }
  if (audio && has(body, 'image_end_url')) {
    // Rules 2 and 3 exclude each other: a first+last frame pair forces 720p, native audio needs 1080p.
    issues.push({
      path: 'image_end_url',
      message: 'forces 720p, which has no native audio or voices; remove image_end_url or generate_audio',
    });
    return;
  }
  // Impossible combination 2. The default resolution is not documented, so native audio needs it written out.
  if (audio && valid.resolution !== '1080p') {
    const got = has(body, 'resolution') ? `, got ${String(body.resolution)}` : '; set resolution: 1080p';
    issues.push({ path: 'generate_audio', message: `native audio requires resolution 1080p${got}` });
  }
  // Impossible combination 3.
  if (has(body, 'image_end_url') && has(valid, 'resolution') && valid.resolution !== '720p') {
    issues.push({
      path: 'resolution',
      message: `must be 720p with a first and last frame (image_end_url), got ${String(valid.resolution)}`,
    });
  }
}

function rateOf(
  body: RequestBody,
  res: string,
  p: PriceTable['studio-2-6'],
): { rate: number; label: string } {
  if (body.generate_audio === true) {
    return Array.isArray(body.voice_ids) && body.voice_ids.length > 0
      ? { rate: p.perSecond1080pAudioVoice, label: '1080p, native audio + voice' }
      : { rate: p.perSecond1080pAudio, label: '1080p, native audio' };
  }
  return res === '1080p'
    ? { rate: p.perSecond1080p, label: '1080p' }
    : { rate: p.perSecond720p, label: '720p' };
}

export const studio = defineEntry({
  model: 'studio-2-6',
  endpoint: ENDPOINTS.videos,
  wireModel: 'studio-2-6',
  kind: 'video',
  fields: {
    prompt: str({ min: 1, max: 2500 }),
    image_url: httpUrl,
    image_end_url: httpUrl,
    voice_ids: list(str({ min: 1 }), 1, 2, 'voice ids'),
    duration: oneOf(DURATIONS),
    resolution,
    aspect_ratio: aspectRatio,
    generate_audio: bool,
  },
  aliases: {
    quality: { to: 'resolution', check: resolution },
    voice_id: { to: 'voice_ids', check: str({ min: 1 }), map: (v) => [v] },
    ratio: { to: 'aspect_ratio', check: aspectRatio },
  },
  rules,
  result: VIDEO_RESULT,
  estimate(body, _media, prices) {
    const p = prices['studio-2-6'];
    // A first+last frame pair forces 720p; native audio is 1080p only (checked).
    const res =
      typeof body.resolution === 'string'
        ? body.resolution
        : has(body, 'image_end_url')
          ? '720p'
          : body.generate_audio === true
            ? '1080p'
            : undefined;
    const durations: readonly number[] = typeof body.duration === 'number' ? [body.duration] : DURATIONS;
    // generate_audio absent is priced as no native audio: voices need it true, so absence cannot mean audio.
    const rates = (res === undefined ? RESOLUTIONS : [res]).map((r) => rateOf(body, r, p));
    const low = Math.min(...rates.map((r) => r.rate));
    const high = Math.max(...rates.map((r) => r.rate));
    const dMin = Math.min(...durations);
    const dMax = Math.max(...durations);
    const seconds = dMin === dMax ? `${dMin} s` : `${dMin}-${dMax} s`;
    const per = low === high ? tokens(low) : `${low}-${tokens(high)}`;
    const unset = [durations.length > 1 ? 'duration' : '', res === undefined ? 'resolution' : ''].filter(
      Boolean,
    );
    const labels = rates.map((r) => r.label).join(' or ');
    const basis = `${seconds} × ${per} (${labels})`;
    if (unset.length === 0) return exact(dMax * high, basis);
    const which = unset.join(' and ');
    return range(
      dMin * low,
      dMax * high,
      `${basis}; ${which} ${unset.length > 1 ? 'defaults' : 'default'} not shown: set ${which} to price exactly`,
    );
  },
});
