// The shape of the catalog: one entry per task kind of the Media Generation API.
// The sandbox, the planner and the runner all read model rules from here and nowhere else.

export const MODEL_IDS = [
  'ai-talking-avatar-video',
  'studio-2-6',
  'ai_dance_move',
  'flow22_spicy',
  'stream-2-0-fast',
  'video-face-swap',
  'flat-image',
  'anime-waifu',
  'pixel-lite',
  'oc-maker',
  'speech-v3',
  'song-replace-section',
  'voice-cover',
] as const;

export type ModelId = (typeof MODEL_IDS)[number];

export const ENDPOINTS = {
  videos: '/api/v1/videos/generations',
  images: '/api/v1/images/generations',
  audio: '/api/v1/audio/generations',
  faceSwap: '/api/v1/videofaceswap/generate',
} as const;

export type Endpoint = (typeof ENDPOINTS)[keyof typeof ENDPOINTS];

/** A request body as JSON: the fields a user writes under `input`, after alias normalisation. */
export type RequestBody = Record<string, unknown>;

/** One broken rule. `path` is the field path inside the request body, e.g. `voice_ids.2` or `` for the whole body. */
export interface RequestIssue {
  path: string;
  message: string;
}

export type CheckResult = { ok: true; body: RequestBody } | { ok: false; issues: RequestIssue[] };

/** A request field that names input media whose length or size matters for rules or price. */
export interface MediaField {
  field: string;
  kind: 'video' | 'audio' | 'image';
  maxBytes: number;
  /** True when the field's duration is billed or checked, so the planner must probe it. */
  needsDuration: boolean;
}

/** Measured durations in seconds, keyed by the canonical field that names the media (e.g. `video_url`). */
export type MediaDurations = Partial<Record<string, number>>;

export interface Estimate {
  /** Best estimate of the list price in tokens (the max when the length is unknown). */
  tokens: number;
  min: number;
  max: number;
  /** A sentence a person can read: "30 s × 1.5 tokens (720p)". */
  basis: string;
  /** True when the list price itself is our assumption (face swap, oc-maker), not the spec's. */
  assumedPrice: boolean;
}

export type ResultItemKind = 'image' | 'audio' | 'video' | 'json';

export interface ResultShape {
  /** What `json[]` holds on success, in order, e.g. ['json', 'image'] for oc-maker, ['audio','audio'] for songs. */
  items: readonly ResultItemKind[];
  /** File extension of the downloaded file for each URL item kind. */
  extension: Partial<Record<ResultItemKind, string>>;
}

export interface CatalogEntry {
  readonly model: ModelId;
  readonly endpoint: Endpoint;
  /** Value of the `model` field on the wire; null for the face swap endpoint, which has none. */
  readonly wireModel: string | null;
  readonly kind: 'video' | 'image' | 'audio';
  /** Every field name accepted in `input`, canonical names and aliases. */
  readonly knownFields: readonly string[];
  readonly mediaFields: readonly MediaField[];
  readonly result: ResultShape;
  /** The result shape for one checked body, where it depends on the request (voice-cover's `output_format: wav`
   *  gives a .wav). Every catalog entry sets it; optional only so that hand-made entries in tests stay short. */
  resultFor?(body: RequestBody): ResultShape;
  /** Normalise aliases to canonical names and check every rule that needs no media measurement. */
  check(input: RequestBody): CheckResult;
  /**
   * For a field written in `input` (canonical or a plain alias): its canonical name and valid values at
   * the edges of what it takes; undefined when it has none (a list, an unknown field). Chains check and
   * price a field filled in from an upstream's result with them. Optional for hand-made test entries.
   */
  fieldSamples?(name: string): { field: string; samples: readonly unknown[] } | undefined;
  /** Rules that depend on measured media lengths; `media` holds only what could be measured. */
  checkMedia(body: RequestBody, media: MediaDurations): RequestIssue[];
  /** List price. `hintSeconds` is the manifest's `media_seconds`, used where a length could not be measured. */
  estimate(body: RequestBody, media: MediaDurations, prices: PriceTable, hintSeconds?: number): Estimate;
}

/**
 * Every figure of every price rule, in tokens. One table, with the spec's figures as defaults;
 * `mediabatch.config.yaml` can override any entry (`prices:`).
 */
export interface PriceTable {
  'ai-talking-avatar-video': { perSecond540p: number; perSecond720p: number };
  'studio-2-6': {
    perSecond720p: number;
    perSecond1080p: number;
    perSecond1080pAudio: number;
    perSecond1080pAudioVoice: number;
  };
  ai_dance_move: { perSecond480p: number; perSecond720p: number };
  flow22_spicy: { perTask480p: number; perTask720p: number };
  'stream-2-0-fast': { perSecond480p: number; perSecond720p: number; noAudioMultiplier: number };
  'video-face-swap': { perSecond: number; upscalerMultiplier: number; enhanceFaceMultiplier: number };
  'flat-image': { perImage: number };
  'anime-waifu': { perImage: number };
  'pixel-lite': { perImage: number };
  'oc-maker': { perJob: number };
  'speech-v3': { perUnit: number; charactersPerUnit: number };
  'song-replace-section': { perRequest: number };
  'voice-cover': { perSecond: number };
}

// USD per token has its home with the other money rules.
export { USD_PER_TOKEN } from '../util/money.js';
