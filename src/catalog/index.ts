// The model catalog: the single source of truth for the API's task kinds, their rules, prices and results.
import { talkingAvatar } from './avatar.js';
import { dance } from './dance.js';
import { faceSwap } from './faceswap.js';
import { flow } from './flow.js';
import { animeWaifu, flatImage, ocMaker, pixelLite } from './images.js';
import { songReplaceSection } from './song.js';
import { speech } from './speech.js';
import { stream } from './stream.js';
import { studio } from './studio.js';
import { type CatalogEntry, type CheckResult, MODEL_IDS, type ModelId, type RequestBody } from './types.js';
import { voiceCover } from './voice-cover.js';
import { readWireBody, type WireRead } from './wire.js';

export const CATALOG: Readonly<Record<ModelId, CatalogEntry>> = Object.freeze({
  'ai-talking-avatar-video': talkingAvatar,
  'studio-2-6': studio,
  ai_dance_move: dance,
  flow22_spicy: flow,
  'stream-2-0-fast': stream,
  'video-face-swap': faceSwap,
  'flat-image': flatImage,
  'anime-waifu': animeWaifu,
  'pixel-lite': pixelLite,
  'oc-maker': ocMaker,
  'speech-v3': speech,
  'song-replace-section': songReplaceSection,
  'voice-cover': voiceCover,
});

export function findEntry(model: string): CatalogEntry | undefined {
  return Object.hasOwn(CATALOG, model) ? CATALOG[model as ModelId] : undefined;
}

/** unknown model -> one issue at path 'model' listing the known models */
export function checkRequest(model: string, input: RequestBody): CheckResult {
  const entry = findEntry(model);
  if (entry === undefined) {
    return {
      ok: false,
      issues: [
        {
          path: 'model',
          message: `unknown model ${JSON.stringify(model)}; known models are: ${MODEL_IDS.join(', ')}`,
        },
      ],
    };
  }
  return entry.check(input);
}

/**
 * For the sandbox: reads a wire request for an endpoint path (see readWireBody). `input` is returned as
 * received, minus `model`, `args` and the callback: run `entry.check(input)` on it.
 */
export function fromWireBody(endpoint: string, wire: unknown): WireRead {
  return readWireBody(Object.values(CATALOG), endpoint, wire);
}

export { DEFAULT_PRICES, mergePrices } from './prices.js';
export { roundTokens } from './pricing.js';
export * from './types.js';
export { toWireBody } from './wire.js';
