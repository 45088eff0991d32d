// speech-v3: text-to-speech, billed per started block of 200 characters.
import { defineEntry } from './define.js';
import { charCount, num, str } from './fields.js';
import { exact, range, tokens } from './pricing.js';
import { MP3_RESULT } from './results.js';
import { ENDPOINTS } from './types.js';

const MAX_CHARS = 5000;

export const speech = defineEntry({
  model: 'speech-v3',
  endpoint: ENDPOINTS.audio,
  wireModel: 'speech-v3',
  kind: 'audio',
  fields: {
    text: str({ min: 1, max: MAX_CHARS }),
    // A preset name (case-insensitive) or a 20-character voice id; the 21 presets are not listed, so only the length is checked.
    voice: str({ min: 1, max: 100 }),
    speed: num(0.7, 1.2),
  },
  required: ['text'],
  result: MP3_RESULT,
  estimate(body, _media, prices) {
    const p = prices['speech-v3'];
    if (typeof body.text !== 'string') {
      return range(
        p.perUnit,
        Math.ceil(MAX_CHARS / p.charactersPerUnit) * p.perUnit,
        'text missing: priced up to 5000 characters',
      );
    }
    const chars = charCount(body.text);
    // 1 to 200 characters is one unit: a started unit is billed whole.
    const units = Math.max(1, Math.ceil(chars / p.charactersPerUnit));
    const word = units === 1 ? 'unit' : 'units';
    return exact(
      units * p.perUnit,
      `${chars} ${chars === 1 ? 'character' : 'characters'} = ${units} ${word} of ${p.charactersPerUnit} × ${tokens(p.perUnit)}`,
    );
  },
});
