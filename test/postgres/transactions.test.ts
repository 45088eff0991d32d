// The PostgreSQL state's transactions mean what SQLite's mean, without savepoints where nothing fails:
// a body that goes on after a failed write keeps the rest of its writes, a nested level that throws is
// undone alone, and a transaction the server undid for a deadlock with another session runs again and
// commits once (never when its arguments can be read only once).
import { spawn } from 'node:child_process';
import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { StoreError } from '../../src/store/errors.js';
import { PgDb } from '../../src/store/pg/db.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';

vi.setConfig({ testTimeout: 60_000 });

const pg: Postgres = await startPostgres();
afterAll(() => pg.stop());

let db: PgDb;
let url: string;
beforeEach(() => {
  url = pg.freshDatabase();
  db = new PgDb(url);
  db.exec('CREATE TABLE t (k TEXT PRIMARY KEY, v BIGINT NOT NULL)');
  return () => db.close();
});

const rows = () => db.prepare('SELECT k, v FROM t ORDER BY k').all();
const insert = () => db.prepare('INSERT INTO t (k, v) VALUES (?, ?)');

describe('transactions on a PostgreSQL state', () => {
  it('a body that catches a failed write and goes on keeps its other writes, as SQLite does', () => {
    const add = insert();
    const result = db.transaction(() => {
      add.run('a', 1);
      try {
        add.run('a', 2);
      } catch (error) {
        expect((error as { code?: string }).code).toBe('SQLITE_CONSTRAINT_PRIMARYKEY');
      }
      add.run('b', 3);
      return rows();
    })();
    expect(result).toEqual([
      { k: 'a', v: 1 },
      { k: 'b', v: 3 },
    ]);
    expect(rows()).toEqual(result);
  });

  it('a nested level that throws after writing is undone alone; its siblings commit', () => {
    const add = insert();
    const level = db.transaction((k: string, fail: boolean) => {
      add.run(k, 1);
      if (fail) throw new Error(`refused ${k}`);
    });
    const outcomes = db.transaction(() =>
      (
        [
          ['a', false],
          ['b', true],
          ['c', false],
        ] as const
      ).map(([k, fail]) => {
        try {
          level(k, fail);
          return 'ok';
        } catch (error) {
          return (error as Error).message;
        }
      }),
    )();
    expect(outcomes).toEqual(['ok', 'refused b', 'ok']);
    expect(rows()).toEqual([
      { k: 'a', v: 1 },
      { k: 'c', v: 1 },
    ]);
  });

  it('a write error that ends the transaction leaves nothing behind', () => {
    const add = insert();
    expect(() =>
      db.transaction(() => {
        add.run('a', 1);
        add.run('a', 2);
      })(),
    ).toThrow(/duplicate key/);
    expect(rows()).toEqual([]);
  });

  /**
   * Another session takes row `b`, then waits until a session of this database waits for a lock, and
   * asks for row `a`. This one, once the other waits, takes `a` and asks for `b`: it waits first, so when
   * its deadlock_timeout (1 s) ends the circle is closed and the server undoes this one; the other then
   * finishes and commits.
   */
  async function deadlockAgainstAnother(run: () => unknown): Promise<unknown> {
    db.prepare('INSERT INTO t (k, v) VALUES (?, ?), (?, ?)').run('a', 0, 'b', 0);
    const other = spawn(
      'psql',
      [
        url.replace(/\?.*$/, ''),
        '-v',
        'ON_ERROR_STOP=1',
        '-c',
        // Row a is asked for only once this test's session waits for row b, and this session looks for
        // a deadlock only after 30 s: the test's session finds the cycle and is undone, however slow the
        // machine.
        `SET deadlock_timeout = '30s'; BEGIN; UPDATE t SET v = v + 10 WHERE k = 'b';
         DO $$ BEGIN
           WHILE NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid <> pg_backend_pid()
               AND datname = current_database() AND wait_event_type = 'Lock') LOOP
             PERFORM pg_sleep(0.01);
           END LOOP;
         END $$;
         UPDATE t SET v = v + 10 WHERE k = 'a'; COMMIT;`,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let err = '';
    other.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString('utf8');
    });
    const done = new Promise<number | null>((resolve) => other.on('exit', resolve));
    const sleeping = db
      .prepare(
        `SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND wait_event = 'PgSleep'`,
      )
      .pluck();
    for (let waited = 0; sleeping.get() === 0; waited += 10) {
      if (waited > 20_000) throw new Error(`the other session never held row b: ${err}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    try {
      return run();
    } finally {
      expect(await done, err).toBe(0);
    }
  }

  /**
   * Waits (the body is synchronous) until the other session's commit shows. The server lets whoever asks
   * first take a row whose locker was undone, even before a session that waited for it: a run again
   * sooner than a busy machine wakes the other would take row `a` first and make a second deadlock.
   */
  function untilOtherCommitted(): void {
    const a = db.prepare(`SELECT v FROM t WHERE k = 'a'`).pluck();
    for (let waited = 0; Number(a.get()) < 10; waited += 5) {
      if (waited > 20_000) throw new Error('the other session never committed');
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
    }
  }

  // Prepared before (`warm`), its statements go in a pipeline: the first update is drained before the
  // wait by reading a count, as the lock order of the scenario needs.
  it.each([
    ['one statement at a time', false],
    ['its statements in a pipeline', true],
  ])('a transaction the server undid for a deadlock runs again and commits once (%s)', async (_, warm) => {
    const bump = db.prepare('UPDATE t SET v = v + 1 WHERE k = ?');
    if (warm) bump.run('none');
    let runs = 0;
    const result = await deadlockAgainstAnother(() =>
      db.transaction((first: string, second: string) => {
        runs += 1;
        if (runs === 1) {
          bump.run(first);
          expect(bump.run('none').changes).toBe(0);
        } else {
          untilOtherCommitted();
          bump.run(first);
        }
        bump.run(second);
        return runs;
      })('a', 'b'),
    );
    // Each session's increments once: the undone run's left nothing, and nothing committed twice.
    expect(rows()).toEqual([
      { k: 'a', v: 11 },
      { k: 'b', v: 11 },
    ]);
    expect(result).toBe(2);
  });

  it('one whose arguments can be read only once is not run again: one line, run again to continue', async () => {
    const bump = db.prepare('UPDATE t SET v = v + 1 WHERE k = ?');
    const keys = function* () {
      yield 'a';
      yield 'b';
    };
    let thrown: unknown;
    await deadlockAgainstAnother(() => {
      try {
        db.transaction((ks: Iterable<string>) => {
          for (const k of ks) bump.run(k);
        })(keys());
      } catch (error) {
        thrown = error;
      }
    });
    expect(thrown).toBeInstanceOf(StoreError);
    expect((thrown as Error).message).toMatch(
      /^the PostgreSQL state at postgres:\/\/postgres@127\.0\.0\.1:\d+\/\w+ kept undoing a transaction for a conflict with another worker \(ERROR: {2}deadlock detected\. DETAIL: .*\) 1 time\(s\); run again to continue$/,
    );
    expect(rows()).toEqual([
      { k: 'a', v: 10 },
      { k: 'b', v: 10 },
    ]);
  });
});
