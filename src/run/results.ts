// What a successful job leaves on disk: which links to download under which names, and which
// text results (the oc-maker character sheet, song metadata) go to JSON. Pure.

import type { CatalogEntry, RequestBody, ResultItemKind } from '../catalog/types.js';
import { resultFileName } from '../results/names.js';

export interface FileToFetch {
  /** 1-based among the files of this job. */
  position: number;
  /** 0-based index of the item in the job's `json` array. */
  itemIndex: number;
  kind: string;
  url: string;
  fileName: string;
  /** The item's own `link_expired_at`, when the service puts it on each item rather than on the job. */
  expiresAt?: string | number;
}

export interface SongInfo {
  file: string;
  audio_id?: unknown;
  title?: unknown;
  style?: unknown;
  lyrics?: unknown;
  audio_duration?: unknown;
}

export interface ResultPlan {
  files: FileToFetch[];
  /** The oc-maker character sheet, written to sheet.json. */
  sheet?: unknown;
  songs: SongInfo[];
  /** Items we could not use, in words. */
  problems: string[];
}

const FALLBACK_EXTENSION: Record<string, string> = { image: 'png', audio: 'mp3', video: 'mp4' };

function extensionFor(entry: CatalogEntry, body: RequestBody, kind: string): string {
  const shape = entry.resultFor?.(body) ?? entry.result;
  return shape.extension[kind as ResultItemKind] ?? FALLBACK_EXTENSION[kind] ?? 'bin';
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A server cannot make one job write thousands of files: items past `maxItems` are left, and said so. */
export function planResults(
  entry: CatalogEntry,
  body: RequestBody,
  listed: unknown,
  maxItems = Number.POSITIVE_INFINITY,
): ResultPlan {
  const plan: ResultPlan = { files: [], songs: [], problems: [] };
  if (!Array.isArray(listed)) {
    plan.problems.push('the finished job has no result list (json is not an array)');
    return plan;
  }
  const items = listed.length > maxItems ? listed.slice(0, maxItems) : listed;
  if (items.length < listed.length) {
    plan.problems.push(`the job listed ${listed.length} result items; only the first ${maxItems} are kept`);
  }
  items.forEach((item, itemIndex) => {
    if (!isRecord(item)) {
      plan.problems.push(`result item ${itemIndex + 1} is not an object`);
      return;
    }
    const kind = typeof item['type'] === 'string' ? item['type'] : 'unknown';
    const value = item['value'];
    if (kind === 'json') {
      // oc-maker: the character sheet is the value itself, not a link.
      plan.sheet = value;
      return;
    }
    if (typeof value !== 'string') {
      plan.problems.push(`result item ${itemIndex + 1} (${kind}) has no link`);
      return;
    }
    const position = plan.files.length + 1;
    const fileName = resultFileName(position, extensionFor(entry, body, kind));
    const expiresAt = item['link_expired_at'];
    plan.files.push({
      position,
      itemIndex,
      kind,
      url: value,
      fileName,
      ...((typeof expiresAt === 'string' || typeof expiresAt === 'number') && { expiresAt }),
    });
    if ('audio_id' in item || 'title' in item || 'lyrics' in item) {
      plan.songs.push({
        file: fileName,
        audio_id: item['audio_id'],
        title: item['title'],
        style: item['style'],
        lyrics: item['lyrics'],
        audio_duration: item['audio_duration'],
      });
    }
  });
  if (plan.files.length === 0 && plan.problems.length === 0)
    plan.problems.push('the finished job has no result files');
  return plan;
}
