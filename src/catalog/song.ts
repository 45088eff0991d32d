// song-replace-section: rewrites one section of a song; each request returns 2 versions.
import { defineEntry } from './define.js';
import { SONG } from './field-names.js';
import { bool, httpUrl, int, num, oneOf, str } from './fields.js';
import { exact, roundTokens, tokens } from './pricing.js';
import { NO_SIZE_LIMIT, SONGS_RESULT } from './results.js';
import { ENDPOINTS, type RequestBody, type RequestIssue } from './types.js';

const MIN_SECTION_S = 10;
const GENDERS: Readonly<Record<string, string>> = { m: 'male', f: 'female' };

const has = (body: RequestBody, key: string) => Object.hasOwn(body, key);

function rules(valid: RequestBody, issues: RequestIssue[], body: RequestBody): void {
  const pair = has(body, 'task_id') || has(body, 'audio_id');
  const url = has(body, 'audio_url');
  if (pair && url) {
    issues.push({ path: 'audio_url', message: 'give either task_id + audio_id or audio_url, not both' });
  } else if (!pair && !url) {
    issues.push({ path: '', message: 'needs a source: task_id + audio_id (an earlier song) or audio_url' });
  } else if (pair && !has(body, 'audio_id')) {
    issues.push({ path: 'audio_id', message: 'is required with task_id (the song in that task’s result)' });
  } else if (pair && !has(body, 'task_id')) {
    issues.push({ path: 'task_id', message: 'is required with audio_id (the task that made the song)' });
  }
  const start = valid.infill_start_s;
  const end = valid.infill_end_s;
  if (typeof start === 'number' && typeof end === 'number' && roundTokens(end - start) < MIN_SECTION_S) {
    issues.push({
      path: 'infill_end_s',
      message: `section (infill_end_s - infill_start_s) must be at least ${MIN_SECTION_S} s, got ${roundTokens(end - start)}`,
    });
  }
  if (has(body, SONG.audioAdherence) && valid.instrumental === true) {
    issues.push({
      path: SONG.audioAdherence,
      message: `unavailable when instrumental is true; remove ${SONG.audioAdherence}`,
    });
  }
}

export const songReplaceSection = defineEntry({
  model: 'song-replace-section',
  endpoint: ENDPOINTS.audio,
  wireModel: 'song-replace-section',
  kind: 'audio',
  fields: {
    task_id: str({ min: 1 }),
    audio_id: str({ min: 1 }),
    audio_url: httpUrl,
    infill_start_s: num(0, undefined, 2),
    infill_end_s: num(0, undefined, 2),
    lyrics: str({ min: 1, max: 5000 }),
    full_lyrics: str({ min: 1, max: 5000 }),
    style: str({ min: 1, max: 1000 }),
    title: str({ min: 1, max: 80 }),
    [SONG.avoidStyles]: str({ max: 200 }),
    [SONG.singerGender]: oneOf(['male', 'female']),
    // The service rounds these to 2 decimals itself, so finer values are accepted.
    [SONG.styleStrictness]: num(0, 1),
    [SONG.experimental]: num(0, 1),
    [SONG.audioAdherence]: num(0, 1),
    [SONG.versionDifference]: int(0, 4),
    instrumental: bool,
  },
  refused: {
    variant: `not accepted by song-replace-section (each request returns 2 versions); use ${SONG.versionDifference} (0-4) for how much they differ`,
  },
  normalise(input) {
    const gender = input[SONG.singerGender];
    const full = typeof gender === 'string' ? GENDERS[gender] : undefined;
    return full === undefined ? input : { ...input, [SONG.singerGender]: full };
  },
  required: ['infill_start_s', 'infill_end_s', 'lyrics', 'full_lyrics', 'style', 'title'],
  rules,
  // With task_id + audio_id, the caller may pass the earlier song's `audio_duration` as media.audio_id.
  mediaFields: [{ field: 'audio_url', kind: 'audio', maxBytes: NO_SIZE_LIMIT, needsDuration: true }],
  result: SONGS_RESULT,
  checkMedia(body, media) {
    const length = media.audio_url ?? media.audio_id;
    const start = body.infill_start_s;
    const end = body.infill_end_s;
    if (length === undefined || typeof start !== 'number' || typeof end !== 'number') return [];
    const song = roundTokens(length);
    const issues: RequestIssue[] = [];
    if (end > song)
      issues.push({ path: 'infill_end_s', message: `must be within the song (${song} s), got ${end}` });
    const section = roundTokens(end - start);
    if (section > song / 2) {
      issues.push({
        path: 'infill_end_s',
        message: `section must be at most 50% of the song (${roundTokens(song / 2)} s of ${song} s), got ${section} s`,
      });
    }
    return issues;
  },
  estimate(_body, _media, prices) {
    const price = prices['song-replace-section'].perRequest;
    return exact(price, `1 request × ${tokens(price)} (2 versions)`);
  },
});
