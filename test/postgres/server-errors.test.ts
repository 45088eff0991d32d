// What a PostgreSQL server answers to a healthy program that it cannot serve (a role without rights, a
// read-only database, no connection slot left, a database that does not exist, a refused login, a full
// disk) reaches the user as one line naming the state (password hidden) and what to do, with the exit
// code of its kind: never exit 70 and a stack. Each case is made on a real server where one can make it;
// the server's resource errors that no test can provoke safely (a full disk, no memory) are raised by a
// trigger on that real server, so libpq, the store and the CLI meet the very SQLSTATE the server sends.

import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { exitOf } from '../../src/cli/errors.js';
import { EXIT } from '../../src/exit-codes.js';
import { openStore, StoreError } from '../../src/store/index.js';
import { PgDb } from '../../src/store/pg/db.js';
import { connectError } from '../../src/store/pg/errors.js';
import { cli } from '../helpers/cli.js';
import { type Postgres, startPostgres } from '../helpers/postgres.js';
import { FAST_POLLS, images, makeRunEnv, type RunEnv, SANDBOX_KEY } from '../helpers/run-env.js';

const pg: Postgres = await startPostgres();
const admin = new PgDb(pg.url('postgres'));
afterAll(() => {
  admin.close();
  pg.stop();
});

const PASSWORD = 'pw-SENTINEL-77c2';
let env: RunEnv;
beforeEach(async () => {
  env = await makeRunEnv({ balance: 1000 });
});
afterEach(async () => {
  await env.close();
});

/** The database's name in a URL that `freshDatabase` made. */
function databaseOf(url: string): string {
  return new URL(url).pathname.slice(1);
}

/** The URL of `database` as `role` (with a password when given), mediabatch's own options kept. */
function as(role: string, url: string, password?: string): string {
  const u = new URL(url);
  u.username = role;
  if (password !== undefined) u.password = password;
  return u.toString();
}

function shownOf(url: string): string {
  const u = new URL(url);
  if (u.password !== '') u.password = '***';
  u.search = '';
  return u.toString();
}

async function runOn(state: string) {
  const file = await env.manifest({ name: 'pgerr', tasks: images(2) });
  return cli(['--state', state, 'run', file, '--yes', '--allow-local-output', '--no-probe'], {
    env: {
      MEDIABATCH_API_KEY: SANDBOX_KEY,
      MEDIABATCH_BASE_URL: env.sandbox.baseUrl,
      MEDIABATCH_POLL_SCALE: FAST_POLLS,
    },
    cwd: env.dir,
    now: () => new Date(),
  });
}

/** One line on stderr, the expected code, nothing sent, no password, no stack. */
function expectOneLine(r: { code: number; stdout: string; stderr: string }, code: number, line: string) {
  expect(r.stderr).toBe(`mediabatch: ${line}\n`);
  expect(r.code).toBe(code);
  expect(`${r.stdout}${r.stderr}`).not.toContain(PASSWORD);
  expect(env.state().jobs).toHaveLength(0);
}

describe('a PostgreSQL server that refuses to serve the state', () => {
  it('names a role without the rights to write, and what to grant it', async () => {
    const url = pg.freshDatabase();
    admin.exec(`DROP ROLE IF EXISTS reader; CREATE ROLE reader LOGIN`);
    // It can read every table (a reporting role), write none.
    const db = new PgDb(url);
    db.exec('GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader');
    db.close();
    const state = as('reader', url, PASSWORD);
    const r = await runOn(state);
    expect(r.stderr).toMatch(
      new RegExp(
        `^mediabatch: the PostgreSQL state at ${escapeRe(shownOf(state))} refuses role "reader" what mediabatch needs \\(permission denied for table \\w+\\): grant it SELECT, INSERT, UPDATE and DELETE on mediabatch's tables`,
      ),
    );
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.code).toBe(EXIT.invalid);
    expect(`${r.stdout}${r.stderr}`).not.toContain(PASSWORD);
    expect(env.state().jobs).toHaveLength(0);

    // An empty database where the role may not create the tables (PostgreSQL 15's public schema).
    admin.exec('DROP DATABASE IF EXISTS bare');
    admin.exec('CREATE DATABASE bare');
    const bare = as('reader', pg.url('bare'), PASSWORD);
    expectOneLine(
      await runOn(bare),
      EXIT.invalid,
      `the PostgreSQL state at ${shownOf(bare)} refuses role "reader" to create mediabatch's tables (permission denied for schema public): GRANT CREATE ON SCHEMA public TO "reader", or open the state once as a role that may create them`,
    );
  });

  it('says a read-only database (a replica, default_transaction_read_only) and where to point instead', async () => {
    const url = pg.freshDatabase();
    admin.exec(`ALTER DATABASE ${databaseOf(url)} SET default_transaction_read_only = on`);
    const r = await runOn(url);
    expectOneLine(
      r,
      EXIT.invalid,
      `the PostgreSQL state at ${shownOf(url)} is read-only (cannot execute INSERT in a read-only transaction): a replica, or default_transaction_read_only is on for its database or role; point --state at the primary`,
    );
  });

  it('says that no connection is left, and exits 4: running again later goes on', async () => {
    const url = pg.freshDatabase();
    admin.exec(`DROP ROLE IF EXISTS crowded; CREATE ROLE crowded LOGIN CONNECTION LIMIT 0`);
    const state = as('crowded', url);
    const r = await runOn(state);
    expectOneLine(
      r,
      EXIT.interrupted,
      `the PostgreSQL state at ${shownOf(state)} takes no more connections (too many connections for role "crowded"): run fewer workers, put a pooler in front (docs/fleet.md) or raise max_connections, then run again to continue`,
    );
  });

  it('says a database that does not exist, and how to create it', async () => {
    const url = pg.url('no_such_db');
    const r = await runOn(url);
    expectOneLine(
      r,
      EXIT.invalid,
      `the PostgreSQL state at ${url} does not exist (database "no_such_db" does not exist): create that database (createdb, or CREATE DATABASE), or check --state or MEDIABATCH_STATE_URL`,
    );
  });

  it('says a refused login without printing the password', async () => {
    const url = pg.freshDatabase();
    admin.exec(`DROP ROLE IF EXISTS locked; CREATE ROLE locked NOLOGIN`);
    const nologin = as('locked', url, PASSWORD);
    expectOneLine(
      await runOn(nologin),
      EXIT.invalid,
      `the PostgreSQL state at ${shownOf(nologin)} refuses the login of role "locked" (role "locked" is not permitted to log in): check the user of --state or MEDIABATCH_STATE_URL, and the server's pg_hba.conf`,
    );

    // A role that must give a password (the test server trusts every other one), given a wrong one.
    admin.exec(`DROP ROLE IF EXISTS keyed; CREATE ROLE keyed LOGIN PASSWORD 'the-right-one'`);
    const hba = admin.prepare('SHOW hba_file').pluck().get() as string;
    const before = readFileSync(hba, 'utf8');
    writeFileSync(hba, `host all keyed 127.0.0.1/32 scram-sha-256\n${before}`);
    admin.exec('SELECT pg_reload_conf()');
    try {
      const wrong = as('keyed', url, PASSWORD);
      expectOneLine(
        await runOn(wrong),
        EXIT.invalid,
        `the PostgreSQL state at ${shownOf(wrong)} refuses the login of role "keyed" (password authentication failed for user "keyed"): check the user and password of --state or MEDIABATCH_STATE_URL`,
      );
    } finally {
      writeFileSync(hba, before);
      admin.exec('SELECT pg_reload_conf()');
    }
  });

  it('says a search_path naming a schema that does not exist, and how to make it', async () => {
    const url = `${pg.url('postgres')}?options=${encodeURIComponent('-c search_path=nosuch')}`;
    expectOneLine(
      await runOn(url),
      EXIT.invalid,
      `the PostgreSQL state at ${shownOf(url)} has no schema to keep mediabatch's tables in (no schema has been selected to create in): create the schema the URL's search_path names (CREATE SCHEMA), or fix its options`,
    );
  });

  it('says a server still starting up as a wait, not a wrong URL (libpq gives only its text there)', () => {
    const error = connectError(
      'connection to server at "127.0.0.1", port 5432 failed: FATAL:  the database system is starting up',
      { name: 'postgres://mb@db/mb', role: 'mb' },
    );
    expect(error?.exitCode).toBe(EXIT.interrupted);
    expect(error?.message).toBe(
      'the PostgreSQL state at postgres://mb@db/mb does not take connections yet (the database system is starting up): it is starting, stopping or recovering; run again in a moment',
    );
    expect(connectError('connection refused', { name: 'x', role: 'mb' })).toBeUndefined();
  });

  // The server's own SQLSTATE, raised where the store writes a run: what a full disk or a server out of
  // memory answers at that moment.
  it.each([
    ['53100', 'could not extend file "base/1/2": No space left on device', EXIT.interrupted, 'full'],
    ['53200', 'out of memory', EXIT.interrupted, 'server'],
    ['53400', 'temporary file size exceeds temp_file_limit (1024kB)', EXIT.interrupted, 'server'],
    ['55006', 'database "x" is being accessed by other users', EXIT.interrupted, 'server'],
    ['57P04', 'database "x" was dropped', EXIT.invalid, 'path'],
    ['58030', 'could not read block 0 in file "base/1/2": Input/output error', EXIT.interrupted, 'server'],
    ['XX001', 'invalid page in block 0 of relation base/1/2', EXIT.invalid, 'corrupt'],
    ['XX002', 'index "tasks_pkey" contains unexpected zero page', EXIT.invalid, 'corrupt'],
  ])('turns SQLSTATE %s (%s) into one line with exit %i', (sqlState, text, code, kind) => {
    const url = pg.freshDatabase();
    const db = new PgDb(url);
    db.exec(`CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION USING ERRCODE = '${sqlState}', MESSAGE = '${text.replaceAll("'", "''")}'; END $$;
CREATE TRIGGER refuse BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION refuse()`);
    db.close();
    const store = openStore(url);
    try {
      let thrown: unknown;
      try {
        store.runs.createRun({ id: 'r', manifestPath: '/m.yaml', manifestName: 'm', settings: {} });
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(StoreError);
      expect((thrown as StoreError).kind).toBe(kind);
      const exit = exitOf(thrown, env.dir);
      expect(exit?.exitCode).toBe(code);
      expect(exit?.message).toMatch(
        new RegExp(`^the PostgreSQL state at ${escapeRe(shownOf(url))} .*\\(${escapeRe(text)}\\): `),
      );
      // The store goes on after the refusal: the connection is fine, only that statement failed.
      expect(store.runs.getRun('r')).toBeUndefined();
    } finally {
      store.close();
    }
  });
});

function escapeRe(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}
