// A report for a bucket is written in a local temporary folder (the writers stream to files), then put
// beside the results. A run's own report and `report --merge` share these two steps.
import { createReadStream } from 'node:fs';
import { basename } from 'node:path';
import type { Storage } from '../storage/index.js';

const REPORT_TYPES: Readonly<Record<string, string>> = {
  json: 'application/json',
  csv: 'text/csv; charset=utf-8',
  markdown: 'text/markdown; charset=utf-8',
  gallery: 'text/html; charset=utf-8',
};

/** The cards' character sheets and songs, read from the task folders under `prefix`; absent ones are undefined. */
export function bucketExtraReader(storage: Storage, prefix: string) {
  return async (folder: string, name: string): Promise<unknown> => {
    try {
      return JSON.parse((await storage.getBytes(`${prefix}/${folder}/${name}`)).toString('utf8'));
    } catch {
      return undefined;
    }
  };
}

/** Each written report file put under `prefix` by its own name, streamed (a large run's report is not held in memory). */
export async function putReportFiles(
  storage: Storage,
  prefix: string,
  files: Readonly<Record<string, string>>,
): Promise<void> {
  for (const [kind, path] of Object.entries(files)) {
    await storage.putStream(`${prefix}/${basename(path)}`, createReadStream(path), {
      contentType: REPORT_TYPES[kind] ?? 'application/octet-stream',
    });
  }
}
