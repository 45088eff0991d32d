// Field names the spec marks "not shown" (see notes.md, "Decisions"). Each is one constant here so that a
// correction from the service's documentation is a one-line change.

/** anime-waifu: what to avoid. */
export const ANIME_NEGATIVE_PROMPT = 'negative_prompt';
/** anime-waifu: -1 = random, >= 0 reproduces a generation. */
export const ANIME_SEED = 'seed';
/** pixel-lite: aspect ratio, `auto` by default. */
export const PIXEL_ASPECT_RATIO = 'aspect_ratio';
/** stream-2-0-fast: the 1-2 frame URLs (aliases `image_url`, `image_end_url`). */
export const STREAM_FRAMES = 'image_urls';
/** stream-2-0-fast: its alias of `custom_callback_url`, which the spec does not name. */
export const STREAM_CALLBACK_ALIAS = 'callback_url';

/** song-replace-section's optional fields, named by meaning only in the spec. */
export const SONG = {
  avoidStyles: 'negative_tags',
  singerGender: 'vocal_gender',
  styleStrictness: 'style_weight',
  experimental: 'weirdness_constraint',
  audioAdherence: 'audio_weight',
  versionDifference: 'variation',
} as const;
