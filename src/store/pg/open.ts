// Opening a PostgreSQL state: the connection, and its schema brought up to date under a lock, so that
// many workers starting at once migrate it once.

import type { Db } from '../db.js';
import { StoreError } from '../errors.js';
import type { Migration } from '../migrations.js';
import type { Clock } from '../types.js';

export { isPostgresUrl } from '../location.js';

import { PgDb } from './db.js';
import { PG_MIGRATIONS } from './migrations.js';

/** Held while migrating: another worker waits here, then finds the schema current. */
const MIGRATION_LOCK = 0x6d696772; // "migr"

/** The schema a list of migrations brings a state to: its last id (PostgreSQL has ids SQLite has not). */
function newest(migrations: readonly Migration[]): number {
  return migrations.at(-1)?.id ?? 0;
}

/** Opens the state in the database at `url`, creating its tables on first use. */
export function openPgDatabase(
  url: string,
  now: Clock,
  migrations: readonly Migration[] = PG_MIGRATIONS,
): Db {
  const db = new PgDb(url);
  try {
    migrate(db, now, migrations);
  } catch (error) {
    db.close();
    throw error;
  }
  sayNewerSchema(db, migrations);
  // The store's sub-stores call better-sqlite3's methods; PgDb offers the ones they call, with the same
  // meaning (tested by the contract suite over both backends), not the whole of its type.
  return db as unknown as Db;
}

/**
 * Opens the state at `url` for reading only (`view`): nothing is created or migrated. A database without
 * the schema is refused (kind 'path'); one of an older schema with kind 'older' (the caller migrates it through
 * openPgDatabase first, as a SQLite file is), a newer one with kind 'newer'.
 */
export function openPgDatabaseReadOnly(url: string, migrations: readonly Migration[] = PG_MIGRATIONS): Db {
  const db = new PgDb(url, { readOnly: true });
  try {
    const ours = db
      .prepare(
        `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'migrations'`,
      )
      .pluck()
      .get() as number;
    // A database no mediabatch ever wrote to: a reader has nothing to show, and creates nothing.
    if (ours === 0) {
      throw new StoreError(
        `the PostgreSQL state at ${db.name} holds no mediabatch state (no run was ever recorded there): check --state or MEDIABATCH_STATE_URL`,
        { kind: 'path', file: db.name },
      );
    }
    const latest = (db.prepare('SELECT max(id) FROM migrations').pluck().get() as number | null) ?? 0;
    const known = newest(migrations);
    if (latest > known) {
      throw new StoreError(
        `the PostgreSQL state at ${db.name} was written by a newer mediabatch (schema ${latest}, this one knows ${known}): upgrade mediabatch`,
        { kind: 'newer', file: db.name },
      );
    }
    if (latest < known) {
      throw new StoreError(`the PostgreSQL state at ${db.name} has schema ${latest}, not ${known}`, {
        kind: 'older',
        file: db.name,
      });
    }
  } catch (error) {
    db.close();
    throw error;
  }
  sayNewerSchema(db, migrations);
  return db as unknown as Db;
}

/**
 * A newer mediabatch may migrate the schema while this one works (a rolling upgrade): the connection then
 * prepares its statements again (PgDb#forgetPlans), and the user is told once, on stderr as the CLI's
 * warnings are, that this build is older than the state it works on.
 */
function sayNewerSchema(db: PgDb, migrations: readonly Migration[]): void {
  let said = false;
  db.onSchemaChanged = () => {
    const latest = (db.prepare('SELECT max(id) FROM migrations').pluck().get() as number | null) ?? 0;
    if (said || latest <= newest(migrations)) return;
    said = true;
    process.stderr.write(
      `mediabatch: the PostgreSQL state at ${db.name} was migrated by a newer mediabatch (schema ${latest}, this one knows ${newest(migrations)}) while this one works: it goes on with what it knows; upgrade it before its next run\n`,
    );
  };
}

function migrate(db: PgDb, now: Clock, migrations: readonly Migration[]): void {
  db.exec(`SELECT pg_advisory_lock(${MIGRATION_LOCK})`);
  try {
    const foreign = db
      .prepare(
        `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name <> 'migrations'`,
      )
      .pluck()
      .get() as number;
    const ours = db
      .prepare(
        `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'migrations'`,
      )
      .pluck()
      .get() as number;
    if (foreign > 0 && ours === 0) {
      throw new StoreError(
        `the PostgreSQL state at ${db.name} holds other tables and no mediabatch schema: give mediabatch a database (or a schema, with ?options=-csearch_path%3Dname) of its own`,
        { kind: 'corrupt', file: db.name },
      );
    }
    // Only when missing: a role that may use the tables but not create any (a worker's) opens it too.
    if (ours === 0)
      db.exec(`CREATE TABLE IF NOT EXISTS migrations (
  id         BIGINT PRIMARY KEY,
  name       TEXT NOT NULL,
  applied_at TEXT NOT NULL
)`);
    const latest = (db.prepare('SELECT max(id) FROM migrations').pluck().get() as number | null) ?? 0;
    if (latest > newest(migrations)) {
      throw new StoreError(
        `the PostgreSQL state at ${db.name} was written by a newer mediabatch (schema ${latest}, this one knows ${newest(migrations)}): upgrade mediabatch`,
        { kind: 'newer', file: db.name },
      );
    }
    const record = db.prepare('INSERT INTO migrations (id, name, applied_at) VALUES (?, ?, ?)');
    for (const migration of migrations) {
      if (migration.id <= latest) continue;
      db.transaction(() => {
        db.exec(migration.sql);
        record.run(migration.id, migration.name, now().toISOString());
      })();
    }
  } finally {
    if (db.open) db.exec(`SELECT pg_advisory_unlock(${MIGRATION_LOCK})`);
  }
}
