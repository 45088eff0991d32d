// A real PostgreSQL for the tests: Debian's `postgresql` package (initdb, pg_ctl), a cluster in a temp
// folder on a free loopback port, started once per test file that asks for it and stopped after it.
// Each caller of `freshDatabase` gets its own empty database, so tests never see each other's rows.
// Under vitest the temp folder, and so the cluster, is in memory where there is room
// (test/helpers/memory-tmp.ts): the contract suite copies a database per test. The bench's is on disk.

import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { openStore, type Store, StoreError } from '../../src/store/index.js';
import { PgDb } from '../../src/store/pg/db.js';

/** Where Debian (and Ubuntu) put each major version's server programs; the newest found is used. */
const DEBIAN_ROOT = '/usr/lib/postgresql';

/** The folder holding initdb and pg_ctl: $MEDIABATCH_PG_BIN, else the newest Debian version. */
export function postgresBinaries(): string {
  const fromEnv = process.env.MEDIABATCH_PG_BIN;
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  const versions = existsSync(DEBIAN_ROOT)
    ? readdirSync(DEBIAN_ROOT)
        .filter((v) => existsSync(join(DEBIAN_ROOT, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  const newest = versions[0];
  if (newest === undefined) {
    throw new Error(
      `no PostgreSQL server found under ${DEBIAN_ROOT}: install it (apt-get install -y postgresql), as .ci/run does, or set MEDIABATCH_PG_BIN`,
    );
  }
  return join(DEBIAN_ROOT, newest, 'bin');
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address !== null ? resolve(address.port) : reject(),
      );
    });
  });
}

export interface Postgres {
  /** postgres://postgres@127.0.0.1:<port>/<database> */
  url(database: string): string;
  readonly port: number;
  /** A new empty database; returns its URL. */
  freshDatabase(): string;
  /** Stops the server, keeping its files (for tests of PostgreSQL going away). */
  pause(): void;
  /** Starts a paused server again on the same port. */
  resume(): void;
  /** Stops the server and removes its folder. */
  stop(): void;
}

/** initdb refuses root: as root the cluster is owned and run by the `postgres` user Debian creates. */
function runAs(): string[] {
  return userInfo().uid === 0 ? ['runuser', '-u', 'postgres', '--'] : [];
}

function exec(bin: string, program: string, args: string[]): string {
  const [first, ...rest] = [...runAs(), join(bin, program), ...args];
  return execFileSync(first as string, rest, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/**
 * Starts a throwaway cluster. fsync is off: a test's database need not survive the machine. Commits are
 * asynchronous unless `durableCommits`: a test that stops the server with `pause()` (an immediate stop,
 * as a crash) needs every acknowledged commit to survive it, as on a server with the default settings.
 */
export async function startPostgres(opts: { durableCommits?: boolean } = {}): Promise<Postgres> {
  const bin = postgresBinaries();
  const dir = mkdtempSync(join(tmpdir(), 'mediabatch-pg-'));
  if (userInfo().uid === 0) {
    const { uid, gid } = statSync('/var/lib/postgresql');
    chownSync(dir, uid, gid);
  }
  const data = join(dir, 'data');
  exec(bin, 'initdb', [
    '-D',
    data,
    '-A',
    'trust',
    '-U',
    'postgres',
    '-E',
    'UTF8',
    '--no-sync',
    '--no-instructions',
  ]);
  const port = await freePort();
  const options = [
    `-p ${port}`,
    '-c listen_addresses=127.0.0.1',
    `-c unix_socket_directories=${dir}`,
    '-c fsync=off',
    `-c synchronous_commit=${opts.durableCommits === true ? 'on' : 'off'}`,
    '-c full_page_writes=off',
    '-c max_connections=200',
  ].join(' ');
  const log = join(dir, 'log');
  writeFileSync(log, '');
  if (userInfo().uid === 0) {
    const { uid, gid } = statSync(dir);
    chownSync(log, uid, gid);
  }
  const start = (): void => {
    exec(bin, 'pg_ctl', ['-D', data, '-o', options, '-l', log, '-w', '-t', '30', 'start']);
  };
  const halt = (): void => {
    exec(bin, 'pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
  };
  start();
  let running = true;
  let count = 0;
  let copyClause: string | undefined;
  let admin: PgDb | undefined;
  const url = (database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`;
  return {
    port,
    url,
    freshDatabase() {
      // One connection kept for these statements: a psql process each cost about 70 ms a test database.
      const psql = (sql: string) => {
        admin ??= new PgDb(url('postgres'));
        try {
          admin.exec(sql);
        } catch (error) {
          // The server was paused and resumed since: the connection is new the second time.
          if (!(error instanceof StoreError)) throw error;
          admin.exec(sql);
        }
      };
      if (copyClause === undefined) {
        // The schema once, in a template each test's database is copied from (migrations run once a file).
        psql('CREATE DATABASE mediabatch_template');
        openStore(url('mediabatch_template')).close();
        // Nothing connects to it again: a connection to a template (autovacuum's too) makes each copy
        // wait for it to leave, 100 ms at a time.
        psql('ALTER DATABASE mediabatch_template WITH ALLOW_CONNECTIONS false');
        // Since PostgreSQL 15 a copy writes every page of the template to the WAL unless told to copy
        // its files (and checkpoint), which is about half the time for a database this small.
        const version = Number((admin as PgDb).prepare('SHOW server_version_num').pluck().get());
        copyClause = version >= 150000 ? ' STRATEGY FILE_COPY' : '';
      }
      count += 1;
      const name = `t${count}_${process.pid}`;
      psql(`CREATE DATABASE ${name} TEMPLATE mediabatch_template${copyClause}`);
      // A statement waiting on a lock blocks the whole test process (the client is synchronous): 5 s, then
      // it fails with its reason instead of hanging the file.
      return `${url(name)}?options=${encodeURIComponent('-c statement_timeout=5000 -c client_min_messages=warning')}`;
    },
    pause() {
      if (running) halt();
      running = false;
    },
    resume() {
      if (!running) start();
      running = true;
    },
    stop() {
      admin?.close();
      admin = undefined;
      try {
        if (running) halt();
      } finally {
        running = false;
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** `read` on a store opened on `url` for it alone, closed after. */
export function withStoreAt<T>(url: string, read: (store: Store) => T): T {
  const store = openStore(url);
  try {
    return read(store);
  } finally {
    store.close();
  }
}

/** Resolves once `check` holds (looked at every 20 ms); rejects naming `what` after `ms`. */
export async function until(check: () => boolean, what: string, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
