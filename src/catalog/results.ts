// Result shapes. The spec's item types name only image, audio and json; a video job's item is typed `video`
// here (its `value` is an mp4 link), so downloads and reports can tell it from an image.
// Extensions carry no leading dot: files are named `<n>.<extension>`.
import type { ResultShape } from './types.js';

const shape = (items: ResultShape['items'], extension: ResultShape['extension']): ResultShape =>
  Object.freeze({ items: Object.freeze([...items]), extension: Object.freeze({ ...extension }) });

export const VIDEO_RESULT = shape(['video'], { video: 'mp4' });
export const IMAGE_RESULT = shape(['image'], { image: 'png' });
/** oc-maker: the character sheet first, then the image; read the image by type, not by index. */
export const CHARACTER_RESULT = shape(['json', 'image'], { json: 'json', image: 'png' });
export const MP3_RESULT = shape(['audio'], { audio: 'mp3' });
export const WAV_RESULT = shape(['audio'], { audio: 'wav' });
/** song-replace-section: normally two versions per request. */
export const SONGS_RESULT = shape(['audio', 'audio'], { audio: 'mp3' });

/** Sizes in the spec are read as decimal megabytes: it fits its own "wav over about 1 min 50 s exceeds 20 MB". */
export const MB = 1_000_000;
/** For media whose size limit the spec does not show. */
export const NO_SIZE_LIMIT = Number.POSITIVE_INFINITY;
