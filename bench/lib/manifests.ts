// Manifests the bench generates: one task declaration repeated, so 100,000 tasks stay a few lines of YAML.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';

export interface RepeatedImages {
  name: string;
  count: number;
  concurrency?: number;
  /** A budget in tokens, so that every spend is checked against one. */
  budget?: number;
}

/** `count` flat-image tasks `img-1` … `img-<count>`; raising `count` later adds tasks and keeps the others. */
export async function writeImagesManifest(dir: string, m: RepeatedImages, file = `${m.name}.yaml`) {
  const body = {
    version: 1,
    name: m.name,
    concurrency: m.concurrency ?? 64,
    ...(m.budget !== undefined ? { budget: m.budget } : {}),
    output: 'out',
    tasks: [
      {
        id: 'img-{{index}}',
        model: 'flat-image',
        repeat: m.count,
        input: { prompt: 'product shot number {{index}}' },
      },
    ],
  };
  await writeFile(join(dir, file), stringify(body));
  return file;
}
