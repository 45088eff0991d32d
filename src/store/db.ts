// Opening the state database: the folder, the pragmas that make a commit durable, and the migrations.

import { accessSync, constants, mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { shellQuote } from '../util/shell.js';
import { STATE_FILE_KINDS, StoreError, type StoreErrorKind } from './errors.js';
import { MIGRATIONS, type Migration } from './migrations.js';
import type { Clock } from './types.js';

export type Db = Database.Database;

export { STATE_FILE_KINDS, StoreError, type StoreErrorKind };

/** One message per kind, each naming the file and what to do. */
function fileError(
  kind: Exclude<StoreErrorKind, 'data' | 'older' | 'gone' | 'server'>,
  file: string,
  detail = '',
): StoreError {
  const message = {
    corrupt: `state file ${file} is not a mediabatch database or is damaged: restore a backup or move it away`,
    newer: `state file ${file} was written by a newer mediabatch ${detail}: upgrade mediabatch`,
    path: `state file ${file} ${detail}`,
    permission: `state file ${file} cannot be written ${detail}: fix the permissions of the file and its folder, or choose another --state`,
    full: `state file ${file} cannot be written: the disk is full; free some space and run again`,
    busy: `state file ${file} is locked by another process: wait for it to finish (see \`mediabatch status --state ${shellQuote(file)}\`) and run again`,
  }[kind];
  return new StoreError(message, { kind, file });
}

/**
 * Turns what SQLite or the file system said while opening into a StoreError, or undefined when it is
 * none of the known cases (then it is a bug, and the caller lets it through).
 */
export function stateFileError(error: unknown, file: string): StoreError | undefined {
  if (error instanceof StoreError) return error;
  const code = String((error as { code?: unknown } | null)?.code ?? '');
  if (code === 'SQLITE_NOTADB' || code.startsWith('SQLITE_CORRUPT')) return fileError('corrupt', file);
  if (code === 'SQLITE_FULL' || code === 'ENOSPC' || code === 'EDQUOT') return fileError('full', file);
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) return fileError('busy', file);
  if (code.startsWith('SQLITE_READONLY') || code === 'EACCES' || code === 'EPERM' || code === 'EROFS') {
    return fileError(
      'permission',
      file,
      `(${code === 'EROFS' ? 'read-only file system' : 'permission denied'})`,
    );
  }
  if (code === 'ENOTDIR' || code === 'EEXIST') return fileError('path', file, NOT_A_FOLDER);
  if (code === 'EISDIR') return fileError('path', file, IS_A_FOLDER);
  if (code.startsWith('SQLITE_CANTOPEN')) return whyCantOpen(file);
  return undefined;
}

const NOT_A_FOLDER = 'cannot be created: part of its folder path is a file, not a folder; check --state';
const IS_A_FOLDER = 'is a folder: give the path of a file with --state';

/** SQLite says only "unable to open": look at the path to say why. */
function whyCantOpen(file: string): StoreError {
  try {
    if (statSync(file).isDirectory()) return fileError('path', file, IS_A_FOLDER);
  } catch {
    // Not there: the folder is the problem.
  }
  try {
    accessSync(dirname(file), constants.W_OK);
  } catch (error) {
    return stateFileError(error, file) ?? fileError('permission', file, '(its folder cannot be written)');
  }
  return fileError('permission', file, '(it cannot be opened for writing)');
}

/** Before SQLite opens it: a file it cannot write is opened read-only without a word, and fails later. */
function checkWritable(file: string): void {
  for (const path of [file, dirname(file)]) {
    try {
      accessSync(path, constants.W_OK);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') continue;
      throw stateFileError(error, file) ?? error;
    }
  }
}

const BUSY_TIMEOUT_MS = 5_000;
/** `PRAGMA synchronous` reads back as a number; 2 is FULL. */
const SYNCHRONOUS_FULL = 2;

/** Opens (creating if needed) the database at `file`, checks its pragmas and brings its schema up to date. */
export function openDatabase(file: string, now: Clock, migrations: readonly Migration[] = MIGRATIONS): Db {
  migrations.forEach((migration, i) => {
    if (migration.id !== i + 1) {
      throw new Error(
        `migrations: entry ${i} has id ${migration.id}, expected ${i + 1} (append only, no gaps)`,
      );
    }
  });
  if (file !== ':memory:') {
    try {
      mkdirSync(dirname(file), { recursive: true });
    } catch (error) {
      throw stateFileError(error, file) ?? error;
    }
    checkWritable(file);
  }
  let db: Db;
  try {
    db = new Database(file, { timeout: BUSY_TIMEOUT_MS });
  } catch (error) {
    throw stateFileError(error, file) ?? error;
  }
  try {
    setPragmas(db, file);
    migrate(db, file, now, migrations);
  } catch (error) {
    db.close();
    throw stateFileError(error, file) ?? error;
  }
  return db;
}

/**
 * Opens an existing state database read-only (`mediabatch view`): WAL lets it read while a run in another
 * process writes, and it never takes a write lock. Its schema must be the one this version knows: an
 * older file is migrated by the caller first (through openDatabase), a newer one is refused.
 */
export function openDatabaseReadOnly(file: string, migrations: readonly Migration[] = MIGRATIONS): Db {
  let db: Db;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true, timeout: BUSY_TIMEOUT_MS });
  } catch (error) {
    throw stateFileError(error, file) ?? error;
  }
  try {
    const hasTable = db
      .prepare<[], number>(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'migrations'`)
      .pluck()
      .get();
    if (hasTable !== 1) throw fileError('corrupt', file);
    const latest = db.prepare<[], number | null>('SELECT max(id) FROM migrations').pluck().get() ?? 0;
    if (latest > migrations.length) {
      throw fileError('newer', file, `(schema ${latest}, this one knows ${migrations.length})`);
    }
    if (latest < migrations.length) {
      throw new StoreError(`state file ${file} has schema ${latest}, not ${migrations.length}`, {
        kind: 'older',
        file,
      });
    }
  } catch (error) {
    db.close();
    throw stateFileError(error, file) ?? error;
  }
  return db;
}

function setPragmas(db: Db, file: string): void {
  // The guarantee "an intent row is committed before the POST" holds only if a commit survives power
  // loss: WAL with synchronous=FULL fsyncs the log on every commit. So both are checked, not assumed.
  const journal = String(db.pragma('journal_mode = WAL', { simple: true })).toLowerCase();
  if (journal !== 'wal') {
    throw new StoreError(
      `state file ${file}: journal_mode must be wal, got ${journal}: put the state database on a local disk (--state)`,
      { kind: 'path', file },
    );
  }
  db.pragma(`synchronous = FULL`);
  const synchronous = Number(db.pragma('synchronous', { simple: true }));
  if (synchronous !== SYNCHRONOUS_FULL) {
    throw new StoreError(`state file ${file}: synchronous must be 2 (FULL), got ${synchronous}`, {
      kind: 'path',
      file,
    });
  }
  db.pragma('foreign_keys = ON');
  const foreignKeys = Number(db.pragma('foreign_keys', { simple: true }));
  if (foreignKeys !== 1) {
    throw new StoreError(`state file ${file}: foreign_keys must be 1, got ${foreignKeys}`, {
      kind: 'path',
      file,
    });
  }
  db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
}

function migrate(db: Db, file: string, now: Clock, migrations: readonly Migration[]): void {
  // Another program's SQLite file: never write our tables into it. (Ours creates `migrations` first.)
  const objects = db
    .prepare<[], { name: string }>(`SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'`)
    .all();
  if (objects.length > 0 && !objects.some((o) => o.name === 'migrations')) {
    throw fileError('corrupt', file);
  }
  db.exec(`CREATE TABLE IF NOT EXISTS migrations (
  id         INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  applied_at TEXT NOT NULL
) STRICT`);
  const latestApplied = db.prepare<[], number | null>('SELECT max(id) FROM migrations').pluck();
  const insertMigration = db.prepare<[number, string, string]>(
    'INSERT INTO migrations (id, name, applied_at) VALUES (?, ?, ?)',
  );
  const known = migrations.length;
  const refuseNewer = (latest: number): void => {
    if (latest > known) {
      throw fileError('newer', file, `(schema ${latest}, this one knows ${known})`);
    }
  };
  refuseNewer(latestApplied.get() ?? 0);

  const applyOne = db.transaction((migration: Migration): boolean => {
    // Re-read inside the write lock: another process may have migrated since we looked.
    const latest = latestApplied.get() ?? 0;
    refuseNewer(latest);
    if (migration.id <= latest) return false;
    db.exec(migration.sql);
    insertMigration.run(migration.id, migration.name, now().toISOString());
    return true;
  });
  const foreignKeyProblems = db.prepare('PRAGMA foreign_key_check');
  const applyRebuild = db.transaction((migration: Migration) => {
    // The check reads every row (2 s at a million tasks): only after a rebuild that just ran.
    if (!applyOne(migration)) return;
    const problems = foreignKeyProblems.all();
    if (problems.length > 0) {
      throw new StoreError(
        `${file}: migration ${migration.id} left ${problems.length} broken references: restore a backup of the state file`,
      );
    }
  });
  for (const migration of migrations) {
    if (!migration.rebuildsTables) {
      applyOne.immediate(migration);
      continue;
    }
    // PRAGMA foreign_keys is a no-op inside a transaction, so it is switched around it.
    db.pragma('foreign_keys = OFF');
    try {
      applyRebuild.immediate(migration);
    } finally {
      db.pragma('foreign_keys = ON');
    }
  }
}

/** What a PostgreSQL statement offers beyond better-sqlite3's (src/store/pg/db.ts). */
interface ServerCheckedRun {
  runExpectingChange?: (params: unknown) => boolean;
}

/**
 * Runs a conditional write (a task's move from the state it was read in) and calls `refuse` when it
 * changed no row. In a PostgreSQL transaction's pipeline the write is not waited for: the server itself
 * fails it when it changes no row, which undoes the transaction, and it runs again without a pipeline,
 * where `refuse` says why as it does here.
 */
export function runExpectingChange<P extends object>(
  statement: Database.Statement<[P]>,
  params: P,
  refuse: () => never,
): void {
  if (!changesRow(statement, params)) refuse();
}

/**
 * Runs a conditional write: whether it changed a row. In a PostgreSQL transaction's pipeline it is not
 * waited for and answers true: the server fails it when it changes no row, and the transaction runs again
 * without a pipeline, where this answers as on SQLite.
 */
export function changesRow<P extends object>(statement: Database.Statement<[P]>, params: P): boolean {
  const checked = (statement as unknown as ServerCheckedRun).runExpectingChange;
  if (checked?.call(statement, params) === true) return true;
  return statement.run(params).changes > 0;
}

/** What a PostgreSQL statement offers beyond better-sqlite3's (src/store/pg/db.ts). */
interface LaterRead {
  getLater?: (...params: unknown[]) => () => unknown;
}

/**
 * A read whose row is needed a little later: in a PostgreSQL transaction's pipeline it goes to the server
 * with the statements sent until the returned function is called, in one round trip; SQLite reads it now.
 */
export function readSoon<P extends unknown[], R>(
  statement: Database.Statement<P, R>,
  ...params: P
): () => R | undefined {
  const later = (statement as unknown as LaterRead).getLater;
  if (later !== undefined) return later.apply(statement, params) as () => R | undefined;
  const row = statement.get(...params);
  return () => row;
}

/**
 * Whether the open transaction sends its statements in a PostgreSQL pipeline (src/store/pg/db.ts). A read
 * made only to avoid a write the database refuses anyway (a unique index) can be left out there: the
 * refused write makes the transaction run again without the pipeline, where the read is made.
 */
export function inPipeline(db: Database.Database): boolean {
  return (db as unknown as { pipelining?: boolean }).pipelining === true;
}

/** The outcome of one write of a group commit. */
export type BatchResult = { ok: true; value: unknown } | { ok: false; error: unknown };

interface CommitsLater {
  transactionLater?: <T>(run: () => T) => { value: T; committed: Promise<boolean> };
}

/** Several writes in one transaction (Store.batch and Store.batchLater, on any database). */
export interface GroupCommit {
  batch(writes: readonly (() => unknown)[]): BatchResult[];
  batchLater(writes: readonly (() => unknown)[]): Promise<BatchResult[]>;
}

/**
 * Runs several writes in one transaction: one commit (one fsync) for all of them, which is what lets a
 * run with many tasks in flight keep up. Each write gets its own savepoint, so one that throws (a
 * refused move) is rolled back alone and reported in its slot; the others commit. Nothing is durable
 * until `batch` returns, and callers act on a write only after that.
 *
 * `batchLater`, for a caller that awaits the commit: on PostgreSQL the COMMIT is sent and this process
 * goes on while the server works (transactionLater in src/store/pg/db.ts); a batch the server undid (a
 * conflict with another worker, a write refused after the body went on) is run again by `batch`, at
 * once. SQLite commits before it returns, as `batch` does.
 */
export function groupCommit(db: Db): GroupCommit {
  const savepoint = db.transaction((write: () => unknown) => write());
  // The results are made inside the body: a PostgreSQL transaction undone by a conflict with another
  // worker runs the body again, and its first results must not count.
  const all = db.transaction((list: readonly (() => unknown)[]) => {
    const results: BatchResult[] = [];
    for (const write of list) {
      try {
        results.push({ ok: true, value: savepoint(write) });
      } catch (error) {
        results.push({ ok: false, error });
      }
    }
    return results;
  });
  const batch = (writes: readonly (() => unknown)[]) => all.immediate(writes);
  return {
    batch,
    async batchLater(writes) {
      const later = db as unknown as CommitsLater;
      if (later.transactionLater === undefined) return batch(writes);
      const { value, committed } = later.transactionLater(() => batch(writes));
      return (await committed) ? value : batch(writes);
    },
  };
}
