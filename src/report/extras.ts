// Reads what the gallery shows beyond the report: the request's prompt (from the store's copy of the
// request) and, from the task folders, the oc-maker character sheet and the songs' metadata. A file that
// is missing or unreadable only leaves its card plainer: the gallery never fails for it.

import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import pLimit from 'p-limit';
import { REQUEST_TEXT_FIELDS, type RequestTextField, type TaskRecord } from '../store/index.js';
import type { GalleryExtra } from './gallery.js';
import type { Report, ReportTask } from './schema.js';

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
  const fields = body as Record<string, unknown>;
  return promptOfText(
    Object.fromEntries(
      REQUEST_TEXT_FIELDS.map((f) => [f, typeof fields[f] === 'string' ? fields[f] : null]),
    ) as Record<RequestTextField, string | null>,
  );
}

/** The first of the request's text fields (prompt, text, lyrics, description, title) that is not blank. */
export function promptOfText(text: Readonly<Record<RequestTextField, string | null>>): string | undefined {
  for (const field of REQUEST_TEXT_FIELDS) {
    const value = text[field];
    if (value !== null && value.trim() !== '') return value;
  }
  return undefined;
}

export async function readGalleryExtras(
  report: Report,
  tasks: readonly TaskRecord[],
  runDir: string,
): Promise<Map<string, GalleryExtra>> {
  const prompts = new Map(tasks.map((t) => [t.taskId, promptOf(t.wireBody)]));
  return extrasOf(
    report.tasks.map((task) => ({ task, prompt: prompts.get(task.id) })),
    runDir,
  );
}

/** The extras of some tasks (a page of them, or all), each with the prompt of its request. */
/** Reads a task's JSON file (sheet.json, job.json) by its folder and name; undefined when it cannot. */
export type ExtraReader = (folder: string, name: string) => Promise<unknown>;

export async function extrasOf(
  tasks: readonly { task: ReportTask; prompt: string | undefined }[],
  runDir: string,
  read: ExtraReader = (folder, name) => readJson(join(runDir, folder, name)),
): Promise<Map<string, GalleryExtra>> {
  const extras = new Map<string, GalleryExtra>();
  const limit = pLimit(READ_CONCURRENCY);
  await Promise.all(
    tasks.map(({ task, prompt }) =>
      limit(async () => {
        const extra: GalleryExtra = prompt === undefined ? {} : { prompt };
        if (task.status === 'done') await readFolderExtras(task, read, extra);
        extras.set(task.id, extra);
      }),
    ),
  );
  return extras;
}

async function readFolderExtras(t: ReportTask, read: ExtraReader, extra: GalleryExtra): Promise<void> {
  if (t.model === 'oc-maker') {
    const sheet = await read(t.folder, 'sheet.json');
    if (sheet !== undefined) extra.sheet = sheet;
  }
  if (t.files.some((f) => f.kind === 'audio')) {
    const job = await read(t.folder, 'job.json');
    const songs = (job as { songs?: unknown } | undefined)?.songs;
    if (Array.isArray(songs)) {
      extra.songs = songs.filter((s): s is Record<string, unknown> => s !== null && typeof s === 'object');
    }
  }
}

async function readJson(path: string): Promise<unknown> {
  try {
    if ((await stat(path)).size > MAX_JSON_BYTES) return undefined;
    return JSON.parse(await readFile(path, 'utf8')) as unknown;
  } catch {
    return undefined;
  }
}
