import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach } from 'vitest';
import type { Estimate } from '../../src/catalog/types.js';
import { type NewTask, openStore, type Store, type StoreOptions } from '../../src/store/index.js';
import { PgDb } from '../../src/store/pg/db.js';

export const T0 = new Date('2025-03-31T23:00:00.000Z');

/** A clock that only moves when told to. */
export class FakeClock {
  #ms: number;
  constructor(start: Date = T0) {
    this.#ms = start.getTime();
  }
  readonly now = (): Date => new Date(this.#ms);
  advance(ms: number): void {
    this.#ms += ms;
  }
  set(date: Date): void {
    this.#ms = date.getTime();
  }
}

/**
 * Where the stores of this test file live: SQLite files (the default), or PostgreSQL databases when a
 * contract file (test/store/postgres.test.ts) says so before it loads the store's tests. Each state
 * file a test names is then its own database, the same one each time the test opens that path.
 */
let freshDatabase: (() => string) | undefined;
const databases = new Map<string, string>();

export function useBackend(fresh: () => string): void {
  freshDatabase = fresh;
}

/** Whether the tests run on PostgreSQL (test/store/postgres.test.ts) rather than on SQLite files. */
export function onPostgres(): boolean {
  return freshDatabase !== undefined;
}

/** The state to open for a file a test names: the file, or its database. */
export function stateFor(file: string): string {
  if (freshDatabase === undefined) return file;
  let url = databases.get(file);
  if (url === undefined) {
    url = freshDatabase();
    databases.set(file, url);
  }
  return url;
}

/**
 * A second connection to a test's state, as another process would hold: better-sqlite3 on the file, or
 * the PostgreSQL connection the store itself uses (same methods) on the file's database.
 */
export function rawDatabase(file: string, opts: { readonly?: boolean } = {}): Database.Database {
  if (freshDatabase === undefined) return new Database(file, opts);
  // PgDb offers the better-sqlite3 methods these tests call (prepare, exec, pragma-less reads, close).
  return new PgDb(stateFor(file)) as unknown as Database.Database;
}

/**
 * Everything the state holds, as bytes to search for a secret: the SQLite file with its WAL (which must
 * exist while the store is open, or the search would miss the newest writes), or every row of every
 * table of the PostgreSQL database, as text.
 */
export function storedBytes(file: string, open: boolean): Buffer {
  if (freshDatabase === undefined) {
    if (open && !existsSync(`${file}-wal`)) throw new Error(`${file}-wal is missing while the store is open`);
    return Buffer.concat([file, `${file}-wal`, `${file}-shm`].filter(existsSync).map((f) => readFileSync(f)));
  }
  const db = new PgDb(stateFor(file));
  try {
    const tables = db
      .prepare(`SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`)
      .pluck()
      .all() as string[];
    const rows = tables.flatMap(
      (table) => db.prepare(`SELECT t::text FROM "${table}" AS t`).pluck().all() as string[],
    );
    return Buffer.from(rows.join('\n'));
  } finally {
    db.close();
  }
}

/** Temp folders and stores opened by a test, removed after it. */
export function useTempDirs(): { dir(): string; open(file: string, opts?: StoreOptions): Store } {
  const dirs: string[] = [];
  const stores: Store[] = [];
  afterEach(() => {
    for (const store of stores.splice(0)) store.close();
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  return {
    dir() {
      const dir = mkdtempSync(join(tmpdir(), 'mediabatch-store-'));
      dirs.push(dir);
      return dir;
    },
    open(file, opts) {
      const store = openStore(stateFor(file), opts);
      stores.push(store);
      return store;
    },
  };
}

/** A fresh store in a fresh folder, with a fake clock and one run `r1`. */
export function useStoreWithRun(): { store(): Store; clock(): FakeClock; file(): string } {
  const temp = useTempDirs();
  let current: { store: Store; clock: FakeClock; file: string } | undefined;
  afterEach(() => {
    current = undefined;
  });
  const get = () => {
    if (current === undefined) {
      const clock = new FakeClock();
      const file = join(temp.dir(), 'state', 'mediabatch.db');
      const store = temp.open(file, { now: clock.now });
      store.runs.createRun({
        id: 'r1',
        manifestPath: '/m/spring.yaml',
        manifestName: 'spring',
        settings: {},
      });
      current = { store, clock, file };
    }
    return current;
  };
  return { store: () => get().store, clock: () => get().clock, file: () => get().file };
}

export function estimate(tokens: number, over: Partial<Estimate> = {}): Estimate {
  return {
    tokens,
    min: tokens,
    max: tokens,
    basis: `${tokens} tokens per image`,
    assumedPrice: false,
    ...over,
  };
}

export function task(taskId: string, body: Record<string, unknown> = {}, tokens = 3): NewTask {
  return {
    taskId,
    model: 'flat-image',
    endpoint: '/api/v1/images/generations',
    wireBody: JSON.stringify({ model: 'flat-image', prompt: `a photo of ${taskId}`, ...body }),
    estimate: estimate(tokens),
  };
}

/** Brings a task from pending to submitted with the given job id and cost. */
export function submit(
  store: Store,
  runId: string,
  taskId: string,
  imgUuid: string,
  cost: number,
  fp = 'fp0000000000',
) {
  const attemptNo = store.submissions.recordSubmitIntent(runId, taskId);
  store.submissions.recordSubmitted(runId, taskId, attemptNo, { imgUuid, cost, keyFingerprint: fp });
  return attemptNo;
}
