// voice-cover: the lead vocal of a song sung by a reference voice; billed per measured second, rounded up.
import { defineEntry } from './define.js';
import { httpUrl, int, oneOf } from './fields.js';
import { exact, fromLength, range, roundTokens, tokens, usableHint } from './pricing.js';
import { MB, MP3_RESULT, WAV_RESULT } from './results.js';
import { ENDPOINTS, type RequestIssue } from './types.js';

const MIN_S = 5;
const MAX_S = 360;
const MIN_REFERENCE_S = 3;

export const voiceCover = defineEntry({
  model: 'voice-cover',
  endpoint: ENDPOINTS.audio,
  wireModel: 'voice-cover',
  kind: 'audio',
  fields: {
    // The spec asks for public https URLs; http is accepted too so a loopback sandbox can serve the media.
    audio_url: httpUrl,
    reference_audio_url: httpUrl,
    pitch_shift: int(-12, 12),
    output_format: oneOf(['mp3', 'wav']),
  },
  // Not marked required in the spec, but there is no cover without a song and a voice.
  required: ['audio_url', 'reference_audio_url'],
  mediaFields: [
    { field: 'audio_url', kind: 'audio', maxBytes: 20 * MB, needsDuration: true },
    { field: 'reference_audio_url', kind: 'audio', maxBytes: 20 * MB, needsDuration: true },
  ],
  result: MP3_RESULT,
  resultFor: (body) => (body.output_format === 'wav' ? WAV_RESULT : MP3_RESULT),
  checkMedia(_body, media) {
    const issues: RequestIssue[] = [];
    const song = media.audio_url;
    if (song !== undefined && (roundTokens(song) < MIN_S || roundTokens(song) > MAX_S)) {
      issues.push({
        path: 'audio_url',
        message: `must be ${MIN_S} to ${MAX_S} s long, measured ${roundTokens(song)} s`,
      });
    }
    const voice = media.reference_audio_url;
    if (voice !== undefined && roundTokens(voice) < MIN_REFERENCE_S) {
      issues.push({
        path: 'reference_audio_url',
        message: `must be at least ${MIN_REFERENCE_S} s of one clear voice, measured ${roundTokens(voice)} s`,
      });
    }
    return issues;
  },
  estimate(_body, media, prices, hintSeconds) {
    const rate = prices['voice-cover'].perSecond;
    const hint = usableHint(hintSeconds);
    const billed =
      media.audio_url !== undefined
        ? fromLength(media.audio_url, 'measured')
        : hint !== undefined
          ? fromLength(hint, 'media_seconds')
          : undefined;
    if (billed !== undefined) return exact(billed.seconds * rate, `${billed.text} × ${tokens(rate)}`);
    return range(
      MIN_S * rate,
      MAX_S * rate,
      `${MIN_S}-${MAX_S} s × ${tokens(rate)}; song length not measured and no media_seconds given: priced up to the ${MAX_S} s maximum`,
    );
  },
});
