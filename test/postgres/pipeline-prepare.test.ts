// A statement's first use inside a PostgreSQL transaction without savepoints is prepared in the pipeline
// (a Parse sent ahead of its Bind/Execute, answered in order with the rest). These tests try to break
// that: a PREPARE the server refuses or skips, one whose transaction then fails, one that waits for a
// lock, a connection cut just after it; each time the group commit must answer as SQLite's does, and the
// connection's prepared statements must agree with the server's (a name kept that the server lost fails
// the statement's next use, a name reused that the server kept fails its PREPARE).
import Database from 'better-sqlite3';
import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { EXIT } from '../../src/exit-codes.js';
import { type BatchResult, groupCommit } from '../../src/store/db.js';
import { StoreError } from '../../src/store/errors.js';
import { PgDb } from '../../src/store/pg/db.js';
import { onLibpqCalls, waits as waitsForServer } from '../helpers/libpq-calls.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';
import { spawnTcpProxy } from '../helpers/tcp-proxy.js';

vi.setConfig({ testTimeout: 60_000 });

const waits = { n: 0 };
onLibpqCalls((method) => {
  if (waitsForServer(method)) waits.n += 1;
});

const pg: Postgres = await startPostgres();
afterAll(() => pg.stop());

type Db = Database.Database;
type Outcome = BatchResult;
let dbs: { sqlite: Db; postgres: Db };
beforeEach(() => {
  const postgres = new PgDb(pg.freshDatabase()) as unknown as Db;
  const sqlite = new Database(':memory:');
  for (const db of [sqlite, postgres]) db.exec('CREATE TABLE t (k TEXT PRIMARY KEY, v BIGINT NOT NULL)');
  dbs = { sqlite, postgres };
  return () => {
    sqlite.close();
    postgres.close();
  };
});

/** Store.batchLater on a bare database: the COMMIT answered later on PostgreSQL, the batch run again when undone. */
const batchLater = (db: Db, writes: readonly (() => unknown)[]): Promise<Outcome[]> =>
  groupCommit(db).batchLater(writes);

/** Outcomes as the user sees them: each slot's value, or that it was refused. */
const shown = (outcomes: readonly Outcome[]) =>
  outcomes.map((o) => (o.ok ? { ok: true, value: o.value } : { ok: false }));

const rows = (db: Db) => db.prepare('SELECT k, v FROM t ORDER BY k').all();

/** The names of the statements prepared on the connection, as the server keeps them. */
function serverPrepared(db: Db): string[] {
  return (
    db.prepare('SELECT name FROM pg_prepared_statements ORDER BY name').all() as { name: string }[]
  ).map((r) => r.name);
}

describe('a statement prepared in a group commit’s pipeline', () => {
  it('a PREPARE refused mid-batch: the others commit, the refused one has its own error in its slot, as on SQLite; the next batch refuses it again and runs the rest', async () => {
    const answers: Record<string, unknown> = {};
    for (const [name, db] of Object.entries(dbs)) {
      const add = db.prepare<[string, number]>('INSERT INTO t (k, v) VALUES (?, ?)');
      // better-sqlite3 compiles at prepare(): both build the statement inside its write.
      const unknownColumn = () => db.prepare('UPDATE t SET nope = 1 WHERE k = ?').run('a');
      const bump = db.prepare<[string]>('UPDATE t SET v = v + 1 WHERE k = ?');
      const first = await batchLater(db, [
        () => add.run('a', 1).changes,
        unknownColumn,
        () => bump.run('a').changes,
        () => add.run('b', 1).changes,
      ]);
      const before = waits.n;
      const second = await batchLater(db, [
        unknownColumn,
        () => bump.run('b').changes,
        () => add.run('c', 1).changes,
      ]);
      const trips = waits.n - before;
      const error = (first[1] as { error: Error }).error;
      answers[name] = { first: shown(first), second: shown(second), rows: rows(db) };
      if (name === 'postgres') {
        expect(error).toBeInstanceOf(Error);
        expect(error.message).toMatch(/^ERROR: {2}column "nope" of relation "t" does not exist/);
        expect((second[0] as { error: Error }).error.message).toBe(error.message);
        // The refused statement makes the batch run again with savepoints: it waits for each statement.
        expect(trips).toBeGreaterThan(1);
      }
    }
    expect(answers.postgres).toEqual(answers.sqlite);
    expect(answers.sqlite).toEqual({
      first: [{ ok: true, value: 1 }, { ok: false }, { ok: true, value: 1 }, { ok: true, value: 1 }],
      second: [{ ok: false }, { ok: true, value: 1 }, { ok: true, value: 1 }],
      rows: [
        { k: 'a', v: 2 },
        { k: 'b', v: 2 },
        { k: 'c', v: 1 },
      ],
    });
  });

  it('a PREPARE with a syntax error mid-batch: same; the statements prepared around it pipeline afterwards', async () => {
    const db = dbs.postgres;
    const add = db.prepare<[string, number]>('INSERT INTO t (k, v) VALUES (?, ?)');
    const bad = () => db.prepare('UPDATE t SET v = v + WHERE k = ?').run('a');
    const first = await batchLater(db, [() => add.run('a', 1).changes, bad, () => add.run('b', 2).changes]);
    expect(shown(first)).toEqual([{ ok: true, value: 1 }, { ok: false }, { ok: true, value: 1 }]);
    expect((first[1] as { error: Error }).error.message).toMatch(
      /^ERROR: {2}syntax error at or near "WHERE"/,
    );
    const before = waits.n;
    // Their changes not read: nothing waits before the COMMIT's answer (a read of one would wait for it).
    const next = await batchLater(db, [() => void add.run('c', 3), () => void add.run('d', 4)]);
    expect(waits.n - before).toBe(1);
    expect(shown(next)).toEqual([
      { ok: true, value: undefined },
      { ok: true, value: undefined },
    ]);
    expect(rows(db)).toEqual([
      { k: 'a', v: 1 },
      { k: 'b', v: 2 },
      { k: 'c', v: 3 },
      { k: 'd', v: 4 },
    ]);
  });

  it('an untyped statement first used in a batch committed later: cast, answers as SQLite; pipelined next time', async () => {
    const answers: Record<string, unknown> = {};
    for (const [name, db] of Object.entries(dbs)) {
      const add = db.prepare<[string, number]>('INSERT INTO t (k, v) VALUES (?, ?)');
      const bumpAll = db.prepare<[string | null, string | null]>(
        'UPDATE t SET v = v + 1 WHERE (? IS NULL OR k = ?)',
      );
      const first = await batchLater(db, [
        () => add.run('a', 1).changes,
        () => add.run('b', 1).changes,
        () => bumpAll.run(null, null).changes,
        () => bumpAll.run('a', 'a').changes,
      ]);
      const before = waits.n;
      const second = await batchLater(db, [() => void bumpAll.run('b', 'b'), () => void add.run('c', 0)]);
      if (name === 'postgres') expect(waits.n - before).toBe(1);
      answers[name] = { first: shown(first), second: shown(second), rows: rows(db) };
    }
    expect(answers.postgres).toEqual(answers.sqlite);
    expect(answers.sqlite).toMatchObject({
      rows: [
        { k: 'a', v: 3 },
        { k: 'b', v: 3 },
        { k: 'c', v: 0 },
      ],
    });
  });

  it('prepared in a transaction that then fails (a unique violation): the name stays valid, on the server as here', async () => {
    const db = dbs.postgres;
    db.prepare('INSERT INTO t (k, v) VALUES (?, ?)').run('dup', 0);
    const add = db.prepare<[string, number]>('INSERT INTO t (k, v) VALUES (?, ?)');
    const bump = db.prepare<[string]>('UPDATE t SET v = v + 1 WHERE k = ?');
    const preparedBefore = serverPrepared(db);
    // bump's first use: its PREPARE succeeds; the duplicate after it undoes the transaction.
    expect(() =>
      db.transaction(() => {
        bump.run('dup');
        add.run('dup', 1);
      })(),
    ).toThrow(/duplicate key value violates unique constraint "t_pkey"/);
    const kept = serverPrepared(db);
    expect(kept.length).toBe(preparedBefore.length + 1);
    // Its next use pipelines under the name the server kept: one round trip, no new PREPARE.
    const before = waits.n;
    db.transaction(() => {
      bump.run('dup');
      add.run('x', 1);
    })();
    expect(waits.n - before).toBe(1);
    expect(serverPrepared(db)).toEqual(kept);
    expect(rows(db)).toEqual([
      { k: 'dup', v: 1 },
      { k: 'x', v: 1 },
    ]);
  });

  it('a PREPARE skipped after a failure earlier in the pipeline is forgotten; its next use prepares it under a new name', async () => {
    const db = dbs.postgres;
    const add = db.prepare<[string, number]>('INSERT INTO t (k, v) VALUES (?, ?)');
    add.run('dup', 0);
    const bump = db.prepare<[string]>('UPDATE t SET v = v + 1 WHERE k = ?');
    const preparedBefore = serverPrepared(db);
    expect(() =>
      db.transaction(() => {
        add.run('dup', 1);
        bump.run('dup');
      })(),
    ).toThrow(/duplicate key value/);
    // The transaction ran again with savepoints, where bump was never reached.
    expect(serverPrepared(db)).toEqual(preparedBefore);
    db.transaction(() => bump.run('dup'))();
    expect(serverPrepared(db).length).toBe(preparedBefore.length + 1);
    expect(rows(db)).toEqual([{ k: 'dup', v: 1 }]);
  });

  it('two group commits in one pipeline: the second uses a statement whose PREPARE the first’s failure skipped', async () => {
    const answers: Record<string, unknown> = {};
    for (const [name, db] of Object.entries(dbs)) {
      const add = db.prepare<[string, number]>('INSERT INTO t (k, v) VALUES (?, ?)');
      add.run('dup', 0);
      const bump = db.prepare<[string]>('UPDATE t SET v = v + 1 WHERE k = ?');
      // Both sent before either is answered (SQLite commits each at once).
      const first = batchLater(db, [() => add.run('dup', 1).changes, () => bump.run('dup').changes]);
      const second = batchLater(db, [() => bump.run('dup').changes, () => add.run('z', 1).changes]);
      answers[name] = { first: shown(await first), second: shown(await second), rows: rows(db) };
    }
    expect(answers.postgres).toEqual(answers.sqlite);
    expect(answers.sqlite).toEqual({
      first: [{ ok: false }, { ok: true, value: 1 }],
      second: [
        { ok: true, value: 1 },
        { ok: true, value: 1 },
      ],
      rows: [
        { k: 'dup', v: 2 },
        { k: 'z', v: 1 },
      ],
    });
  });

  it('two group commits in one pipeline: the first’s PREPARE refused, the second uses the same statement before the answer came', async () => {
    const answers: Record<string, unknown> = {};
    for (const [name, db] of Object.entries(dbs)) {
      const add = db.prepare<[string, number]>('INSERT INTO t (k, v) VALUES (?, ?)');
      const unknownColumn = () => db.prepare('UPDATE t SET nope = 1 WHERE k = ?').run('a');
      const first = batchLater(db, [() => void add.run('a', 1), unknownColumn]);
      const second = batchLater(db, [unknownColumn, () => void add.run('b', 1)]);
      const third = batchLater(db, [() => void add.run('c', 1)]);
      answers[name] = {
        first: shown(await first),
        second: shown(await second),
        third: shown(await third),
        rows: rows(db),
      };
    }
    expect(answers.postgres).toEqual(answers.sqlite);
    expect(answers.sqlite).toEqual({
      first: [{ ok: true, value: undefined }, { ok: false }],
      second: [{ ok: false }, { ok: true, value: undefined }],
      third: [{ ok: true, value: undefined }],
      rows: [
        { k: 'a', v: 1 },
        { k: 'b', v: 1 },
        { k: 'c', v: 1 },
      ],
    });
  });

  it('a nested level that throws after a statement’s first use: undone alone, its siblings commit, as on SQLite', () => {
    const answers: Record<string, unknown> = {};
    for (const [name, db] of Object.entries(dbs)) {
      const add = db.prepare<[string, number]>('INSERT INTO t (k, v) VALUES (?, ?)');
      add.run('a', 0);
      const bump = db.prepare<[string]>('UPDATE t SET v = v + 1 WHERE k = ?');
      const value = db.transaction(() => {
        add.run('b', 1);
        let caught = '';
        try {
          db.transaction(() => {
            bump.run('a');
            throw new Error('refused after its write');
          })();
        } catch (error) {
          caught = (error as Error).message;
        }
        add.run('c', 1);
        return caught;
      })();
      const again = db.transaction(() => bump.run('a').changes)();
      answers[name] = { value, again, rows: rows(db) };
    }
    expect(answers.postgres).toEqual(answers.sqlite);
    expect(answers.sqlite).toEqual({
      value: 'refused after its write',
      again: 1,
      rows: [
        { k: 'a', v: 1 },
        { k: 'b', v: 1 },
        { k: 'c', v: 1 },
      ],
    });
  });

  it('a nested level that catches a refused PREPARE and goes on, as on SQLite', () => {
    const answers: Record<string, unknown> = {};
    for (const [name, db] of Object.entries(dbs)) {
      const add = db.prepare<[string, number]>('INSERT INTO t (k, v) VALUES (?, ?)');
      const value = db.transaction(() => {
        add.run('a', 1);
        const inner = db.transaction(() => {
          add.run('b', 1);
          try {
            db.prepare('UPDATE t SET nope = 1').run();
            return 'ran';
          } catch {
            return 'refused';
          }
        })();
        add.run('c', 1);
        return inner;
      })();
      answers[name] = { value, rows: rows(db) };
    }
    expect(answers.postgres).toEqual(answers.sqlite);
    expect(answers.sqlite).toMatchObject({ value: 'refused' });
  });

  it('exec and pragma inside a pipelined transaction, after first uses: they run, the transaction commits', () => {
    const answers: Record<string, unknown> = {};
    for (const [name, db] of Object.entries(dbs)) {
      const add = db.prepare<[string, number]>('INSERT INTO t (k, v) VALUES (?, ?)');
      const bump = db.prepare<[string]>('UPDATE t SET v = v + 1 WHERE k = ?');
      const value = db.transaction(() => {
        add.run('a', 1);
        bump.run('a');
        db.exec("INSERT INTO t (k, v) VALUES ('e', 5)");
        const mode = typeof db.pragma('journal_mode', { simple: true });
        add.run('b', 2);
        db.pragma('data_version', { simple: true });
        bump.run('b');
        return [mode, bump.run('e').changes];
      })();
      answers[name] = { value, rows: rows(db) };
    }
    expect(answers.postgres).toEqual(answers.sqlite);
    expect(answers.sqlite).toEqual({
      value: ['string', 1],
      rows: [
        { k: 'a', v: 2 },
        { k: 'b', v: 3 },
        { k: 'e', v: 6 },
      ],
    });
  });
});

describe('a statement whose parameter types the server cannot infer, once known', () => {
  it('is sent cast at once, outside a transaction and in one with savepoints: its refused PREPARE is never tried again', () => {
    const answers: Record<string, unknown> = {};
    const trips: Record<string, number[]> = {};
    for (const [name, db] of Object.entries(dbs)) {
      const mine: number[] = [];
      trips[name] = mine;
      db.prepare('INSERT INTO t (k, v) VALUES (?, ?)').run('a', 1);
      const bumpAll = db.prepare<[string | null, string | null]>(
        'UPDATE t SET v = v + 1 WHERE (? IS NULL OR k = ?)',
      );
      const first = bumpAll.run(null, null).changes;
      let before = waits.n;
      const again = bumpAll.run('a', 'a').changes;
      mine.push(waits.n - before);
      // A generator as argument cannot be read twice: the transaction has savepoints from its start.
      const careful = db.transaction((keys: Iterable<string>) => {
        let n = 0;
        for (const k of keys) n += bumpAll.run(k, k).changes;
        return n;
      });
      careful(['warm']);
      before = waits.n;
      const inCareful = careful(
        (function* () {
          yield 'a';
        })(),
      );
      mine.push(waits.n - before);
      answers[name] = { first, again, inCareful, rows: rows(db) };
    }
    expect(answers.postgres).toEqual(answers.sqlite);
    expect(answers.sqlite).toEqual({ first: 1, again: 1, inCareful: 1, rows: [{ k: 'a', v: 4 }] });
    // Its execution alone; BEGIN with its savepoint, the write's savepoint, the write, COMMIT.
    expect(trips.postgres).toEqual([1, 4]);
  });
});

describe("the store's own statement whose parameter types the server cannot infer, in its group commit", () => {
  it('a run ended in a batch committed later, the first use of that statement: answers as on SQLite', async () => {
    const { openStore } = await import('../../src/store/index.js');
    const { mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { task } = await import('../store/helpers.js');
    const made = {
      sqlite: openStore(join(mkdtempSync(join(tmpdir(), 'mb-prep-')), 'state.db')),
      postgres: openStore(pg.freshDatabase()),
    };
    try {
      const answers: Record<string, unknown> = {};
      for (const [name, store] of Object.entries(made)) {
        store.runs.createRun({ id: 'r', manifestPath: '/m', manifestName: 'm', settings: {} });
        store.tasks.upsertTasks('r', [task('a')]);
        store.runs.markRunState('r', 'running');
        const ended = await store.batchLater([
          () => store.tasks.setTaskError('r', 'a', 'noted'),
          () => store.runs.markRunState('r', 'interrupted', 4).exitCode,
        ]);
        store.runs.markRunState('r', 'running');
        const again = await store.batchLater([() => store.runs.markRunState('r', 'finished', 0).state]);
        const run = store.runs.getRun('r');
        answers[name] = {
          ended: ended.map((o) => (o.ok ? o.value : (o.error as Error).message)),
          again: again.map((o) => (o.ok ? o.value : (o.error as Error).message)),
          run: { state: run?.state, exitCode: run?.exitCode },
          error: store.tasks.getTask('r', 'a')?.error,
        };
      }
      expect(answers.postgres).toEqual(answers.sqlite);
      expect(answers.sqlite).toEqual({
        ended: [undefined, 4],
        again: ['finished'],
        run: { state: 'finished', exitCode: 0 },
        error: 'noted',
      });
    } finally {
      for (const store of Object.values(made)) store.close();
    }
  });
});

describe('a piped PREPARE that waits, or whose connection goes', () => {
  it('waits past lock_timeout for a table another session holds: one line that stops the run, in the transaction or in each slot of a batch; the connection works after', async () => {
    const url = new URL(pg.freshDatabase());
    const holder = new PgDb(url.toString());
    url.searchParams.set('options', '-c lock_timeout=300ms');
    const worker = new PgDb(url.toString()) as unknown as Db;
    try {
      worker.exec('CREATE TABLE t (k TEXT PRIMARY KEY, v BIGINT NOT NULL)');
      const add = worker.prepare<[string, number]>('INSERT INTO t (k, v) VALUES (?, ?)');
      add.run('a', 1);
      const bump = worker.prepare<[string]>('UPDATE t SET v = v + 1 WHERE k = ?');
      holder.exec('BEGIN; LOCK TABLE t IN ACCESS EXCLUSIVE MODE');
      const busy =
        /^the PostgreSQL state at postgres:\/\/\S+ is busy or slow: canceling statement due to lock timeout; run again to continue$/;
      let thrown: unknown;
      try {
        // bump's PREPARE, in the pipeline, waits for the table's lock.
        worker.transaction(() => {
          bump.run('a');
          add.run('b', 1);
        })();
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(StoreError);
      expect((thrown as StoreError).message).toMatch(busy);
      expect((thrown as StoreError).exitCode).toBe(EXIT.interrupted);
      // A batch: found at its COMMIT's answer, the batch run again (as batchLater does) fails as a whole,
      // as SQLite's does when its database is locked: nothing of it kept, every caller told.
      await expect(
        batchLater(worker, [() => void bump.run('a'), () => void add.run('b', 1)]),
      ).rejects.toThrow(busy);
      holder.exec('ROLLBACK');
      expect(rows(worker)).toEqual([{ k: 'a', v: 1 }]);
      const after = await batchLater(worker, [() => bump.run('a').changes, () => add.run('b', 1).changes]);
      expect(shown(after)).toEqual([
        { ok: true, value: 1 },
        { ok: true, value: 1 },
      ]);
      expect(rows(worker)).toEqual([
        { k: 'a', v: 2 },
        { k: 'b', v: 1 },
      ]);
    } finally {
      worker.close();
      holder.close();
    }
  });

  /** A database through a proxy, with the statements of the scenario; bump is never used before. */
  async function throughProxy() {
    const proxy = await spawnTcpProxy({ port: Number(new URL(pg.url('postgres')).port) });
    const db = new PgDb(proxy.through(pg.freshDatabase())) as unknown as Db;
    db.exec('CREATE TABLE t (k TEXT PRIMARY KEY, v BIGINT NOT NULL)');
    const add = db.prepare<[string, number]>('INSERT INTO t (k, v) VALUES (?, ?)');
    add.run('a', 1);
    const bump = db.prepare<[string]>('UPDATE t SET v = v + 1 WHERE k = ?');
    const one = db.prepare<[string]>('SELECT k, v FROM t WHERE k = ?');
    // The server's answer to SAVEPOINT sp0 (CommandComplete 'C', length 14, "SAVEPOINT\0") and then to
    // the first statement's PREPARE (ParseComplete '1', length 4): what follows never comes.
    const cut = () => proxy.cutAfter(Buffer.from('430000000e53415645504f494e54003100000004', 'hex'));
    return { proxy, db, add, bump, one, cut };
  }

  it('the connection cut just after a piped PREPARE was answered, mid-transaction: it throws that the state went away, nothing kept; the next transaction prepares afresh', async () => {
    const { proxy, db, add, bump, one, cut } = await throughProxy();
    try {
      await cut();
      expect(() =>
        db.transaction(() => {
          bump.run('a');
          // A read: its Sync sends what came before it and waits, in the open transaction.
          return one.get('a');
        })(),
      ).toThrow(/^the PostgreSQL state at postgres:\/\/\S+ went away/);
      expect(rows(db)).toEqual([{ k: 'a', v: 1 }]);
      expect((await proxy.counts()).accepted).toBe(2);
      const value = db.transaction(() => {
        bump.run('a');
        add.run('b', 1);
        return one.get('a');
      })();
      expect(value).toEqual({ k: 'a', v: 2 });
      // The new connection's statements: the rows' read, bump, add, one, and this question itself.
      expect(serverPrepared(db)).toEqual(['s1', 's2', 's3', 's4', 's5']);
    } finally {
      db.close();
      await proxy.close();
    }
  });

  it('the connection cut just after a piped PREPARE was answered, in a batch committed later: the caller is told it went away; the next batch works', async () => {
    const { proxy, db, add, bump, cut } = await throughProxy();
    try {
      await cut();
      await expect(batchLater(db, [() => void bump.run('a'), () => void add.run('b', 1)])).rejects.toThrow(
        /^the PostgreSQL state at postgres:\/\/\S+ went away: /,
      );
      // Its COMMIT had gone with the rest before the cut: whether it committed was the server's to say, and
      // the run stops for the user to run it again (the next run reads what is there).
      const before = rows(db);
      const after = await batchLater(db, [() => bump.run('a').changes, () => add.run('c', 1).changes]);
      expect(shown(after)).toEqual([
        { ok: true, value: 1 },
        { ok: true, value: 1 },
      ]);
      expect(rows(db)).toHaveLength(before.length + 1);
    } finally {
      db.close();
      await proxy.close();
    }
  });
  it('a worker that hangs after a read mid-transaction: the server ends its session at idle_in_transaction_session_timeout, its row lock freed; it is told the state went away', () => {
    const url = new URL(pg.freshDatabase());
    const other = new PgDb(url.toString()) as unknown as Db;
    url.searchParams.set('options', '-c idle_in_transaction_session_timeout=300');
    const worker = new PgDb(url.toString()) as unknown as Db;
    try {
      worker.exec('CREATE TABLE t (k TEXT PRIMARY KEY, v BIGINT NOT NULL)');
      worker.prepare('INSERT INTO t (k, v) VALUES (?, ?)').run('a', 1);
      const bump = worker.prepare<[string]>('UPDATE t SET v = v + 1 WHERE k = ?');
      const one = worker.prepare<[string]>('SELECT k, v FROM t WHERE k = ?');
      let lockFreed: unknown;
      let thrown: unknown;
      try {
        worker.transaction(() => {
          // First uses, prepared in the pipeline; the write locks a's row.
          bump.run('a');
          one.get('a');
          // Frozen inside the transaction, longer than the server allows a session idle in one.
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
          other.exec("SET lock_timeout = '2s'");
          lockFreed = other.prepare('UPDATE t SET v = 10 WHERE k = ?').run('a').changes;
          bump.run('a');
          return one.get('a');
        })();
      } catch (error) {
        thrown = error;
      }
      expect(lockFreed).toBe(1);
      expect(thrown).toBeInstanceOf(StoreError);
      expect((thrown as StoreError).message).toMatch(/^the PostgreSQL state at postgres:\/\/\S+ went away/);
      expect((thrown as StoreError).exitCode).toBe(EXIT.interrupted);
      expect(rows(worker)).toEqual([{ k: 'a', v: 10 }]);
    } finally {
      worker.close();
      other.close();
    }
  });
});
