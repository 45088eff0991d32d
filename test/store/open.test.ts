import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/store/db.js';
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
    expect(() => openStore(':memory:')).toThrow(
      new StoreError(
        ':memory:: journal_mode must be wal, got memory: put the state database on a local disk (--state)',
      ),
    );
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
    reopened.createRun({ id: 'r1', manifestPath: 'm.yaml', manifestName: 'm', settings: {} });
    reopened.close();
    expect(migrationRows(file)).toEqual(first);
    expect(schemaOf(file)).toBe(schemaBefore);
  });

  it('keeps the data across a reopen', () => {
    const file = join(temp.dir(), 'mediabatch.db');
    const store = temp.open(file);
    store.createRun({ id: 'r1', manifestPath: 'm.yaml', manifestName: 'm', settings: { concurrency: 8 } });
    store.close();
    expect(temp.open(file).getRun('r1')?.settings).toEqual({ concurrency: 8 });
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
    expect(() => openStore(file)).toThrow(
      new StoreError(
        `${file} was written by a newer mediabatch (migration ${known + 4}, this version knows ${known}): upgrade mediabatch`,
      ),
    );
  });

  it('refuses a file that is not a SQLite database, saying which file', () => {
    const file = join(temp.dir(), 'mediabatch.db');
    writeFileSync(file, 'not a database at all, just some text that is long enough to look like a header\n');
    expect(() => openStore(file)).toThrow(StoreError);
    expect(() => openStore(file)).toThrow(`${file}: not a usable mediabatch state database`);
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
    expect(() => openDatabase(file, () => new Date(), broken)).toThrow(StoreError);
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
});
