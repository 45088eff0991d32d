import type { ResultItemKind } from '../catalog/types.js';
import type { Db } from './db.js';
import { StoreError } from './db.js';
import { hostOf } from './redact.js';
import { fromIso, toIso } from './time.js';
import type { Clock, FileRecord, NewFile } from './types.js';

export interface FileRow {
  run_id: string;
  task_id: string;
  idx: number;
  kind: ResultItemKind;
  path: string;
  bytes: number;
  sha256: string;
  source_host: string | null;
  completed_at: string;
}

/** Shared with the report's paged reads, which select the same columns. */
export function toFile(row: FileRow): FileRecord {
  return {
    runId: row.run_id,
    taskId: row.task_id,
    index: row.idx,
    kind: row.kind,
    path: row.path,
    bytes: row.bytes,
    sha256: row.sha256,
    sourceHost: row.source_host,
    completedAt: fromIso(row.completed_at),
  };
}

export class FileStore {
  readonly #now: Clock;
  readonly #upsertFile;
  readonly #selectFilesOfTask;
  readonly #selectFilesOfRun;
  readonly #anyFileOfRun;

  constructor(db: Db, now: Clock) {
    this.#now = now;
    this.#upsertFile = db.prepare<Omit<FileRecord, 'completedAt'> & { now: string }>(
      `INSERT INTO files (run_id, task_id, idx, kind, path, bytes, sha256, source_host, completed_at)
       VALUES (:runId, :taskId, :index, :kind, :path, :bytes, :sha256, :sourceHost, :now)
       ON CONFLICT (run_id, task_id, idx) DO UPDATE SET kind = excluded.kind, path = excluded.path,
         bytes = excluded.bytes, sha256 = excluded.sha256, source_host = excluded.source_host,
         completed_at = excluded.completed_at`,
    );
    this.#selectFilesOfTask = db.prepare<[string, string], FileRow>(
      'SELECT * FROM files WHERE run_id = ? AND task_id = ? ORDER BY idx',
    );
    this.#selectFilesOfRun = db.prepare<[string], FileRow>(
      `SELECT files.* FROM files JOIN tasks USING (run_id, task_id) WHERE run_id = ? ORDER BY tasks.seq, files.idx`,
    );
    this.#anyFileOfRun = db.prepare<[string], number>('SELECT 1 FROM files WHERE run_id = ? LIMIT 1').pluck();
  }

  /** A result file is complete on disk (renamed from its temporary name). A re-download replaces the row. */
  recordFile(runId: string, taskId: string, file: NewFile): void {
    try {
      this.#upsertFile.run({
        runId,
        taskId,
        index: file.index,
        kind: file.kind,
        path: file.path,
        bytes: file.bytes,
        sha256: file.sha256,
        sourceHost: file.url === undefined ? null : hostOf(file.url),
        now: toIso(this.#now()),
      });
    } catch (error) {
      if (error instanceof Error && 'code' in error && error.code === 'SQLITE_CONSTRAINT_FOREIGNKEY') {
        throw new StoreError(`run ${runId}: task ${taskId}: not found in the state database`);
      }
      throw error;
    }
  }

  filesOfTask(runId: string, taskId: string): FileRecord[] {
    return this.#selectFilesOfTask.all(runId, taskId).map(toFile);
  }

  /** Whether any result file of the run was recorded (one row looked at, whatever the run's size). */
  hasFiles(runId: string): boolean {
    return this.#anyFileOfRun.get(runId) !== undefined;
  }

  /** Every file of the run, in manifest order. */
  filesOfRun(runId: string): FileRecord[] {
    return this.#selectFilesOfRun.all(runId).map(toFile);
  }
}
