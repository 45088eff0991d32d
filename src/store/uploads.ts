// Local input files already in a bucket (migration 8): one row per object, keyed by the
// bucket and the object's content-addressed key, so a file is uploaded once across runs and manifests.

import type { Db } from './db.js';
import { toIso } from './time.js';
import type { Clock } from './types.js';

export interface UploadRecord {
  /** Which bucket: endpoint and bucket name, never a credential. */
  storage: string;
  key: string;
  sha256: string;
  bytes: number;
}

export class UploadStore {
  readonly #now: Clock;
  readonly #select;
  readonly #insert;
  readonly #pendingWith;

  constructor(db: Db, now: Clock) {
    this.#now = now;
    this.#select = db.prepare<[string, string], { sha256: string; bytes: number }>(
      'SELECT sha256, bytes FROM uploads WHERE storage = ? AND key = ?',
    );
    this.#insert = db.prepare<UploadRecord & { now: string }>(
      `INSERT INTO uploads (storage, key, sha256, bytes, uploaded_at) VALUES (:storage, :key, :sha256, :bytes, :now)
       ON CONFLICT (storage, key) DO NOTHING`,
    );
    this.#pendingWith = db.prepare<[string, string], { task_id: string; model: string; body: string }>(
      `SELECT task_id, model, body FROM tasks WHERE run_id = ? AND state = 'pending' AND instr(body, ?) > 0 ORDER BY seq`,
    );
  }

  /** Whether this object was uploaded (by any run) with these bytes. */
  hasUpload(storage: string, key: string, sha256: string, bytes: number): boolean {
    const row = this.#select.get(storage, key);
    return row !== undefined && row.sha256 === sha256 && row.bytes === bytes;
  }

  recordUpload(record: UploadRecord): void {
    this.#insert.run({ ...record, now: toIso(this.#now()) });
  }

  /**
   * The pending tasks whose stored request contains `text`, one at a time: the local inputs of a run of a
   * million tasks are found without loading every task.
   */
  *pendingRequestsWith(
    runId: string,
    text: string,
  ): Generator<{ taskId: string; model: string; body: string }> {
    for (const row of this.#pendingWith.iterate(runId, text))
      yield { taskId: row.task_id, model: row.model, body: row.body };
  }
}
