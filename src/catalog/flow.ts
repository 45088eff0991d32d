// flow22_spicy: text-to-video or first-frame image-to-video, priced per task.
import { defineEntry } from './define.js';
import { httpUrl, oneOf, str } from './fields.js';
import { exact, range, tokens } from './pricing.js';
import { VIDEO_RESULT } from './results.js';
import { ENDPOINTS } from './types.js';

export const flow = defineEntry({
  model: 'flow22_spicy',
  endpoint: ENDPOINTS.videos,
  wireModel: 'flow22_spicy',
  kind: 'video',
  fields: {
    prompt: str({ min: 1 }),
    image_url: httpUrl,
    resolution: oneOf(['480p', '720p']),
  },
  rules(_valid, issues, body) {
    // A video needs something to start from: a prompt or a first frame.
    if (!Object.hasOwn(body, 'prompt') && !Object.hasOwn(body, 'image_url')) {
      issues.push({ path: 'prompt', message: 'is required unless image_url (a first frame) is given' });
    }
  },
  result: VIDEO_RESULT,
  estimate(body, _media, prices) {
    const p = prices.flow22_spicy;
    if (body.resolution === '480p') return exact(p.perTask480p, `1 task × ${tokens(p.perTask480p)} (480p)`);
    if (body.resolution === '720p') return exact(p.perTask720p, `1 task × ${tokens(p.perTask720p)} (720p)`);
    return range(
      p.perTask480p,
      p.perTask720p,
      `1 task × ${p.perTask480p}-${tokens(p.perTask720p)} (480p or 720p); resolution default not shown: set resolution to price exactly`,
    );
  },
});
