// The bytes behind a result link: committed samples for images and video, audio synthesised to length.
import { readFile } from 'node:fs/promises';
import { makeMp3, makeWav, sandboxAsset } from '../media/synth.js';
import type { FileRecipe } from './files.js';

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

export async function renderFile(recipe: FileRecipe): Promise<Buffer> {
  switch (recipe.format) {
    case 'png':
      return sample('result.png');
    case 'mp4':
      return sample('result.mp4');
    case 'mp3':
      return makeMp3(recipe.seconds);
    case 'wav':
      return makeWav(recipe.seconds);
  }
}
