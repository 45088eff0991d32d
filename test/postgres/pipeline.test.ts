// A PostgreSQL transaction without savepoints sends its statements in libpq's pipeline mode: a write
// waits for the server only when its outcome is read, a read only when its rows are, and BEGIN goes
// with the first statement. These tests hold the pipeline to SQLite's meaning (each scenario runs on an
// in-memory SQLite database too, and both must answer alike) and count the round trips it saves.
import Database from 'better-sqlite3';
import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { readSoon, runExpectingChange } from '../../src/store/db.js';
import { PgDb } from '../../src/store/pg/db.js';
import { onLibpqCalls, waits as waitsForServer } from '../helpers/libpq-calls.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';
import { spawnTcpProxy } from '../helpers/tcp-proxy.js';

vi.setConfig({ testTimeout: 60_000 });

/** Counts the calls into libpq that wait for the server; installed before any connection opens. */
const waits = { n: 0 };
onLibpqCalls((method) => {
  if (waitsForServer(method)) waits.n += 1;
});

const pg: Postgres = await startPostgres();
afterAll(() => pg.stop());

type Db = Database.Database;
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

/** The statements of a scenario, prepared and used once outside any transaction (then they pipeline). */
function statements(db: Db) {
  const s = {
    add: db.prepare<[string, number]>('INSERT INTO t (k, v) VALUES (?, ?)'),
    bump: db.prepare<{ k: string; from: number }>('UPDATE t SET v = v + 1 WHERE k = :k AND v = :from'),
    one: db.prepare<[string], { k: string; v: number }>('SELECT k, v FROM t WHERE k = ?'),
    all: db.prepare<[], { k: string; v: number }>('SELECT k, v FROM t ORDER BY k'),
    drop: db.prepare<[string]>('DELETE FROM t WHERE k = ?'),
  };
  s.add.run('warm', 0);
  s.bump.run({ k: 'warm', from: 0 });
  s.one.get('warm');
  s.all.all();
  s.drop.run('warm');
  return s;
}

/** The scenario's answer (or its error's code and message) and the rows it left, on both backends. */
function onBoth(scenario: (db: Db, s: ReturnType<typeof statements>) => unknown) {
  return Object.fromEntries(
    Object.entries(dbs).map(([name, db]) => {
      const s = statements(db);
      let answer: unknown;
      try {
        answer = scenario(db, s);
      } catch (error) {
        answer = { threw: (error as { code?: string }).code ?? (error as Error).message };
      }
      return [name, { answer, rows: s.all.all() }];
    }),
  ) as Record<'sqlite' | 'postgres', { answer: unknown; rows: unknown[] }>;
}

function refused(): never {
  throw new Error('refused: nothing to move');
}

describe('a PostgreSQL transaction in pipeline mode', () => {
  it('sends its writes and its COMMIT in one round trip, and a read mid-way in one more', () => {
    const s = statements(dbs.postgres);
    const writes = dbs.postgres.transaction(() => {
      for (let i = 0; i < 10; i++) s.add.run(`k${i}`, i);
    });
    let before = waits.n;
    writes();
    expect(waits.n - before).toBe(1);
    const withRead = dbs.postgres.transaction(() => {
      s.add.run('x', 1);
      const row = s.one.get('k3');
      s.add.run('y', 2);
      return row;
    });
    before = waits.n;
    expect(withRead()).toEqual({ k: 'k3', v: 3 });
    expect(waits.n - before).toBe(2);
    expect(s.all.all()).toHaveLength(12);
  });

  it('prepares the statements first used inside it in the pipeline too: still one round trip', () => {
    const db = dbs.postgres;
    const add = db.prepare<[string, number]>('INSERT INTO t (k, v) VALUES (?, ?)');
    const bump = db.prepare<[string]>('UPDATE t SET v = v + 1 WHERE k = ?');
    const before = waits.n;
    db.transaction(() => {
      for (let i = 0; i < 5; i++) add.run(`n${i}`, i);
      bump.run('n1');
    })();
    expect(waits.n - before).toBe(1);
    expect(db.prepare('SELECT k, v FROM t ORDER BY k').all()).toEqual([
      { k: 'n0', v: 0 },
      { k: 'n1', v: 2 },
      { k: 'n2', v: 2 },
      { k: 'n3', v: 3 },
      { k: 'n4', v: 4 },
    ]);
  });

  it('a statement whose parameter types the server cannot infer, first used in the pipeline, is cast and answers as SQLite', () => {
    const both = onBoth((db) => {
      const bumpAll = db.prepare<[string | null, string | null]>(
        'UPDATE t SET v = v + 1 WHERE (? IS NULL OR k = ?)',
      );
      const add = db.prepare<[string, number]>('INSERT INTO t (k, v) VALUES (?, ?)');
      const first = db.transaction(() => {
        add.run('a', 1);
        add.run('b', 1);
        return [bumpAll.run(null, null).changes, bumpAll.run('a', 'a').changes];
      })();
      const before = waits.n;
      const second = db.transaction(() => bumpAll.run('b', 'b'))();
      const trips = waits.n - before;
      return [...first, second.changes, trips];
    });
    expect(both.postgres.rows).toEqual(both.sqlite.rows);
    // Known to need casts after its first use: the next transaction pipelines the cast form at once.
    expect(both.postgres.answer).toEqual([2, 1, 1, 1]);
    expect(both.sqlite.answer).toEqual([2, 1, 1, 0]);
  });

  it("answers a write's changes exactly, read at once or after later statements", () => {
    const both = onBoth((db, s) =>
      db.transaction(() => {
        s.add.run('a', 1);
        const hit = s.bump.run({ k: 'a', from: 1 });
        const miss = s.bump.run({ k: 'a', from: 1 });
        s.add.run('b', 2);
        return [miss.changes, hit.changes, s.drop.run('zz').changes];
      })(),
    );
    expect(both.postgres).toEqual(both.sqlite);
    expect(both.postgres.answer).toEqual([0, 1, 0]);
  });

  it('a failed write found only at COMMIT: the transaction throws the write’s own error and keeps nothing', () => {
    const both = onBoth((db, s) =>
      db.transaction(() => {
        s.add.run('a', 1);
        s.add.run('a', 2);
        s.add.run('b', 3);
      })(),
    );
    expect(both.postgres).toEqual(both.sqlite);
    expect(both.postgres).toEqual({ answer: { threw: 'SQLITE_CONSTRAINT_PRIMARYKEY' }, rows: [] });
  });

  it('a failed write whose body catches it and goes on keeps the other writes, as SQLite does', () => {
    const both = onBoth((db, s) =>
      db.transaction(() => {
        s.add.run('a', 1);
        try {
          s.add.run('a', 2);
        } catch (error) {
          s.add.run('caught', 0);
          return (error as { code?: string }).code;
        } finally {
          s.add.run('b', 3);
        }
        return 'not thrown';
      })(),
    );
    expect(both.postgres).toEqual(both.sqlite);
    expect(both.postgres.answer).toBe('SQLITE_CONSTRAINT_PRIMARYKEY');
  });

  it('nested levels with pipelined writes: one that throws is undone alone, its siblings commit', () => {
    const both = onBoth((db, s) => {
      const level = db.transaction((k: string, fail: boolean) => {
        s.add.run(k, 1);
        s.bump.run({ k, from: 1 });
        if (fail) throw new Error(`refused ${k}`);
      });
      return db.transaction(() =>
        ['a', 'b', 'c'].map((k) => {
          try {
            level(k, k === 'b');
            return 'ok';
          } catch (error) {
            return (error as Error).message;
          }
        }),
      )();
    });
    expect(both.postgres).toEqual(both.sqlite);
    expect(both.postgres.answer).toEqual(['ok', 'refused b', 'ok']);
  });

  it('a conditional write that changes no row refuses in the store’s own words, and nothing is kept', () => {
    const both = onBoth((db, s) =>
      db.transaction(() => {
        s.add.run('a', 1);
        runExpectingChange(s.bump, { k: 'a', from: 1 }, refused);
        runExpectingChange(s.bump, { k: 'a', from: 1 }, refused);
        s.add.run('b', 2);
      })(),
    );
    expect(both.postgres).toEqual(both.sqlite);
    expect(both.postgres).toEqual({ answer: { threw: 'refused: nothing to move' }, rows: [] });
  });

  it('a conditional write that changes its row costs no round trip of its own', () => {
    const s = statements(dbs.postgres);
    s.add.run('a', 1);
    const move = dbs.postgres.transaction(() => {
      runExpectingChange(s.bump, { k: 'a', from: 1 }, refused);
      s.add.run('b', 2);
    });
    move();
    const before = waits.n;
    dbs.postgres.transaction(() => {
      runExpectingChange(s.bump, { k: 'a', from: 2 }, refused);
      s.add.run('c', 3);
    })();
    expect(waits.n - before).toBe(1);
    expect(s.all.all()).toEqual([
      { k: 'a', v: 3 },
      { k: 'b', v: 2 },
      { k: 'c', v: 3 },
    ]);
  });

  it('a body that catches the refusal of a conditional write goes on, as SQLite does', () => {
    const both = onBoth((db, s) =>
      db.transaction(() => {
        s.add.run('a', 1);
        let said = '';
        try {
          runExpectingChange(s.bump, { k: 'a', from: 7 }, refused);
        } catch (error) {
          said = (error as Error).message;
        }
        s.add.run('b', 2);
        return said;
      })(),
    );
    expect(both.postgres).toEqual(both.sqlite);
    expect(both.postgres.answer).toBe('refused: nothing to move');
  });

  it('a read asked for soon gives its row after the commit, from the commit’s round trip', () => {
    const s = statements(dbs.postgres);
    s.add.run('a', 1);
    let before = 0;
    const soon = dbs.postgres.transaction(() => {
      before = waits.n;
      s.bump.run({ k: 'a', from: 1 });
      return readSoon(s.one, 'a');
    })();
    expect(soon()).toEqual({ k: 'a', v: 2 });
    expect(waits.n - before).toBe(1);
    const both = onBoth((db, t) => {
      t.add.run('z', 1);
      return db.transaction(() => {
        const first = readSoon(t.one, 'z');
        t.bump.run({ k: 'z', from: 1 });
        const second = readSoon(t.one, 'z');
        return [second(), first(), readSoon(t.one, 'none')()];
      })();
    });
    expect(both.postgres.answer).toEqual(both.sqlite.answer);
    expect(both.postgres.answer).toEqual([{ k: 'z', v: 2 }, { k: 'z', v: 1 }, undefined]);
  });
});

describe("a PostgreSQL transaction whose COMMIT is answered later (the runner's group commit)", () => {
  const pgDb = () => dbs.postgres as unknown as PgDb;

  it('commits; the value is there at once, the answer comes without a wait of this process', async () => {
    const s = statements(dbs.postgres);
    const before = waits.n;
    const { value, committed } = pgDb().transactionLater(() =>
      dbs.postgres.transaction(() => {
        s.add.run('a', 1);
        s.add.run('b', 2);
        return 'done';
      })(),
    );
    // BEGIN, the writes, COMMIT and its Sync went out; nothing was waited for.
    expect(waits.n - before).toBe(1);
    expect(value).toBe('done');
    expect(await committed).toBe(true);
    expect(s.all.all()).toEqual([
      { k: 'a', v: 1 },
      { k: 'b', v: 2 },
    ]);
  });

  it('a statement used before the answer came reads it first, and sees the commit', async () => {
    const s = statements(dbs.postgres);
    const { committed } = pgDb().transactionLater(() =>
      dbs.postgres.transaction(() => {
        s.add.run('a', 1);
      })(),
    );
    expect(s.one.get('a')).toEqual({ k: 'a', v: 1 });
    expect(await committed).toBe(true);
  });

  it('a failure found in the answer: nothing kept, the caller told to run it again', async () => {
    const s = statements(dbs.postgres);
    s.add.run('a', 0);
    // Its check prepared once, by a transaction that commits.
    dbs.postgres.transaction(() => runExpectingChange(s.bump, { k: 'a', from: 0 }, refused))();
    const { committed } = pgDb().transactionLater(() =>
      dbs.postgres.transaction(() => {
        s.add.run('b', 1);
        runExpectingChange(s.bump, { k: 'a', from: 5 }, refused);
        s.add.run('c', 2);
      })(),
    );
    expect(await committed).toBe(false);
    expect(s.all.all()).toEqual([{ k: 'a', v: 1 }]);
    // The connection is usable at once: the failed transaction was rolled back.
    dbs.postgres.transaction(() => s.add.run('d', 3))();
    expect(s.all.all()).toHaveLength(2);
  });

  it('the server ending the session before it answered: the caller gets the line that says so', async () => {
    const s = statements(dbs.postgres);
    const killer = new PgDb(pg.url('postgres'));
    try {
      const pid = dbs.postgres.prepare('SELECT pg_backend_pid() AS pid').get() as { pid: number };
      const { committed } = pgDb().transactionLater(() =>
        dbs.postgres.transaction(() => {
          s.add.run('a', 1);
          s.one.get('a');
          killer.prepare('SELECT pg_terminate_backend(?)').get(pid.pid);
          s.add.run('b', 2);
        })(),
      );
      await expect(committed).rejects.toThrow(/^the PostgreSQL state at postgres:\/\/\S+ went away: /);
    } finally {
      killer.close();
    }
  });
});

describe('transactions whose COMMITs are answered later, one after another in one pipeline', () => {
  const pgDb = () => dbs.postgres as unknown as PgDb;
  const later = (body: () => void) =>
    pgDb().transactionLater(() => dbs.postgres.transaction(body)()).committed;
  /** The statements, with the server's check of a conditional write prepared by a transaction that commits. */
  const warm = () => {
    const s = statements(dbs.postgres);
    s.add.run('w', 0);
    dbs.postgres.transaction(() => runExpectingChange(s.bump, { k: 'w', from: 0 }, refused))();
    s.drop.run('w');
    return s;
  };

  it('the next one is sent without waiting for the answer of the one before; both commit in order', async () => {
    const s = warm();
    const before = waits.n;
    const first = later(() => {
      s.add.run('a', 1);
      s.add.run('b', 1);
    });
    const second = later(() => {
      runExpectingChange(s.bump, { k: 'a', from: 1 }, refused);
      s.add.run('c', 1);
    });
    // Each sent its statements and a Sync; neither waited for the server, nor read the first's answer.
    expect(waits.n - before).toBe(2);
    let firstTold = false;
    void first.then(() => {
      firstTold = true;
    });
    await Promise.resolve();
    await Promise.resolve();
    expect(firstTold).toBe(false);
    expect(await first).toBe(true);
    expect(await second).toBe(true);
    expect(s.all.all()).toEqual([
      { k: 'a', v: 2 },
      { k: 'b', v: 1 },
      { k: 'c', v: 1 },
    ]);
  });

  it('a read after them waits for both answers and sees both', async () => {
    const s = warm();
    const first = later(() => s.add.run('a', 1));
    const second = later(() => s.add.run('b', 2));
    expect(s.all.all()).toEqual([
      { k: 'a', v: 1 },
      { k: 'b', v: 2 },
    ]);
    expect([await first, await second]).toEqual([true, true]);
  });

  it('the connection lost after a COMMIT was answered and before its Sync: each caller is told it went away', async () => {
    const proxy = await spawnTcpProxy({ port: Number(new URL(pg.url('postgres')).port) });
    const db = new PgDb(proxy.through(pg.freshDatabase())) as unknown as Db;
    try {
      db.exec('CREATE TABLE t (k TEXT PRIMARY KEY, v BIGINT NOT NULL)');
      const s = statements(db);
      const pgDb = db as unknown as PgDb;
      // The server's CommandComplete for COMMIT ('C', length 11, "COMMIT\0"): its ReadyForQuery never comes.
      await proxy.cutAfter(Buffer.from('430000000b434f4d4d495400', 'hex'));
      const first = pgDb.transactionLater(() => db.transaction(() => s.add.run('a', 1))()).committed;
      const second = pgDb.transactionLater(() => db.transaction(() => s.add.run('b', 2))()).committed;
      const gone = /^the PostgreSQL state at postgres:\/\/\S+ went away: /;
      await expect(first).rejects.toThrow(gone);
      await expect(second).rejects.toThrow(gone);
    } finally {
      db.close();
      await proxy.close();
    }
  });

  it('one that failed: it is told so, the one sent after it in its aborted block is told so too, nothing of either is kept', async () => {
    const s = warm();
    s.add.run('a', 0);
    const first = later(() => {
      s.add.run('b', 1);
      runExpectingChange(s.bump, { k: 'a', from: 5 }, refused);
    });
    const second = later(() => s.add.run('c', 2));
    expect(await first).toBe(false);
    expect(await second).toBe(false);
    expect(s.all.all()).toEqual([{ k: 'a', v: 0 }]);
    // No transaction is left open: the next one commits.
    expect(await later(() => s.add.run('d', 3))).toBe(true);
    expect(s.all.all()).toHaveLength(2);
  });

  it('one that failed, then a transaction that reads: the read runs again with savepoints and answers as SQLite would', async () => {
    const s = warm();
    s.add.run('a', 0);
    const first = later(() => runExpectingChange(s.bump, { k: 'a', from: 5 }, refused));
    const read = dbs.postgres.transaction(() => {
      s.add.run('b', 1);
      return s.one.get('b');
    })();
    expect(read).toEqual({ k: 'b', v: 1 });
    expect(await first).toBe(false);
    expect(s.all.all()).toEqual([
      { k: 'a', v: 0 },
      { k: 'b', v: 1 },
    ]);
  });
});

describe("the store's group commit on PostgreSQL (batchLater)", () => {
  it('gives each write its outcome after the commit, a refused one in its slot, as batch() does', async () => {
    const { openStore } = await import('../../src/store/index.js');
    const store = openStore(pg.freshDatabase());
    try {
      store.runs.createRun({ id: 'r', manifestPath: '/m', manifestName: 'm', settings: {} });
      const results = await store.batchLater([
        () => store.runs.getRun('r')?.id,
        () => {
          throw new Error('refused in its slot');
        },
        () => 'last',
      ]);
      expect(results).toEqual([
        { ok: true, value: 'r' },
        { ok: false, error: new Error('refused in its slot') },
        { ok: true, value: 'last' },
      ]);
    } finally {
      store.close();
    }
  });
});

describe("a submission's intent in the store's group commit on PostgreSQL", () => {
  /** Run `r` with a budget of 17 tokens and tasks a–g of 3 tokens each, on SQLite and on PostgreSQL. */
  async function stores() {
    const { openStore } = await import('../../src/store/index.js');
    const { mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { task } = await import('../store/helpers.js');
    const made = {
      sqlite: openStore(join(mkdtempSync(join(tmpdir(), 'mb-pipe-')), 'state.db')),
      postgres: openStore(pg.freshDatabase()),
    };
    for (const store of Object.values(made)) {
      store.runs.createRun({ id: 'r', manifestPath: '/m', manifestName: 'm', settings: {} });
      store.reservations.setBudget('r', 17_000_000);
      store.tasks.upsertTasks(
        'r',
        [...'abcdefg'].map((id) => task(id)),
      );
    }
    return made;
  }

  const outcome = (r: { ok: boolean; value?: unknown; error?: unknown }) =>
    r.ok ? { ok: true } : { ok: false, error: (r.error as Error).message };

  it('reserves without waiting for the money figures, and refuses over budget in the words SQLite uses', async () => {
    const made = await stores();
    try {
      const answers: Record<string, unknown> = {};
      for (const [name, store] of Object.entries(made)) {
        // The first intents prepare the statements: the batch measured below sends no PREPARE.
        for (const id of 'afg')
          await store.batchLater([() => store.submissions.recordSubmitIntentSoon('r', id)]);
        const before = waits.n;
        const two = await store.batchLater([
          () => store.submissions.recordSubmitIntentSoon('r', 'b'),
          () => store.submissions.recordSubmitIntentSoon('r', 'c'),
        ]);
        const waited = waits.n - before;
        // 15 of 17 held: d's 3 more is refused, the batch's other write kept.
        const refusedOne = await store.batchLater([
          () => store.submissions.recordSubmitIntentSoon('r', 'd'),
          () => store.tasks.setTaskError('r', 'e', 'noted'),
        ]);
        answers[name] = {
          two: two.map(outcome),
          refusedOne: refusedOne.map(outcome),
          figures: store.reservations.figures('r'),
          held: [...'abcdfg'].map((id) => store.reservations.heldFor('r', id)),
          e: store.tasks.getTask('r', 'e')?.error,
        };
        // Two intents, their reservations and attempts, and the COMMIT: sent without a wait.
        if (name === 'postgres') expect(waited).toBe(1);
      }
      expect(answers.postgres).toEqual(answers.sqlite);
      expect(answers.sqlite).toMatchObject({
        refusedOne: [
          {
            ok: false,
            error:
              'd may cost up to 3 tokens and the budget of 17 tokens leaves 2 tokens (0 tokens spent, 15 tokens reserved for tasks asked for, in flight or in doubt)',
          },
          { ok: true },
        ],
        held: [3_000_000, 3_000_000, 3_000_000, 0, 3_000_000, 3_000_000],
        e: 'noted',
      });
    } finally {
      for (const store of Object.values(made)) store.close();
    }
  });
});
