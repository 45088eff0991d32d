// The rewriting of the store's SQLite statements for PostgreSQL, and the connection's defaults: pure
// functions, as tables. (Whether the rewritten statements do the same is the contract suite's work:
// test/store/postgres.test.ts.)

import { describe, expect, it } from 'vitest';
import { redactUrl, stateLocation } from '../../src/store/location.js';
import { type BulkInsert, bulkInsertParams, bulkInsertText } from '../../src/store/pg/bulk.js';
import { connectionString, hangLimitMs } from '../../src/store/pg/db.js';
import { pgOverride } from '../../src/store/pg/overrides.js';
import { toPostgres } from '../../src/store/pg/sql.js';
import { REQUEST_TEXT_FIELDS, TASK_PAGE_SQL } from '../../src/store/report-reads.js';

describe('toPostgres', () => {
  it.each([
    ['SELECT * FROM t WHERE a = ? AND b = ?', 'SELECT * FROM t WHERE a = $1 AND b = $2'],
    ["SELECT '?' || x FROM t WHERE y = ?", "SELECT '?' || x FROM t WHERE y = $1"],
    ['UPDATE t SET a = :a WHERE id = :id AND a <> :a', 'UPDATE t SET a = $1 WHERE id = $2 AND a <> $1'],
    ["SELECT x::text FROM t WHERE s = 'a:b'", "SELECT x::text FROM t WHERE s = 'a:b'"],
    ['SELECT 1 FROM t WHERE a IS NOT ?', 'SELECT 1 FROM t WHERE a IS DISTINCT FROM $1'],
    ["SELECT 1 FROM t WHERE v IS 'approved'", "SELECT 1 FROM t WHERE v IS NOT DISTINCT FROM 'approved'"],
    [
      'SELECT 1 FROM t WHERE a IS NOT NULL AND b IS NULL',
      'SELECT 1 FROM t WHERE a IS NOT NULL AND b IS NULL',
    ],
    ['SELECT max(0, a - b), max(a) FROM t', 'SELECT GREATEST(0, a - b), max(a) FROM t'],
    ['SELECT min(a, min(b, c)) FROM t', 'SELECT LEAST(a, LEAST(b, c)) FROM t'],
    ["SELECT json_object('a', x, 'b', y) FROM t", "SELECT (json_build_object('a', x, 'b', y)::text) FROM t"],
    ['INSERT OR IGNORE INTO t (a) VALUES (?)', 'INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING'],
    [
      'INSERT OR IGNORE INTO t (a) VALUES (?) RETURNING a',
      'INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING RETURNING a',
    ],
    ['SELECT a FROM t INDEXED BY t_by_a WHERE +run_id = ?', 'SELECT a FROM t WHERE run_id = $1'],
    ['SELECT CAST(x AS INTEGER) FROM t', 'SELECT CAST(x AS BIGINT) FROM t'],
    ['SELECT task_id AS taskId, n AS total FROM t', 'SELECT task_id AS "taskId", n AS total FROM t'],
    [
      'SELECT 1 FROM t WHERE rowid IN (SELECT value FROM json_each(?))',
      'SELECT 1 FROM t WHERE rowid IN (SELECT value::bigint FROM json_each($1))',
    ],
    ['SELECT n + 1, a +b FROM t', 'SELECT n + 1, a +b FROM t'],
  ])('%s', (sqlite, pg) => {
    expect(toPostgres(sqlite).text).toBe(pg);
  });

  it('counts positional parameters, names named ones in order, and tells writes from reads', () => {
    expect(toPostgres('SELECT ? , ?')).toMatchObject({ positional: 2, names: [], writes: false });
    expect(toPostgres('UPDATE t SET a = @a, b = $b WHERE c = :a')).toMatchObject({
      positional: 0,
      names: ['a', 'b'],
      writes: true,
    });
  });

  it('refuses a statement that mixes ? with named parameters', () => {
    expect(() => toPostgres('SELECT ? WHERE a = :a')).toThrow('a statement mixes ? and named parameters');
  });
});

describe('the connection', () => {
  it('adds timeouts and keepalives the URL does not set, and keeps those it does', () => {
    const conninfo = new URL(connectionString('postgres://u:p@db:5432/mb?connect_timeout=3'));
    expect(conninfo.searchParams.get('connect_timeout')).toBe('3');
    expect(conninfo.searchParams.get('keepalives_idle')).toBe('10');
    expect(conninfo.searchParams.get('tcp_user_timeout')).toBe('30000');
    expect(conninfo.searchParams.get('options')).toContain('statement_timeout=60000');
    expect(connectionString('postgres://db/mb')).not.toContain('+');
  });

  it("keeps mediabatch's session settings beside a URL's own options, unless the URL sets them", () => {
    const options = (url: string) => new URL(connectionString(url)).searchParams.get('options');
    expect(options('postgres://db/mb?options=-csearch_path%3Dtenant')).toBe(
      '-csearch_path=tenant -c statement_timeout=60000 -c idle_in_transaction_session_timeout=10000 -c TimeZone=UTC -c client_min_messages=warning -c jit=off',
    );
    expect(options('postgres://db/mb?options=--statement_timeout%3D5s%20-c%20TimeZone%3DUTC')).toBe(
      '--statement_timeout=5s -c TimeZone=UTC -c idle_in_transaction_session_timeout=10000 -c client_min_messages=warning -c jit=off',
    );
  });

  it('bounds a wait inside libpq by the longest the server or libpq may take, plus a margin', () => {
    expect(hangLimitMs(connectionString('postgres://db/mb'))).toEqual({
      limitMs: 65_000,
      statementMs: 60_000,
    });
    const short = 'postgres://db/mb?connect_timeout=1&options=-c%20statement_timeout%3D2s';
    expect(hangLimitMs(connectionString(short))).toEqual({ limitMs: 7000, statementMs: 2000 });
    // A connect_timeout longer than the statements' is what a connection may take to open.
    const slowConnect = 'postgres://db/mb?connect_timeout=20&options=-c%20statement_timeout%3D1000';
    expect(hangLimitMs(connectionString(slowConnect)).limitMs).toBe(25_000);
    // statement_timeout turned off: nothing bounds a statement, and nothing is watched.
    const off = 'postgres://db/mb?options=-c%20statement_timeout%3D0';
    expect(hangLimitMs(connectionString(off)).limitMs).toBe(0);
  });

  it('names a state without its password or query, and leaves a URL unresolved', () => {
    expect(redactUrl('postgres://mb:s3cret@db:5432/mb?sslmode=require')).toBe('postgres://mb:***@db:5432/mb');
    expect(redactUrl('postgresql://db/mb')).toBe('postgresql://db/mb');
    expect(stateLocation('/work', 'postgres://db/mb')).toBe('postgres://db/mb');
    expect(stateLocation('/work', 'state/x.db')).toBe('/work/state/x.db');
  });
});

describe('a multi-row INSERT of alike rows', () => {
  const types = new Map([
    ['run_id', 'text'],
    ['seq', 'bigint'],
    ['state', 'text'],
    ['cost', 'double precision'],
  ]);
  const rows =
    "INSERT INTO tasks (run_id, seq, state, cost) VALUES (?, ?, 'pending', ?), (?, ?, 'pending', ?)";

  it('is sent as one array per column: as many parameters whatever the number of rows', () => {
    const { bulk, positional } = toPostgres(rows);
    expect(positional).toBe(6);
    expect(bulk).toBeDefined();
    expect(bulkInsertText(bulk as BulkInsert, types)).toBe(
      "INSERT INTO tasks (run_id, seq, state, cost) SELECT u.c0, u.c1, 'pending', u.c2 FROM unnest($1::text[], $2::bigint[], $3::double precision[]) AS u(c0, c1, c2)",
    );
    expect(bulkInsertParams(bulk as BulkInsert, ['r "1"', 1, 0.5, 'r\\2', 2, null])).toEqual([
      '{"r \\"1\\"","r\\\\2"}',
      '{1,2}',
      '{0.5,NULL}',
    ]);
  });

  it.each([
    ['one row', 'INSERT INTO t (a, b) VALUES (?, ?)'],
    ['rows that differ', "INSERT INTO t (a, b) VALUES (?, 'x'), (?, 'y')"],
    ['a parameter inside an expression', 'INSERT INTO t (a, b) VALUES (?, ? + 1), (?, ? + 1)'],
    ['ON CONFLICT after the rows', 'INSERT INTO t (a) VALUES (?), (?) ON CONFLICT DO NOTHING'],
    ['INSERT OR IGNORE', 'INSERT OR IGNORE INTO t (a) VALUES (?), (?)'],
    ['named parameters', 'INSERT INTO t (a) VALUES (:a), (:a)'],
  ])('is left as it is with %s', (_, sql) => {
    expect(toPostgres(sql).bulk).toBeUndefined();
  });
});

describe('token amounts in micro-tokens on PostgreSQL', () => {
  it("are rounded by micro() (SQLite's round(): ties away from zero), never by round() of a double (ties to even)", () => {
    expect(
      pgOverride(
        'SELECT CAST(round(t.est_max * 1000000) AS INTEGER) AS price, CAST(round(est_min * 1000000) AS INTEGER) FROM tasks t',
      ),
    ).toBe('SELECT micro(t.est_max) AS price, micro(est_min) FROM tasks t');
    // A ledger's tokens, a refund's taken from a charge, a parameter: the same rule.
    expect(
      pgOverride(
        `SELECT total(CASE kind WHEN 'charge' THEN CAST(round(l.tokens * 1000000) AS INTEGER) ELSE -CAST(round(l.tokens * 1000000) AS INTEGER) END), CAST(round(? * 1000000) AS INTEGER) FROM ledger l`,
      ),
    ).toBe(
      `SELECT total(CASE kind WHEN 'charge' THEN micro(l.tokens) ELSE -micro(l.tokens) END), micro(?) FROM ledger l`,
    );
    // Another scale is not money: left as written.
    const ms = 'SELECT CAST(round(x * 86400000) AS INTEGER) FROM t';
    expect(pgOverride(ms)).toBe(ms);
  });
});

describe("the report's page of tasks on PostgreSQL", () => {
  it('reads each body once (json_doc), whatever its fields, none of them through json_valid', () => {
    const page = pgOverride(TASK_PAGE_SQL);
    expect(page).not.toContain('json_valid');
    expect(page.match(/json_doc\(/g)).toHaveLength(1);
    for (const field of REQUEST_TEXT_FIELDS) expect(page).toContain(`b.doc ->> '${field}' END AS ${field}`);
  });
});
