// Reads what the gallery shows beyond the report: the request's prompt (from the store's copy of the
// request) and, from the task folders, the oc-maker character sheet and the songs' metadata. A file that
// is missing or unreadable only leaves its card plainer: the gallery never fails for it.

import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import pLimit from 'p-limit';
import type { TaskRecord } from '../store/index.js';
import type { GalleryExtra } from './gallery.js';
import type { Report } from './schema.js';

const PROMPT_FIELDS = ['prompt', 'text', 'lyrics', 'description'] as const;
/** Sheets and job records are small; anything bigger is not ours to inline into the page. */
const MAX_JSON_BYTES = 1024 * 1024;
const READ_CONCURRENCY = 16;

export function promptOf(wireBody: string): string | undefined {
  let body: unknown;
  try {
    body = JSON.parse(wireBody);
  } catch {
    return undefined;
  }
  if (body === null || typeof body !== 'object') return undefined;
  for (const field of PROMPT_FIELDS) {
    const value = (body as Record<string, unknown>)[field];
    if (typeof value === 'string' && value.trim() !== '') return value;
  }
  return undefined;
}

export async function readGalleryExtras(
  report: Report,
  tasks: readonly TaskRecord[],
  runDir: string,
): Promise<Map<string, GalleryExtra>> {
  const extras = new Map<string, GalleryExtra>();
  for (const task of tasks) {
    const prompt = promptOf(task.wireBody);
    if (prompt !== undefined) extras.set(task.taskId, { prompt });
  }
  const limit = pLimit(READ_CONCURRENCY);
  await Promise.all(
    report.tasks
      .filter((t) => t.status === 'done')
      .map((t) =>
        limit(async () => {
          const extra = extras.get(t.id) ?? {};
          if (t.model === 'oc-maker') {
            const sheet = await readJson(join(runDir, t.folder, 'sheet.json'));
            if (sheet !== undefined) extra.sheet = sheet;
          }
          if (t.files.some((f) => f.kind === 'audio')) {
            const job = await readJson(join(runDir, t.folder, 'job.json'));
            const songs = (job as { songs?: unknown } | undefined)?.songs;
            if (Array.isArray(songs)) {
              extra.songs = songs.filter(
                (s): s is Record<string, unknown> => s !== null && typeof s === 'object',
              );
            }
          }
          extras.set(t.id, extra);
        }),
      ),
  );
  return extras;
}

async function readJson(path: string): Promise<unknown> {
  try {
    if ((await stat(path)).size > MAX_JSON_BYTES) return undefined;
    return JSON.parse(await readFile(path, 'utf8')) as unknown;
  } catch {
    return undefined;
  }
}
