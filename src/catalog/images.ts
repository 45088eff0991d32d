// Image models on POST /api/v1/images/generations, priced per image (oc-maker per job, assumed).
import { defineEntry } from './define.js';
import { ANIME_NEGATIVE_PROMPT, ANIME_SEED, PIXEL_ASPECT_RATIO } from './field-names.js';
import { int, oneOf, str } from './fields.js';
import { DEFAULT_PRICES } from './prices.js';
import { exact, tokens } from './pricing.js';
import { CHARACTER_RESULT, IMAGE_RESULT } from './results.js';
import { ENDPOINTS } from './types.js';

const RATIOS = ['1:1', '2:3', '3:2', '4:3', '3:4', '16:9', '9:16'] as const;

const perImage = (price: number) => exact(price, `1 image × ${tokens(price)}`);

export const flatImage = defineEntry({
  model: 'flat-image',
  endpoint: ENDPOINTS.images,
  wireModel: 'flat-image',
  kind: 'image',
  fields: { prompt: str({ min: 1, max: 2000 }), ratio: oneOf(RATIOS) },
  // Not marked required, but a text-to-image request without text has nothing to draw.
  required: ['prompt'],
  result: IMAGE_RESULT,
  estimate: (_body, _media, prices) => perImage(prices['flat-image'].perImage),
});

export const animeWaifu = defineEntry({
  model: 'anime-waifu',
  endpoint: ENDPOINTS.images,
  wireModel: 'anime-waifu',
  kind: 'image',
  fields: {
    prompt: str({ min: 1, max: 2000 }),
    ratio: oneOf(['1:1', '3:4', '2:3', '9:16', '4:3', '3:2', '16:9']),
    [ANIME_NEGATIVE_PROMPT]: str({ max: 2000 }),
    [ANIME_SEED]: int(-1),
  },
  // Not marked required, but a text-to-image request without text has nothing to draw.
  required: ['prompt'],
  result: IMAGE_RESULT,
  estimate: (_body, _media, prices) => perImage(prices['anime-waifu'].perImage),
});

export const pixelLite = defineEntry({
  model: 'pixel-lite',
  endpoint: ENDPOINTS.images,
  wireModel: 'pixel-lite',
  kind: 'image',
  // Prompt limits are not shown: only emptiness is refused.
  fields: { prompt: str({ min: 1 }), [PIXEL_ASPECT_RATIO]: oneOf(['auto', ...RATIOS]) },
  // Not marked required, but a text-to-image request without text has nothing to draw.
  required: ['prompt'],
  result: IMAGE_RESULT,
  estimate: (_body, _media, prices) => perImage(prices['pixel-lite'].perImage),
});

export const ocMaker = defineEntry({
  model: 'oc-maker',
  endpoint: ENDPOINTS.images,
  wireModel: 'oc-maker',
  kind: 'image',
  fields: {
    prompt: str({ min: 1, max: 8000 }),
    image_render_model: oneOf(['render-a', 'render-b']),
    system_prompt: str({ max: 4000 }),
    text_model: str({ min: 1, max: 100 }),
    ratio: oneOf(RATIOS),
  },
  required: ['prompt', 'image_render_model'],
  rules(valid, issues) {
    // The job fails (after charging) when the text stage returns no `oc_prompt`; a request that never asks
    // for it is almost surely a mistake. The instruction may sit in the system prompt as well.
    const asked = [valid.prompt, valid.system_prompt].some(
      (t) => typeof t === 'string' && t.includes('oc_prompt'),
    );
    if (typeof valid.prompt === 'string' && !asked) {
      issues.push({
        path: 'prompt',
        message:
          'must ask for a JSON object with an oc_prompt field (the image prompt), or the job fails; mention oc_prompt',
      });
    }
  },
  result: CHARACTER_RESULT,
  estimate(_body, _media, prices) {
    const price = prices['oc-maker'].perJob;
    // Our figure until the user sets their own under `prices:`.
    const assumed = price === DEFAULT_PRICES['oc-maker'].perJob;
    const source = assumed ? 'assumed list price (not in the spec)' : 'list price from your configuration';
    return exact(price, `1 job × ${tokens(price)} (both stages billed once); ${source}`, assumed);
  },
});
