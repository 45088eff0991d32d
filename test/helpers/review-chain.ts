// The chain the review tests share: four reviewed variants of a still, and a clip of each variant.
import type { TaskDecl } from './run-env.js';

export const VARIANTS: TaskDecl[] = [
  {
    id: 'still-{{product}}-{{index}}',
    model: 'flat-image',
    matrix: { product: ['mug'] },
    repeat: 4,
    review: true,
    input: { prompt: 'A {{product}}, variant {{index}}' },
  },
  {
    id: 'clip-{{product}}-{{index}}',
    model: 'studio-2-6',
    matrix: { product: ['mug'] },
    repeat: 4,
    after: 'still-{{product}}-{{index}}',
    input: { prompt: 'turn', image_url: '{{after.image}}', duration: 5, resolution: '720p' },
  },
];
