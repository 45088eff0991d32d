// What PostgreSQL answers that a healthy program still meets (a full disk, too many connections, a role
// without rights, a replica, a wrong password) turned into one line that says what to do, with the exit
// code of its kind. The one place that reads SQLSTATEs for the user; statements that fail where the store
// did not expect it stay PgErrors (a bug, exit 70). Timeouts and a server that went away are db.ts's.

import { userInfo } from 'node:os';
import { StoreError, type StoreErrorKind } from '../errors.js';

/** Where the answer came from: the state's name (URL without password) and the role it logs in as. */
export interface ServerErrorContext {
  name: string;
  role: string;
}

/** The role a URL logs in as: its user, else libpq's defaults (PGUSER, then the system user). */
export function roleOf(url: string): string {
  try {
    const user = decodeURIComponent(new URL(url).username);
    if (user !== '') return user;
  } catch {
    // An unreadable URL fails to connect on its own; the default role is still the best guess.
  }
  return process.env['PGUSER'] || userInfo().username;
}

interface Rule {
  kind: StoreErrorKind;
  /** The line after "the PostgreSQL state at <url>": what happened, what to do. */
  line(detail: string, c: ServerErrorContext): string;
}

const RUN_AGAIN = 'then run again to continue';

const RULES: Readonly<Record<string, Rule>> = {
  '53100': {
    kind: 'full',
    line: (d) => `has no room left on the server's disk (${d}): free space there, ${RUN_AGAIN}`,
  },
  '53200': {
    kind: 'server',
    line: (d) => `ran out of memory on the server (${d}): give it memory or fewer workers, ${RUN_AGAIN}`,
  },
  '53300': {
    kind: 'server',
    line: (d) =>
      `takes no more connections (${d}): run fewer workers, put a pooler in front (docs/fleet.md) or raise max_connections, ${RUN_AGAIN}`,
  },
  '53400': {
    kind: 'server',
    line: (d) => `reached a limit of the server's configuration (${d}): raise that setting, ${RUN_AGAIN}`,
  },
  '55006': {
    kind: 'server',
    line: (d) => `is in use by another session that holds what this one needs (${d}): ${RUN_AGAIN}`,
  },
  '57P03': {
    kind: 'server',
    line: (d) =>
      `does not take connections yet (${d}): it is starting, stopping or recovering; run again in a moment`,
  },
  '58030': {
    kind: 'server',
    line: (d) => `could not read or write its own files (${d}): see the server's log, ${RUN_AGAIN}`,
  },
  XX001: {
    kind: 'corrupt',
    line: (d) => `holds damaged data (${d}): see the server's log; restore a backup`,
  },
  XX002: {
    kind: 'corrupt',
    line: (d) => `has a damaged index (${d}): REINDEX it (see the server's log), ${RUN_AGAIN}`,
  },
  '3F000': {
    kind: 'path',
    line: (d) =>
      `has no schema to keep mediabatch's tables in (${d}): create the schema the URL's search_path names (CREATE SCHEMA), or fix its options`,
  },
  '57P04': {
    kind: 'path',
    line: (d) => `was dropped while in use (${d}): check --state or MEDIABATCH_STATE_URL`,
  },
  '3D000': {
    kind: 'path',
    line: (d) =>
      `does not exist (${d}): create that database (createdb, or CREATE DATABASE), or check --state or MEDIABATCH_STATE_URL`,
  },
  '42501': {
    kind: 'permission',
    line: (d, c) => {
      const schema = /for schema (\S+)/i.exec(d)?.[1];
      return schema !== undefined
        ? `refuses role "${c.role}" to create mediabatch's tables (${d}): GRANT CREATE ON SCHEMA ${schema} TO "${c.role}", or open the state once as a role that may create them`
        : `refuses role "${c.role}" what mediabatch needs (${d}): grant it SELECT, INSERT, UPDATE and DELETE on mediabatch's tables and USAGE on their sequences (GRANT … ON ALL TABLES IN SCHEMA …), or use the role that owns them`;
    },
  },
  '25006': {
    kind: 'permission',
    line: (d) =>
      `is read-only (${d}): a replica, or default_transaction_read_only is on for its database or role; point --state at the primary`,
  },
  '28P01': {
    kind: 'permission',
    line: (d, c) =>
      `refuses the login of role "${c.role}" (${d}): check the user and password of --state or MEDIABATCH_STATE_URL`,
  },
  '28000': {
    kind: 'permission',
    line: (d, c) =>
      `refuses the login of role "${c.role}" (${d}): check the user of --state or MEDIABATCH_STATE_URL, and the server's pg_hba.conf`,
  },
};

/** The server's message without its severity: `ERROR:  x` → `x`. */
function detailOf(message: string): string {
  return message
    .replace(/^(connection to server .*? failed:\s*)?(ERROR|FATAL|PANIC):\s*/i, '')
    .replace(/\s+/g, ' ')
    .trim();
}

/** The StoreError for a SQLSTATE a healthy program still meets; undefined for any other. */
export function serverError(
  sqlState: string,
  message: string,
  c: ServerErrorContext,
): StoreError | undefined {
  const rule = RULES[sqlState];
  if (rule === undefined) return undefined;
  return new StoreError(`the PostgreSQL state at ${c.name} ${rule.line(detailOf(message), c)}`, {
    kind: rule.kind,
    file: c.name,
  });
}

/**
 * libpq gives no SQLSTATE for a connection it could not open, only the server's text: the classes that
 * matter at a connection's start are told apart by it (the server's messages in English, its default).
 */
const AT_CONNECT: ReadonlyArray<[RegExp, string]> = [
  [/password authentication failed|SCRAM authentication|password must be given/i, '28P01'],
  [
    /no pg_hba\.conf entry|is not permitted to log in|role ".*" does not exist|authentication failed/i,
    '28000',
  ],
  [/database ".*" does not exist/i, '3D000'],
  [/too many clients|too many connections|remaining connection slots are reserved/i, '53300'],
  [
    /the database system is (starting up|shutting down|in recovery mode|not yet accepting connections)/i,
    '57P03',
  ],
  [/out of memory/i, '53200'],
];

/** The StoreError for a connection the server refused for one of those reasons; undefined otherwise. */
export function connectError(message: string, c: ServerErrorContext): StoreError | undefined {
  const match = AT_CONNECT.find(([pattern]) => pattern.test(message));
  return match === undefined ? undefined : serverError(match[1], message, c);
}
