// Every statement of the store prepares on PostgreSQL with the types the server infers from where each
// parameter is used. A statement it cannot type is sent with types guessed from the values bound
// (castText in src/store/pg/db.ts), and a value cannot say what type its column is: a null bound there
// is a text, refused by a number's column; and a statement that fails for any other reason of type
// (text compared with a number) is broken on PostgreSQL whatever is bound. Checked on a real server,
// the statements of the store as it prepares them (at open, and those of `view` and the account, on
// first use).
import { afterAll, expect, it, vi } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { PgDb } from '../../src/store/pg/db.js';
import { pgOverride } from '../../src/store/pg/overrides.js';
import { toPostgres } from '../../src/store/pg/sql.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';

vi.setConfig({ testTimeout: 120_000 });

const pg: Postgres = await startPostgres();
afterAll(() => pg.stop());

it('types every statement of the store from where its parameters are used, not from the values bound', () => {
  const url = pg.freshDatabase();
  const prepare = vi.spyOn(PgDb.prototype, 'prepare');
  const store = openStore(url);
  void store.viewReads;
  // The account's reads are prepared before they look for the run (which is not there).
  try {
    store.accountFacts('none');
  } catch {}
  try {
    store.accountSumsByScan('none');
  } catch {}
  const sources = new Set(prepare.mock.calls.map(([source]) => source));
  prepare.mockRestore();
  store.close();
  // The store's own statements, not a session setting (SHOW, SET) that is never prepared.
  const statements = [...sources]
    .map((source) => toPostgres(pgOverride(source)).text)
    .filter((text) => /^\s*(SELECT|WITH|INSERT|UPDATE|DELETE)\b/i.test(text));
  expect(statements.length).toBeGreaterThan(150);

  const raw = new PgDb(url);
  const untyped: string[] = [];
  statements.forEach((text, i) => {
    try {
      raw.exec(`PREPARE typed_${i} AS ${text}`);
    } catch (error) {
      untyped.push(`${(error as Error).message.slice(0, 160)}\n  ${text.replace(/\s+/g, ' ').slice(0, 200)}`);
    }
  });
  raw.close();
  expect(untyped).toEqual([]);
});
