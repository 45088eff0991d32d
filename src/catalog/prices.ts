// The one price table, with the spec's figures in tokens. A deployment overrides entries through
// `prices:` in mediabatch.config.yaml; face swap and oc-maker are our assumptions (notes.md).
import { isPlainObject, show } from './fields.js';
import { MODEL_IDS, type PriceTable, type RequestIssue } from './types.js';

export const DEFAULT_PRICES: PriceTable = deepFreeze({
  'ai-talking-avatar-video': { perSecond540p: 1, perSecond720p: 1.5 },
  'studio-2-6': {
    perSecond720p: 2.1,
    perSecond1080p: 3.5,
    perSecond1080pAudio: 7,
    perSecond1080pAudioVoice: 8.4,
  },
  ai_dance_move: { perSecond480p: 2, perSecond720p: 4 },
  flow22_spicy: { perTask480p: 5, perTask720p: 10 },
  'stream-2-0-fast': { perSecond480p: 4.81, perSecond720p: 10.47, noAudioMultiplier: 1.1 },
  // Assumed (notes.md): 1 token per converted second, x1.5 for upscaler 2, x1.5 for enhance_face.
  'video-face-swap': { perSecond: 1, upscalerMultiplier: 1.5, enhanceFaceMultiplier: 1.5 },
  'flat-image': { perImage: 0.2 },
  'anime-waifu': { perImage: 0.2 },
  'pixel-lite': { perImage: 2 },
  // Assumed (notes.md): 2 tokens per job, both stages billed once.
  'oc-maker': { perJob: 2 },
  'speech-v3': { perUnit: 2, charactersPerUnit: 200 },
  'song-replace-section': { perRequest: 1.63 },
  'voice-cover': { perSecond: 0.02 },
});

function deepFreeze<T extends object>(table: T): T {
  for (const value of Object.values(table)) Object.freeze(value);
  return Object.freeze(table);
}

/**
 * Applies `prices:` overrides (partial per-model objects) over the defaults. Issue paths are relative to the
 * overrides object (`flat-image.perImage`); the config loader prefixes them. Valid entries apply even when
 * others are refused, so every problem is reported at once.
 */
export function mergePrices(overrides: unknown): { prices: PriceTable; issues: RequestIssue[] } {
  const issues: RequestIssue[] = [];
  const merged: Record<string, Record<string, number>> = {};
  for (const [model, figures] of Object.entries(DEFAULT_PRICES)) merged[model] = { ...figures };
  if (overrides === undefined || overrides === null) return { prices: freeze(merged), issues };
  if (!isPlainObject(overrides)) {
    issues.push({ path: '', message: `must be a mapping of model to prices, got ${show(overrides)}` });
    return { prices: freeze(merged), issues };
  }
  for (const [model, figures] of Object.entries(overrides)) {
    const target = Object.hasOwn(merged, model) ? merged[model] : undefined;
    if (target === undefined) {
      issues.push({ path: model, message: `unknown model; known models are: ${MODEL_IDS.join(', ')}` });
      continue;
    }
    if (!isPlainObject(figures)) {
      issues.push({
        path: model,
        message: `must be a mapping of price names to tokens, got ${show(figures)}`,
      });
      continue;
    }
    const keys = Object.keys(target);
    for (const [key, value] of Object.entries(figures)) {
      if (!keys.includes(key)) {
        issues.push({ path: `${model}.${key}`, message: `unknown price; known prices: ${keys.join(', ')}` });
      } else if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
        issues.push({ path: `${model}.${key}`, message: `must be a number > 0, got ${show(value)}` });
      } else target[key] = value;
    }
  }
  return { prices: freeze(merged), issues };
}

// The merged object has exactly DEFAULT_PRICES' models and keys with number values: it is a PriceTable.
function freeze(merged: Record<string, Record<string, number>>): PriceTable {
  return deepFreeze(merged) as unknown as PriceTable;
}
