import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openDatabase, stateFileError } from '../../src/store/db.js';
import { MIGRATIONS, openStore, StoreError } from '../../src/store/index.js';
import { FakeClock, useTempDirs } from './helpers.js';

const temp = useTempDirs();

function schemaOf(file: string): string {
  const db = new Database(file, { readonly: true });
  try {
    const rows = db
      .prepare<[], { sql: string }>(`SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid`)
      .all();
    return `${rows.map((r) => `${r.sql};`).join('\n\n')}\n`;
  } finally {
    db.close();
  }
}

function migrationRows(file: string): { id: number; applied_at: string }[] {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare<[], { id: number; applied_at: string }>('SELECT id, applied_at FROM migrations').all();
  } finally {
    db.close();
  }
}

/** What a StoreError says, or the error itself when something else was thrown. */
function storeErrorOf(open: () => unknown): unknown {
  try {
    open();
  } catch (error) {
    if (!(error instanceof StoreError)) return error;
    return { kind: error.kind, file: error.file, message: error.message };
  }
  return 'opened';
}

const corrupt = (file: string) => ({
  kind: 'corrupt',
  file,
  message: `state file ${file} is not a mediabatch database or is damaged: restore a backup or move it away`,
});

describe('openStore', () => {
  it('creates the folder and the file, with WAL, synchronous=FULL and foreign keys on', () => {
    const file = join(temp.dir(), 'deep', 'state', 'mediabatch.db');
    const store = temp.open(file);
    expect(existsSync(file)).toBe(true);
    expect(store.pragmas()).toEqual({
      journalMode: 'wal',
      synchronous: 2,
      foreignKeys: 1,
      busyTimeoutMs: 5000,
    });
  });

  it('refuses a database whose journal cannot be WAL, instead of running without the guarantee', () => {
    expect(storeErrorOf(() => openStore(':memory:'))).toEqual({
      kind: 'path',
      file: ':memory:',
      message:
        'state file :memory:: journal_mode must be wal, got memory: put the state database on a local disk (--state)',
    });
  });

  it('applies every migration once, and reopening applies nothing again', () => {
    const file = join(temp.dir(), 'mediabatch.db');
    const clock = new FakeClock();
    temp.open(file, { now: clock.now }).close();
    const first = migrationRows(file);
    expect(first.map((r) => r.id)).toEqual(MIGRATIONS.map((m) => m.id));

    clock.advance(60_000);
    const schemaBefore = schemaOf(file);
    const reopened = temp.open(file, { now: clock.now });
    reopened.runs.createRun({ id: 'r1', manifestPath: 'm.yaml', manifestName: 'm', settings: {} });
    reopened.close();
    expect(migrationRows(file)).toEqual(first);
    expect(schemaOf(file)).toBe(schemaBefore);
  });

  it('keeps the data across a reopen', () => {
    const file = join(temp.dir(), 'mediabatch.db');
    const store = temp.open(file);
    store.runs.createRun({
      id: 'r1',
      manifestPath: 'm.yaml',
      manifestName: 'm',
      settings: { concurrency: 8 },
    });
    store.close();
    expect(temp.open(file).runs.getRun('r1')?.settings).toEqual({ concurrency: 8 });
  });

  it('has the schema of the snapshot (a schema change must update it on purpose)', async () => {
    const file = join(temp.dir(), 'mediabatch.db');
    temp.open(file).close();
    await expect(schemaOf(file)).toMatchFileSnapshot('./__snapshots__/schema.sql');
  });

  it('refuses a database written by a newer mediabatch', () => {
    const file = join(temp.dir(), 'state', 'mediabatch.db');
    temp.open(file).close();
    const db = new Database(file);
    const known = MIGRATIONS.length;
    db.prepare('INSERT INTO migrations (id, name, applied_at) VALUES (?, ?, ?)').run(
      known + 4,
      'from the future',
      '2030-01-01T00:00:00.000Z',
    );
    db.close();
    expect(storeErrorOf(() => openStore(file))).toEqual({
      kind: 'newer',
      file,
      message: `state file ${file} was written by a newer mediabatch (schema ${known + 4}, this one knows ${known}): upgrade mediabatch`,
    });
  });

  it('refuses a file that is not a SQLite database, saying which file', () => {
    const file = join(temp.dir(), 'mediabatch.db');
    writeFileSync(file, 'not a database at all, just some text that is long enough to look like a header\n');
    expect(storeErrorOf(() => openStore(file))).toEqual(corrupt(file));
  });

  it('rolls a failing migration back entirely, leaving no half-applied schema', () => {
    const file = join(temp.dir(), 'mediabatch.db');
    temp.open(file).close();
    const broken = [
      ...MIGRATIONS,
      {
        id: MIGRATIONS.length + 1,
        name: 'broken',
        sql: 'CREATE TABLE half (x INTEGER); SELECT nonsense FROM nowhere;',
      },
    ];
    // A broken migration is our bug, not the user's file: it goes up as it is (exit 70, "please report").
    expect(() => openDatabase(file, () => new Date(), broken)).toThrow(/no such table: nowhere/);
    const check = new Database(file, { readonly: true });
    try {
      expect(check.prepare(`SELECT name FROM sqlite_master WHERE name = 'half'`).get()).toBeUndefined();
      expect(check.prepare('SELECT max(id) AS id FROM migrations').get()).toEqual({ id: MIGRATIONS.length });
    } finally {
      check.close();
    }
  });

  it('refuses a migration list with a gap (append only, numbered in order)', () => {
    const file = join(temp.dir(), 'mediabatch.db');
    const gap = [...MIGRATIONS, { id: MIGRATIONS.length + 2, name: 'gap', sql: 'SELECT 1' }];
    expect(() => openDatabase(file, () => new Date(), gap)).toThrow(/expected \d+ \(append only, no gaps\)/);
  });

  // A lock held past the busy timeout takes 5 s to provoke; SQLite's own error stands in for it.
  it.each([
    [
      'SQLITE_BUSY',
      'busy',
      'state file s.db is locked by another process: wait for it to finish (see `mediabatch status --state s.db`) and run again',
    ],
    [
      'SQLITE_READONLY_DBMOVED',
      'permission',
      'state file s.db cannot be written (permission denied): fix the permissions of the file and its folder, or choose another --state',
    ],
    [
      'EROFS',
      'permission',
      'state file s.db cannot be written (read-only file system): fix the permissions of the file and its folder, or choose another --state',
    ],
    [
      'SQLITE_CORRUPT_INDEX',
      'corrupt',
      'state file s.db is not a mediabatch database or is damaged: restore a backup or move it away',
    ],
  ])('words %s as %s', (code, kind, message) => {
    const error = stateFileError(new Database.SqliteError('sqlite says', code), 's.db');
    expect({ kind: error?.kind, message: error?.message }).toEqual({ kind, message });
  });

  it('lets an error it does not know go up as it is (a bug, not the file)', () => {
    expect(
      stateFileError(new Database.SqliteError('no such column: x', 'SQLITE_ERROR'), 's.db'),
    ).toBeUndefined();
  });
});
