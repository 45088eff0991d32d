// The bytes behind a result link: an image drawn for its request (src/sandbox/picture.ts), the committed
// sample for video, audio synthesised to length.
import { readFile } from 'node:fs/promises';
import { makeMp3, makeWav, sandboxAsset } from '../media/synth.js';
import type { FileRecipe, StoredFile } from './files.js';
import type { Jobs } from './jobs.js';
import { type ImageLabel, imageLabel, labelledPng } from './picture.js';

const samples = new Map<string, Promise<Buffer>>();

function sample(name: string): Promise<Buffer> {
  let bytes = samples.get(name);
  if (!bytes) {
    bytes = readFile(sandboxAsset(name));
    samples.set(name, bytes);
    // A failed read is not cached, so a fixed install works without a restart.
    bytes.catch(() => samples.delete(name));
  }
  return bytes;
}

/** `label`: what an image shows; without one (its job is unknown), the committed sample image. */
export async function renderFile(recipe: FileRecipe, label?: ImageLabel): Promise<Buffer> {
  switch (recipe.format) {
    case 'png':
      return label === undefined ? sample('result.png') : labelledPng(label);
    case 'mp4':
      return sample('result.mp4');
    case 'mp3':
      return makeMp3(recipe.seconds);
    case 'wav':
      return makeWav(recipe.seconds);
  }
}

/** What the image of a stored file shows: its job's model and request, its place among the job's images. */
export function labelOfFile(jobs: Pick<Jobs, 'get'>, file: StoredFile): ImageLabel | undefined {
  if (file.recipe.format !== 'png') return undefined;
  const job = jobs.get(file.jobId);
  if (job === undefined) return undefined;
  const images = (job.items ?? [])
    .map((item, i) => ({ type: item.type, i }))
    .filter((x) => x.type === 'image');
  const place = Math.max(
    0,
    images.findIndex((x) => x.i === file.index),
  );
  return imageLabel(job.entry.model, job.body, place, Math.max(1, images.length));
}
