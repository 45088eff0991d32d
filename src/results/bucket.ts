// Results straight into a bucket: `output: s3://bucket/prefix` or `output: storage` puts each
// result file, job.json, sheet.json and the reports under `<prefix>/<run>/<task>/` exactly as on disk,
// streamed (multipart for large files, size and SHA-256 checked), with no local copy. A result is done
// only when its object is complete; a multipart upload cut off by a crash is aborted by the next run.

import { Readable } from 'node:stream';
import { type ObjectPut, ObjectPutError } from '../api/download.js';
import { joinKey, type Storage, StorageError } from '../storage/index.js';
import { scrub } from '../util/secrets.js';

export interface BucketOutput {
  storage: Storage;
  /** The run's folder in the bucket: `<prefix>/<run>`. */
  runKey: string;
}

/** `s3://bucket/key`: how a result in the bucket is named in the state file and the reports. */
export function objectUrl(output: BucketOutput, key: string): string {
  return `s3://${output.storage.config.bucket}/${key}`;
}

/** The put a download streams into: the bucket's trouble is reported as ours, not the link's. */
export function bucketPut(output: BucketOutput): ObjectPut {
  return async (key, body, info) => {
    try {
      const stored = await output.storage.putStream(key, body, info);
      // The bucket's own count of what it received: compared with the download's digest.
      return { location: objectUrl(output, key), sha256: stored.sha256 };
    } catch (error) {
      if (error instanceof StorageError) throw new ObjectPutError(error.message, error.transient);
      throw error;
    }
  };
}

/**
 * A small text object (job.json, sheet.json, a report file), whole or not at all. The text leaves the
 * process here: a registered secret in it is scrubbed, as from a file on disk.
 */
export async function putText(
  output: BucketOutput,
  key: string,
  text: string,
  contentType: string,
): Promise<void> {
  const bytes = Buffer.from(scrub(text), 'utf8');
  await output.storage.putStream(key, Readable.from([bytes]), { expectedBytes: bytes.length, contentType });
}

/**
 * Multipart uploads of this run that a killed process left unfinished: aborted, their results fetched
 * again. `left`: those the server could not abort (never objects either; their parts await the bucket's
 * lifecycle rule).
 */
export async function abortUnfinishedUploads(
  output: BucketOutput,
): Promise<{ aborted: number; left: number }> {
  const unfinished = await output.storage.listIncomplete(`${output.runKey}/`);
  let aborted = 0;
  for (const upload of unfinished) if (await output.storage.abort(upload)) aborted++;
  return { aborted, left: unfinished.length - aborted };
}

/**
 * A re-roll keeps the result it replaces in the bucket too: each object of the earlier result (and the
 * task's job.json and sheet.json) is copied server-side to `<run>/<task>/attempt-<n>/`. Idempotent: copying again gives the
 * same objects, so a run killed halfway copies the rest next time. The newest result later overwrites
 * `<run>/<task>/`.
 */
export async function keepEarlierInBucket(
  output: BucketOutput,
  taskFolder: string,
  attempt: number,
  locations: readonly string[],
): Promise<number> {
  const folderKey = joinKey(output.runKey, taskFolder);
  const prefix = objectUrl(output, '');
  const keys = new Set(locations.filter((l) => l.startsWith(prefix)).map((l) => l.slice(prefix.length)));
  for (const name of ['job.json', 'sheet.json']) keys.add(joinKey(folderKey, name));
  let copied = 0;
  for (const key of keys) {
    const name = key.slice(key.lastIndexOf('/') + 1);
    if (await output.storage.copy(key, joinKey(folderKey, `attempt-${attempt}`, name))) copied++;
  }
  return copied;
}
