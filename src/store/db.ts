// Opening the state database: the folder, the pragmas that make a commit durable, and the migrations.

import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { MIGRATIONS, type Migration } from './migrations.js';
import type { Clock } from './types.js';

export type Db = Database.Database;

/** Every problem with the state database itself (not with a run), worded for the user. */
export class StoreError extends Error {
  override name = 'StoreError';
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
  try {
    mkdirSync(dirname(file), { recursive: true });
  } catch (error) {
    throw new StoreError(`${file}: cannot create its folder (${messageOf(error)}): check --state`);
  }
  let db: Db;
  try {
    db = new Database(file, { timeout: BUSY_TIMEOUT_MS });
  } catch (error) {
    throw new StoreError(`${file}: cannot open the state database (${messageOf(error)}): check --state`);
  }
  try {
    setPragmas(db, file);
    migrate(db, file, now, migrations);
  } catch (error) {
    db.close();
    if (error instanceof StoreError) throw error;
    throw new StoreError(
      `${file}: not a usable mediabatch state database (${messageOf(error)}): check --state`,
    );
  }
  return db;
}

function setPragmas(db: Db, file: string): void {
  // The guarantee "an intent row is committed before the POST" holds only if a commit survives power
  // loss: WAL with synchronous=FULL fsyncs the log on every commit. So both are checked, not assumed.
  const journal = String(db.pragma('journal_mode = WAL', { simple: true })).toLowerCase();
  if (journal !== 'wal') {
    throw new StoreError(
      `${file}: journal_mode must be wal, got ${journal}: put the state database on a local disk (--state)`,
    );
  }
  db.pragma(`synchronous = FULL`);
  const synchronous = Number(db.pragma('synchronous', { simple: true }));
  if (synchronous !== SYNCHRONOUS_FULL) {
    throw new StoreError(`${file}: synchronous must be 2 (FULL), got ${synchronous}`);
  }
  db.pragma('foreign_keys = ON');
  const foreignKeys = Number(db.pragma('foreign_keys', { simple: true }));
  if (foreignKeys !== 1) {
    throw new StoreError(`${file}: foreign_keys must be 1, got ${foreignKeys}`);
  }
  db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
}

function migrate(db: Db, file: string, now: Clock, migrations: readonly Migration[]): void {
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
      throw new StoreError(
        `${file} was written by a newer mediabatch (migration ${latest}, this version knows ${known}): upgrade mediabatch`,
      );
    }
  };
  refuseNewer(latestApplied.get() ?? 0);

  const applyOne = db.transaction((migration: Migration) => {
    // Re-read inside the write lock: another process may have migrated since we looked.
    const latest = latestApplied.get() ?? 0;
    refuseNewer(latest);
    if (migration.id <= latest) return;
    db.exec(migration.sql);
    insertMigration.run(migration.id, migration.name, now().toISOString());
  });
  const foreignKeyProblems = db.prepare('PRAGMA foreign_key_check');
  const applyRebuild = db.transaction((migration: Migration) => {
    applyOne(migration);
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

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
