// A PostgreSQL connection that answers the store as better-sqlite3 does: prepare(sql) → run/get/all/
// iterate, pluck and raw, transaction(fn) with immediate/deferred, all synchronous. The store's SQL is
// rewritten once per statement (sql.ts) and prepared on the server at its first use.

import { MediabatchError } from '../../errors.js';
import { fmtRate } from '../../util/numbers.js';
import { StoreError } from '../errors.js';
import { redactUrl } from '../location.js';
import { bulkInsertParams, bulkInsertText } from './bulk.js';
import { connectError, roleOf, type ServerErrorContext, serverError } from './errors.js';
import { finish, keepFailed, type Libpq, newLibpq, watched } from './libpq.js';
import { pgOverride } from './overrides.js';
import { type PgStatementText, toPostgres } from './sql.js';
import { durationMs, WATCH_MARGIN_MS, type Watch, watch } from './watchdog.js';

/** One value bound to a parameter, as the store passes them (better-sqlite3's kinds). */
type Bindable = string | number | bigint | boolean | null | undefined;
type Row = Record<string, unknown>;

/** PostgreSQL's type ids of the numbers and booleans; every other type is read as text. */
const NUMBER_TYPES = new Set([20, 21, 23, 26, 700, 701, 1700]);
const BOOL_TYPE = 16;

/**
 * SQLSTATEs of a transaction the server chose to undo so that another could go on: a deadlock between
 * two workers' row locks (40P01), or a serialization failure (40001). Nothing of it was kept; it is run
 * again from its start, a few times, after a short random wait.
 */
const CONFLICT = new Set(['40P01', '40001']);

/**
 * How long a COMMIT sent by transactionLater may go unanswered before this process waits for it (under
 * the watchdog, as every wait is): its answer normally wakes the event loop long before.
 */
const OUTSTANDING_MS = 1000;

/** How often a transaction undone by a conflict is run again before the run stops on it. */
const CONFLICT_TRIES = 5;

/** Waits `ms` milliseconds without returning to the event loop (the store is synchronous throughout). */
function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Whether a transaction's arguments can be given to its body a second time: an iterator (a generator of
 * rows) is read once, so a body given one is never run again.
 */
function rerunnable(args: readonly unknown[]): boolean {
  return args.every(
    (a) => typeof a !== 'object' || a === null || typeof (a as { next?: unknown }).next !== 'function',
  );
}

/**
 * SQLSTATEs of a statement the server gave up on: it ran past statement_timeout or waited past
 * lock_timeout (a lock held by another session, or a server too slow). The connection is fine; the
 * run stops and is run again, as when the server went away.
 */
const TIMED_OUT = new Set(['57014', '55P03']);

/**
 * SQLSTATEs of the server ending the session: an administrator's command, a shutdown or crash, or a
 * transaction left idle past idle_in_transaction_session_timeout (or a session past idle_session_timeout).
 */
const CONNECTION_ENDED = new Set(['57P01', '57P02', '57P03', '57P05', '25P03']);

/**
 * The server's refusal to run a statement prepared before its tables' columns changed (a newer mediabatch
 * migrated the schema during a rolling upgrade). Nothing of the statement ran.
 */
function isStalePlan(sqlState: string, message: string): boolean {
  return sqlState === '0A000' && message.includes('cached plan must not change result type');
}

/** SQLSTATEs of parameter types PostgreSQL could not infer (or inferred two of): bound again with explicit casts. */
const UNTYPED = new Set(['42P18', '42P08', '42725', '42883', '42804']);

/** What the store's callers read from SQLite errors (`code`), for PostgreSQL's SQLSTATE. */
function sqliteCode(sqlState: string, constraint: string | undefined): string {
  if (sqlState === '23505') {
    return constraint?.endsWith('_pkey') === true
      ? 'SQLITE_CONSTRAINT_PRIMARYKEY'
      : 'SQLITE_CONSTRAINT_UNIQUE';
  }
  if (sqlState === '23503') return 'SQLITE_CONSTRAINT_FOREIGNKEY';
  if (sqlState === '23514') return 'SQLITE_CONSTRAINT_CHECK';
  if (sqlState === '23502') return 'SQLITE_CONSTRAINT_NOTNULL';
  return `PG_${sqlState}`;
}

/**
 * An error of PostgreSQL, with the code SQLite would have given (`code`) and its own (`sqlState`). One that
 * reaches the CLI is a statement the store did not expect to fail: a bug (exit 70), as a SqliteError is.
 */
export class PgError extends MediabatchError {
  override name = 'PgError';
  readonly code: string;
  readonly sqlState: string;
  constructor(message: string, sqlState: string, constraint: string | undefined) {
    super(message);
    this.sqlState = sqlState;
    this.code = sqliteCode(sqlState, constraint);
  }
}

/** libpq's options that keep a worker from waiting forever on a server or a network that went away. */
const DEFAULT_OPTIONS: Record<string, string> = {
  connect_timeout: '10',
  keepalives: '1',
  keepalives_idle: '10',
  keepalives_interval: '5',
  keepalives_count: '3',
  tcp_user_timeout: '30000',
  application_name: 'mediabatch',
};

/**
 * The server's settings for each session, sent in libpq's `options`; a URL's own `options` keeps them
 * for what it does not set. The store's transactions are short (no transaction spans an await), so one
 * left idle is a worker that hangs or died, and it holds row locks other workers wait on (a run's
 * money, a task): the server ends it after 10 s.
 */
const DEFAULT_SETTINGS: Record<string, string> = {
  statement_timeout: '60000',
  idle_in_transaction_session_timeout: '10000',
  TimeZone: 'UTC',
  client_min_messages: 'warning',
  // The store's statements are small; a few are estimated dear on a big run (a report's pass over every
  // task), and compiling them cost the server more than running them: a second for a 2,000-task report.
  jit: 'off',
};

/** Whether libpq's `options` (`-c name=value`, `-cname=value` or `--name=value`) set `name`. */
function setsSetting(options: string, name: string): boolean {
  return new RegExp(`(?:-c\\s*|--)${name}=`, 'i').test(options);
}

/** The value `options` gives a setting (the last one wins, as in PostgreSQL). */
function settingOf(options: string, name: string): string | undefined {
  const all = [...options.matchAll(new RegExp(`(?:-c\\s*|--)${name}=(\\S+)`, 'gi'))];
  return all.at(-1)?.[1];
}

/**
 * A reader that a person waits on (`view`) gives up on a server it cannot reach sooner: every request of
 * the page waits for the attempt, and the page says the server is away rather than hanging.
 */
const READER_OPTIONS: Record<string, string> = { connect_timeout: '3' };

/** The URL with mediabatch's defaults added where the user set none. */
export function connectionString(url: string, defaults: Record<string, string> = {}): string {
  const parsed = new URL(url);
  for (const [key, value] of Object.entries({ ...DEFAULT_OPTIONS, ...defaults })) {
    if (!parsed.searchParams.has(key)) parsed.searchParams.set(key, value);
  }
  const own = parsed.searchParams.get('options') ?? '';
  const added = Object.entries(DEFAULT_SETTINGS)
    .filter(([name]) => !setsSetting(own, name))
    .map(([name, value]) => `-c ${name}=${value}`);
  parsed.searchParams.set('options', [own, ...added].filter((o) => o !== '').join(' '));
  // URLSearchParams writes spaces as "+", which libpq reads literally.
  return parsed.toString().replace(/\+/g, '%20');
}

/**
 * How long one call into libpq may wait before the connection counts as hung: the longest the server
 * or libpq itself may take to end it (statement_timeout, connect_timeout), plus a margin. 0 when the
 * user turned statement_timeout off: then nothing is watched.
 */
export function hangLimitMs(conninfo: string): { limitMs: number; statementMs: number } {
  const query = new URL(conninfo).searchParams;
  const statementMs =
    durationMs(settingOf(query.get('options') ?? '', 'statement_timeout') ?? '') ??
    Number(DEFAULT_SETTINGS.statement_timeout);
  if (statementMs === 0) return { limitMs: 0, statementMs };
  const connectMs = (Number(query.get('connect_timeout')) || 0) * 1000;
  return { limitMs: Math.max(statementMs, connectMs) + WATCH_MARGIN_MS, statementMs };
}

/** Seconds as the house formats numbers with at most one decimal (numbers.ts's rates): `65`, `0.5`. */
function seconds(ms: number): string {
  return fmtRate(ms / 1000);
}

/**
 * libpq's messages span lines (a hint on a second, indented line); the CLI's reason is one line. A line
 * that starts a sentence of its own after one left without a stop gets one ("Connection refused. Is the
 * server running …"); a sentence wrapped onto the next line is joined with a space.
 */
function oneLine(message: string): string {
  return message
    .trim()
    .replace(/([^.:;!?\s])\s*\n\s*(?=[A-Z])/g, '$1. ')
    .replace(/\s*\n\s*/g, ' ');
}

function toParam(value: Bindable): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'boolean') return value ? '1' : '0';
  return String(value);
}

/** `text` with each parameter cast to the type of the value bound to it. */
function castText(text: string, values: readonly Bindable[]): string {
  const casts = values.map(castOf);
  return text.replace(/\$(\d+)/g, (match, n: string) => `${match}::${casts[Number(n) - 1] ?? 'text'}`);
}

/** The explicit type of a parameter, for statements whose parameters PostgreSQL cannot infer. */
function castOf(value: Bindable): string {
  if (typeof value === 'number') return Number.isInteger(value) ? 'bigint' : 'double precision';
  if (typeof value === 'bigint' || typeof value === 'boolean') return 'bigint';
  return 'text';
}

export class PgStatement {
  readonly source: string;
  readonly reader: boolean;
  readonly readonly = false;
  readonly busy = false;
  readonly #db: PgDb;
  readonly #sql: PgStatementText;
  #pluck = false;
  #raw = false;
  #bound: Bindable[] | undefined;
  /** The columns of its results (#shapeOf). */
  #shape: { names: string[]; types: number[] } | undefined;
  /** This write failing when it changes no row (runExpectingChange), built at its first use. */
  #expecting: PgStatementText | undefined;
  /** A bulk insert's statement, built at its first run (it needs the table's column types). */
  #bulkText: PgStatementText | undefined;

  constructor(db: PgDb, source: string) {
    this.#db = db;
    this.source = source;
    this.#sql = toPostgres(pgOverride(source));
    this.reader = /^\s*(SELECT|WITH)\b/i.test(source) || /\bRETURNING\b/i.test(source);
  }

  get database(): PgDb {
    return this.#db;
  }

  pluck(on = true): this {
    this.#pluck = on;
    if (on) this.#raw = false;
    return this;
  }

  raw(on = true): this {
    this.#raw = on;
    if (on) this.#pluck = false;
    return this;
  }

  expand(): this {
    throw new Error('expand() is not offered by the PostgreSQL state');
  }

  safeIntegers(): this {
    return this;
  }

  columns(): never {
    throw new Error('columns() is not offered by the PostgreSQL state');
  }

  bind(...params: unknown[]): this {
    this.#bound = this.#values(params);
    return this;
  }

  run(...params: unknown[]): RunResult {
    const { bulk } = this.#sql;
    if (bulk !== undefined) {
      this.#bulkText ??= { ...this.#sql, text: bulkInsertText(bulk, this.#db.columnTypes(bulk.table)) };
      return this.#db.write(this.#bulkText, bulkInsertParams(bulk, this.#args(params)));
    }
    return this.#db.write(this.#sql, this.#args(params));
  }

  /**
   * Runs this write so that the server fails it when it changes no row (see runExpectingChange in
   * src/store/db.ts): true when sent so in a transaction's pipeline, false when the caller is to run it
   * and look at `changes` itself.
   */
  runExpectingChange(params: unknown): boolean {
    if (!this.#sql.writes || this.#sql.bulk !== undefined || /\bRETURNING\b/i.test(this.#sql.text))
      return false;
    this.#expecting ??= { ...this.#sql, text: expectingChange(this.#sql.text) };
    return this.#db.writeExpectingChange(this.#expecting, this.#args([params]));
  }

  get(...params: unknown[]): unknown {
    return this.#db.read(this.#sql, this.#args(params), this.#first);
  }

  /**
   * get(), with the row read when the returned function is called (see readSoon in src/store/db.ts): in a
   * transaction's pipeline the statements sent until then share its round trip.
   */
  getLater(...params: unknown[]): () => unknown {
    return this.#db.readLater(this.#sql, this.#args(params), this.#first);
  }

  all(...params: unknown[]): unknown[] {
    return this.#db.read(this.#sql, this.#args(params), this.#every);
  }

  readonly #first = (pq: Libpq): unknown => (pq.ntuples() === 0 ? undefined : this.#row(pq, 0));

  readonly #every = (pq: Libpq): unknown[] => {
    const rows: unknown[] = [];
    for (let r = 0; r < pq.ntuples(); r++) rows.push(this.#row(pq, r));
    return rows;
  };

  *iterate(...params: unknown[]): IterableIterator<unknown> {
    yield* this.all(...params);
  }

  #args(params: unknown[]): Bindable[] {
    if (params.length === 0 && this.#bound !== undefined) return this.#bound;
    return this.#values(params);
  }

  /** better-sqlite3's calling forms: values in order, or one object of named values. */
  #values(params: unknown[]): Bindable[] {
    const { names, positional } = this.#sql;
    if (names.length > 0) {
      const named = (params[0] ?? {}) as Record<string, Bindable>;
      return names.map((name) => {
        if (!(name in named)) throw new RangeError(`Missing named parameter "${name}"`);
        return named[name];
      });
    }
    const values = params.flat() as Bindable[];
    if (values.length !== positional) {
      throw new RangeError(
        `Too ${values.length < positional ? 'few' : 'many'} parameter values were provided`,
      );
    }
    return values;
  }

  #row(pq: Libpq, r: number): unknown {
    const shape = this.#shapeOf(pq);
    const n = shape.names.length;
    if (this.#pluck) return n === 0 ? undefined : readValue(pq, r, 0, shape.types[0] ?? 0);
    if (this.#raw) {
      const values: unknown[] = [];
      for (let c = 0; c < n; c++) values.push(readValue(pq, r, c, shape.types[c] ?? 0));
      return values;
    }
    const row: Row = {};
    for (let c = 0; c < n; c++) {
      const name = shape.names[c] as string;
      if (name !== '') row[name] = readValue(pq, r, c, shape.types[c] ?? 0);
    }
    return row;
  }

  /**
   * The columns of this statement's results, their names and types, read from the first result: a
   * prepared statement's columns never change (the server refuses to run it when its tables' would).
   * A name of '' is a column the row leaves out: SQLite's `SELECT *` never shows rowid, which the
   * PostgreSQL tables carry as a column.
   */
  #shapeOf(pq: Libpq): { names: string[]; types: number[] } {
    const n = pq.nfields();
    if (this.#shape?.names.length === n) return this.#shape;
    const asksRowid = /\browid\b/i.test(this.source);
    const names: string[] = [];
    const types: number[] = [];
    for (let c = 0; c < n; c++) {
      const name = pq.fname(c);
      names.push(name === 'rowid' && !asksRowid ? '' : name);
      types.push(pq.ftype(c));
    }
    this.#shape = { names, types };
    return this.#shape;
  }
}

/**
 * Ends the session's transaction, if one is still open: a COMMIT that failed ended it already, and a
 * ROLLBACK then would only print PostgreSQL's warning on the user's terminal.
 */
function rollback(pq: Libpq): void {
  if (pq.transactionStatus() !== PQTRANS_IDLE) pq.exec('ROLLBACK');
}

/** libpq's PQTransactionStatus when no transaction is open. */
const PQTRANS_IDLE = 0;

function readValue(pq: Libpq, r: number, c: number, type: number): unknown {
  const text = pq.getvalue(r, c);
  if (text === '' && pq.getisnull(r, c)) return null;
  if (NUMBER_TYPES.has(type)) return Number(text);
  if (type === BOOL_TYPE) return text === 't' ? 1 : 0;
  return text;
}

const COLUMN_TYPES: PgStatementText = {
  text: `SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
    WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`,
  positional: 1,
  names: [],
  writes: false,
};

type TxMode = 'default' | 'deferred' | 'immediate' | 'exclusive';

/**
 * A write that fails when it changes no row: PostgreSQL's division by zero (22012) over the count of the
 * rows it changed. Nothing else in such a statement divides, so that SQLSTATE there means exactly this.
 */
const EXPECTING_HEAD = 'WITH changed AS (';
const EXPECTING_TAIL = ' RETURNING 1) SELECT 1 / count(*) FROM changed';
function expectingChange(text: string): string {
  return `${EXPECTING_HEAD}${text}${EXPECTING_TAIL}`;
}
function isUnchanged(sql: string, sqlState: string): boolean {
  return sqlState === '22012' && sql.startsWith(EXPECTING_HEAD) && sql.endsWith(EXPECTING_TAIL);
}

/** What run() answers, as better-sqlite3 does. */
interface RunResult {
  readonly changes: number;
  readonly lastInsertRowid: number;
}

/**
 * A statement sent in pipeline mode whose result is not read yet (see PgDb#write). Its result is read in
 * order, when a later read needs the server's answer, when its own `changes` is asked for, or at COMMIT.
 */
interface Piped {
  readonly sql: string;
  readonly writes: boolean;
  /** The serials of the transaction levels open when it was sent: rows it changed are theirs. */
  readonly levels: readonly number[];
  /** Its cmdTuples, once its result was read. */
  tuples?: string;
  /** For a read: what the caller takes of its rows, taken while its result is libpq's current one. */
  readonly capture?: (pq: Libpq) => unknown;
  captured?: unknown;
  /** A Sync, not a statement: the server answers all before it, and skips no further after a failure. */
  readonly sync?: true;
  /** On a Sync that ends a transaction committed later (transactionLater): how to tell its caller. */
  readonly settle?: (committed: boolean | Error) => void;
  /** A statement's PREPARE sent in the pipeline, before its first use there: the text it names. */
  readonly prepares?: string;
}

export interface PgDbOptions {
  /**
   * Reads only (`view`): every transaction of the session is READ ONLY, so a write fails as SQLite's
   * read-only mode makes it fail, and a transaction is a REPEATABLE READ snapshot that takes no lock:
   * the writers on the database are never waited on nor held up.
   */
  readOnly?: boolean;
}

/** The database side of the PostgreSQL state: one connection, its prepared statements, transactions. */
export class PgDb {
  readonly name: string;
  readonly memory = false;
  readonly readonly: boolean;
  readonly #conninfo: string;
  #pq: Libpq | undefined;
  readonly #prepared = new Map<string, string>();
  /** The last prepared statement's number on this connection (names are never used twice). */
  #preparedSerial = 0;
  /** Statements whose parameters' types the server cannot infer: sent with casts (#castText). */
  readonly #untyped = new Set<string>();
  readonly #columnTypes = new Map<string, Map<string, string>>();
  #depth = 0;
  /** A statement failed inside the open transaction: it was undone to the transaction's start, and the
   *  transaction may only read and then end by a throw, never commit (SQLite would have kept the rest). */
  #failed: Error | undefined;
  /** The server undid the open transaction's work for a conflict with another session (CONFLICT): it is
   *  never committed, whatever its body made of the error, and it is run again from its start. */
  #conflict: PgError | undefined;
  /** Whether the open transaction has savepoints (one per nested level and one per write, as SQLite's
   *  semantics need), or runs without them until something fails (see #inTransaction). */
  #careful = true;
  /** Without savepoints: an error whose undoing needs it to end the whole transaction (a statement that
   *  failed, or a nested level that threw after it changed rows). */
  #pending: Error | undefined;
  /** Without savepoints: per level, whether it (or a level nested in it) changed rows. */
  readonly #changed: boolean[] = [];
  /** Without savepoints a body went on after such an error: the transaction runs again, carefully. */
  #needCareful = false;
  /** Per transaction level: whether its write savepoint exists (see #markWrite). */
  readonly #writeMarks: boolean[] = [];
  /** Whether the connection is in pipeline mode (a transaction without savepoints; see #beginLight). */
  #piping = false;
  /** Statements sent in pipeline mode whose results are not read yet, oldest first. */
  readonly #queue: Piped[] = [];
  /** Whether statements were sent since the server was last asked for its answers (a flush or a Sync). */
  #unasked = false;
  /** Per open transaction level (index 0 is level 1), a serial that names it (see Piped.levels). */
  readonly #levelIds: number[] = [];
  #levelSerial = 0;
  /** Set by transactionLater while its transaction runs: how to tell its caller how the COMMIT went. */
  #later: ((committed: boolean | Error) => void) | undefined;
  /** While COMMITs sent by transactionLater are unanswered: the socket is watched, and this timer. */
  #waiting: NodeJS.Timeout | undefined;
  /** The first failure among the results read since the last Sync. */
  #segmentFailure: Error | undefined;
  /** The last results read ended a transaction committed later that failed: its block may be open. */
  #laterFailed = false;
  #open = true;
  /** The COPY … FROM STDIN open on the connection (beginCopy), if any. */
  #copying: string | undefined;
  /** Whether a connection was ever opened (an outage, not a wrong address, when a later one fails). */
  #connected = false;
  /** The bound on every wait for the server (watchdog.ts). */
  readonly #watch: Watch;
  /** The session's statement_timeout, for the line that says a statement ran out of it. */
  readonly #statementMs: number;
  /** How the server's refusals name this state and its role (src/store/pg/errors.ts). */
  readonly #server: ServerErrorContext;

  constructor(url: string, opts: PgDbOptions = {}) {
    this.name = redactUrl(url);
    this.#server = { name: this.name, role: roleOf(url) };
    this.readonly = opts.readOnly === true;
    this.#conninfo = connectionString(url, this.readonly ? READER_OPTIONS : {});
    const { limitMs, statementMs } = hangLimitMs(this.#conninfo);
    this.#statementMs = statementMs;
    this.#watch = watch(
      limitMs,
      `the PostgreSQL state at ${this.name} did not answer for ${seconds(limitMs)} s (statement_timeout ${seconds(statementMs)} s): its connection hangs (a pooler, a proxy or the server stopped answering without closing it); this process stops here, run again to continue`,
    );
    this.#connection();
  }

  get open(): boolean {
    return this.#open;
  }

  get inTransaction(): boolean {
    return this.#depth > 0;
  }

  /**
   * Whether the open transaction sends its statements in the pipeline (inPipeline in src/store/db.ts): one
   * without savepoints, until something failed. A statement's first use there is prepared in the pipeline
   * too (#send): a transaction that left the pipeline for it would send the rest of its statements one
   * round trip each, with its locks (the run's money lock) held across every one.
   */
  get pipelining(): boolean {
    return this.#piping && this.#depth > 0 && this.#pending === undefined;
  }

  /** The connection, opened again after it was lost (outside a transaction only: one cannot resume). */
  #connection(): Libpq {
    if (!this.#open) throw new TypeError('The database connection is not open');
    if (this.#copying !== undefined) throw new Error(`a statement ran during ${this.#copying}`);
    // libpq's synchronous calls are refused in pipeline mode: what was sent is read first.
    if (this.#piping) this.#drain(undefined);
    if (this.#pq !== undefined && this.#stalePlans && this.#depth === 0) this.#forgetPlans(this.#pq);
    if (this.#pq !== undefined) return this.#pq;
    if (this.#depth > 0) {
      // The transaction died with its connection. A new connection here would run the rest of it
      // outside any transaction and without the locks it took, committing half of it.
      throw new StoreError(
        `the PostgreSQL state at ${this.name} went away during a transaction, which the server rolled back`,
        { kind: 'gone', file: this.name },
      );
    }
    const pq = watched(newLibpq(), this.#watch);
    try {
      pq.connectSync(this.#conninfo);
    } catch (error) {
      keepFailed(pq);
      // Unreachable at the start is for the user to check (the URL, the server); unreachable after it
      // answered is an outage, and the run goes on once the server is back.
      const message = oneLine((error as Error).message);
      throw (
        connectError(message, this.#server) ??
        new StoreError(`the PostgreSQL state at ${this.name} cannot be reached: ${message}`, {
          kind: this.#connected ? 'gone' : 'busy',
          file: this.name,
        })
      );
    }
    this.#connected = true;
    this.#pq = pq;
    this.#prepared.clear();
    this.#preparedSerial = 0;
    if (this.readonly) {
      pq.exec('SET default_transaction_read_only = on');
      this.#check(pq, 'SET default_transaction_read_only');
    }
    return pq;
  }

  /** Called once this connection forgot statements prepared before the schema changed under it. */
  onSchemaChanged: (() => void) | undefined;
  /** A statement met a schema changed since it was prepared: forgotten outside a transaction (#forgetPlans). */
  #stalePlans = false;

  /** Every statement prepared on the connection, prepared again at its next use. */
  #forgetPlans(pq: Libpq): void {
    this.#stalePlans = false;
    pq.exec('DEALLOCATE ALL');
    this.#check(pq, 'DEALLOCATE ALL');
    this.#prepared.clear();
    this.#columnTypes.clear();
    this.onSchemaChanged?.();
  }

  prepare(source: string): PgStatement {
    return new PgStatement(this, source);
  }

  exec(source: string): this {
    this.#afterFailure();
    const pq = this.#connection();
    pq.exec(source);
    this.#check(pq, source);
    // Without savepoints, what a script changed is not known: counted as changed (see #onceLight).
    if (this.#depth > 0 && !this.#careful) this.#changed[this.#depth] = true;
    return this;
  }

  /** SQLite's pragmas have no meaning here; the few the store reads get a stand-in answer. */
  pragma(source: string): unknown {
    if (/^\s*data_version\b/i.test(source)) {
      return this.#scalar(`SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn`);
    }
    if (/^\s*journal_mode\b/i.test(source)) return 'postgres';
    return null;
  }

  #scalar(sql: string): unknown {
    const pq = this.#connection();
    pq.exec(sql);
    this.#check(pq, sql);
    return pq.ntuples() === 0 ? undefined : readValue(pq, 0, 0, pq.ftype(0));
  }

  close(): this {
    if (this.#piping) {
      try {
        this.#drain(undefined);
      } catch {
        // The caller of the transaction was told.
      }
    }
    this.#stopWaiting(this.#pq);
    if (this.#pq !== undefined) finish(this.#pq);
    this.#pq = undefined;
    this.#piping = false;
    this.#queue.length = 0;
    this.#open = false;
    return this;
  }

  /** A table's columns and their types (as casts name them), read once per connection's life. */
  columnTypes(table: string): ReadonlyMap<string, string> {
    let types = this.#columnTypes.get(table);
    if (types === undefined) {
      const pq = this.execute(COLUMN_TYPES, [table]);
      types = new Map<string, string>();
      for (let r = 0; r < pq.ntuples(); r++) types.set(pq.getvalue(r, 0), pq.getvalue(r, 1));
      this.#columnTypes.set(table, types);
    }
    return types;
  }

  /**
   * Starts `COPY table (columns) FROM STDIN` (bulk.ts's CopyRows sends the rows): PostgreSQL stores rows as
   * they arrive while this process makes the next ones. In a transaction it follows a write savepoint, as
   * every write does, so a copy that fails undoes only its own rows. Until endCopy or abortCopy, the
   * connection takes no other statement.
   */
  beginCopy(table: string, columns: readonly string[]): void {
    const pq = this.#connection();
    const text = `COPY ${table} (${columns.join(', ')}) FROM STDIN`;
    const guarded = this.#depth > 0 && this.#careful;
    if (guarded) this.#markWrite(pq);
    pq.exec(text);
    if (pq.resultStatus() !== 'PGRES_COPY_IN') {
      this.#check(pq, text, guarded);
      throw new PgError(`COPY did not start: ${pq.resultStatus()} (in: ${text})`, '', undefined);
    }
    this.#copying = text;
  }

  /** Rows of the open copy, in COPY's text format. */
  copyData(chunk: Buffer): void {
    const pq = this.#copyConnection();
    if (pq.putCopyData(chunk) === 1) return;
    this.#copying = undefined;
    this.#throwIfGone(pq, '', oneLine(pq.errorMessage()));
  }

  /** Ends the open copy: waits until the server has stored every row; returns how many it stored. */
  endCopy(): number {
    const pq = this.#copyConnection();
    const text = this.#copying ?? '';
    this.#copying = undefined;
    if (pq.putCopyEnd() !== 1) this.#throwIfGone(pq, '', oneLine(pq.errorMessage()));
    this.#lastResult(pq);
    this.#check(pq, text, this.#depth > 0 && this.#careful);
    if (this.#depth > 0 && !this.#careful) this.#changed[this.#depth] = true;
    return Number(pq.cmdTuples() || 0);
  }

  /** Ends the open copy storing nothing (the rows' source failed); the transaction goes on. */
  abortCopy(reason: string): void {
    const pq = this.#pq;
    if (this.#copying === undefined || pq === undefined) return;
    this.#copying = undefined;
    try {
      pq.putCopyEnd(reason);
      this.#lastResult(pq);
      if (this.#depth > 0 && this.#careful) pq.exec(`ROLLBACK TO SAVEPOINT w${this.#depth}`);
      else if (this.#depth > 0) {
        // Without savepoints the failed copy ended the transaction's use: back to its start, and the
        // transaction runs again with savepoints unless the caller's error ends it (#onceLight).
        this.#pending ??= new Error(reason);
        pq.exec('ROLLBACK TO SAVEPOINT sp0');
      }
    } catch {
      // The connection went meanwhile: the caller's own error is the one to report.
    }
  }

  #copyConnection(): Libpq {
    if (this.#copying === undefined || this.#pq === undefined) {
      throw new Error('no COPY is open on the PostgreSQL connection');
    }
    return this.#pq;
  }

  /** Waits for the command's results; the last one stays on the connection to be read. */
  #lastResult(pq: Libpq): void {
    while (pq.getResult()) {
      // COPY's own result is the one kept; libpq gives none after it.
    }
  }

  /**
   * Runs one statement, prepared on the server at its first use; its result stays on the connection. One
   * refused for a schema changed since it was prepared ran not at all: outside a transaction it runs once
   * more, prepared again; in one, the whole transaction runs again from its start (#refusal).
   */
  execute(sql: PgStatementText, values: readonly Bindable[], typed = false): Libpq {
    try {
      return this.#executeOnce(sql, values, typed);
    } catch (error) {
      if (this.#depth > 0 || !(error instanceof PgError) || !isStalePlan(error.sqlState, error.message)) {
        throw error;
      }
      return this.#executeOnce(sql, values, typed);
    }
  }

  #executeOnce(sql: PgStatementText, values: readonly Bindable[], typed: boolean): Libpq {
    this.#afterFailure();
    const params = values.map(toParam);
    const pq = this.#connection();
    let name = this.#prepared.get(sql.text);
    if (name === undefined) {
      // Its PREPARE was refused before: tried again it would cost a round trip (three in a transaction
      // with savepoints), with the transaction's locks held.
      if (!typed && this.#untyped.has(sql.text)) return this.#executeCast(sql, values);
      name = `s${++this.#preparedSerial}`;
      // A failed PREPARE inside a transaction would abort it: tried under a savepoint there.
      if (this.#depth > 0) pq.exec('SAVEPOINT prepare');
      pq.prepare(name, sql.text, params.length);
      if (!typed && pq.resultStatus() === 'PGRES_FATAL_ERROR' && UNTYPED.has(this.#sqlState(pq))) {
        if (this.#depth > 0) pq.exec('ROLLBACK TO SAVEPOINT prepare; RELEASE SAVEPOINT prepare');
        this.#untyped.add(sql.text);
        return this.#executeCast(sql, values);
      }
      if (this.#depth > 0 && pq.resultStatus() === 'PGRES_FATAL_ERROR') {
        const message = pq.resultErrorMessage();
        const fields = pq.resultErrorFields() ?? {};
        this.#throwIfGone(pq, fields.sqlState ?? '', oneLine(message || pq.errorMessage()));
        pq.exec('ROLLBACK TO SAVEPOINT prepare; RELEASE SAVEPOINT prepare');
        // Preparing waits for the tables' locks too: a lock or statement timeout there is the server
        // being busy, as for any statement.
        const primary = fields.messagePrimary;
        throw this.#serverError(
          // The position in the statement (a LINE under it) says nothing to the user of a timeout.
          TIMED_OUT.has(fields.sqlState ?? '') && primary !== undefined ? primary : oneLine(message),
          fields.sqlState ?? '',
          sql.text,
          undefined,
          primary,
        );
      }
      this.#check(pq, sql.text);
      if (this.#depth > 0) pq.exec('RELEASE SAVEPOINT prepare');
      this.#prepared.set(sql.text, name);
    }
    const guarded = sql.writes && this.#depth > 0 && this.#careful;
    if (guarded) this.#markWrite(pq);
    pq.execPrepared(name, params);
    this.#check(pq, sql.text, guarded);
    if (sql.writes && this.#depth > 0 && !this.#careful && pq.cmdTuples() !== '0') {
      this.#changed[this.#depth] = true;
    }
    return pq;
  }

  /**
   * A statement whose rows the caller reads now. In a pipeline the statements sent before it go with it
   * in one round trip, and their results are read on the way.
   */
  read<T>(sql: PgStatementText, values: readonly Bindable[], capture: (pq: Libpq) => T): T {
    return this.readLater(sql, values, capture)();
  }

  /** A read whose rows are taken when the returned function is called: later statements share its wait. */
  readLater<T>(sql: PgStatementText, values: readonly Bindable[], capture: (pq: Libpq) => T): () => T {
    if (!this.pipelining) {
      const rows = capture(this.execute(sql, values));
      return () => rows;
    }
    const entry = this.#send(sql, values, capture);
    return () => {
      if (entry.tuples === undefined) this.#drain(entry);
      if (entry.tuples === undefined) throw new Error('a pipelined statement has no result');
      return entry.captured as T;
    };
  }

  /**
   * A statement run for its effect. In a transaction without savepoints it is sent without waiting for
   * the server (pipeline mode): a group commit's writes and its COMMIT then cost one round trip, where
   * each write cost one. Its `changes` waits for its result only when a caller reads it.
   */
  write(sql: PgStatementText, values: readonly Bindable[]): RunResult {
    if (!this.pipelining) {
      const pq = this.execute(sql, values);
      return { changes: Number(pq.cmdTuples() || 0), lastInsertRowid: 0 };
    }
    const entry = this.#send(sql, values);
    const changes = () => {
      if (entry.tuples === undefined) this.#drain(entry);
      if (entry.tuples === undefined) throw new Error('a pipelined statement has no result');
      return Number(entry.tuples || 0);
    };
    return {
      get changes() {
        return changes();
      },
      lastInsertRowid: 0,
    };
  }

  /**
   * A conditional write whose "no row changed" the server turns into a failure of the transaction (see
   * PgStatement#runExpectingChange): sent in the open pipeline (prepared there at its first use); false
   * outside a pipeline, where the caller looks at `changes` itself.
   */
  writeExpectingChange(sql: PgStatementText, values: readonly Bindable[]): boolean {
    if (!this.pipelining) return false;
    this.#send(sql, values);
    return true;
  }

  #send(sql: PgStatementText, values: readonly Bindable[], capture?: (pq: Libpq) => unknown): Piped {
    const pq = this.#pq as Libpq;
    const text = this.#untyped.has(sql.text) ? castText(sql.text, values) : sql.text;
    let name = this.#prepared.get(text);
    if (name === undefined) {
      name = `s${++this.#preparedSerial}`;
      if (!pq.sendPrepare(name, text, values.length)) this.#lostInPipeline(pq);
      // Named at once, for the statements sent after it; forgotten again if the server refuses it.
      this.#prepared.set(text, name);
      this.#queue.push({ sql: text, writes: false, levels: [], prepares: text });
    }
    if (!pq.sendQueryPrepared(name, values.map(toParam))) this.#lostInPipeline(pq);
    this.#unasked = true;
    const levels = this.#levelIds.slice(0, this.#depth);
    const entry: Piped = { sql: sql.text, writes: sql.writes, levels, ...(capture && { capture }) };
    this.#queue.push(entry);
    return entry;
  }

  #lostInPipeline(pq: Libpq): never {
    this.#throwIfGone(pq, '', oneLine(pq.errorMessage()));
    throw new StoreError(`the PostgreSQL state at ${this.name} went away: ${oneLine(pq.errorMessage())}`, {
      kind: 'gone',
      file: this.name,
    });
  }

  /**
   * Reads the results of the statements sent, in order, through `through`; with no `through`, all of them
   * and a Sync, and the connection leaves pipeline mode. After a statement failed the server skips the
   * rest until the Sync: the transaction goes back to its start (as #check does without savepoints) and,
   * since the body went on past the failure without knowing it, runs again with savepoints, which answer
   * exactly as SQLite does.
   */
  #drain(through: Piped | undefined): void {
    const pq = this.#pq;
    if (pq === undefined || !this.#piping) return;
    if (through === undefined) {
      if (this.#queue.at(-1)?.sync !== true) this.#sendSync(pq);
    } else if (this.#unasked && this.#depth > 0) {
      // A Sync, not a flush request: inside the transaction's block it commits nothing, and the session is
      // then idle in transaction while this process reads, so that a worker that hangs there is ended
      // by idle_in_transaction_session_timeout (10 s), not statement_timeout (60 s), and frees its locks.
      this.#sendSync(pq);
    } else if (this.#unasked) {
      if (!(pq.sendFlushRequest() && pq.flush() === 0)) this.#lostInPipeline(pq);
      this.#unasked = false;
    }
    while (this.#queue.length > 0) {
      const entry = this.#readNext(pq);
      if (entry === through && this.#segmentFailure === undefined) return;
      // Every result is read (the ones after a failure say it was skipped, up to a Sync).
      const unsynced = this.#queue.length > 0 && this.#queue.at(-1)?.sync !== true;
      if (this.#segmentFailure !== undefined && unsynced) this.#sendSync(pq);
    }
    this.#leavePipeline(pq);
    const failure = this.#segmentFailure;
    this.#segmentFailure = undefined;
    if (failure === undefined) return;
    this.#pending ??= failure;
    // A refused statement (a constraint, a conflict) is run again where the body can see it fail; the
    // server being busy or refusing the session ends the transaction as it would have at the statement.
    if (failure instanceof PgError) this.#needCareful = true;
    pq.exec('ROLLBACK TO SAVEPOINT sp0');
    throw failure;
  }

  /** Sends a Sync; `settle`: the caller of the transaction committed later that it ends (transactionLater). */
  #sendSync(pq: Libpq, settle?: (committed: boolean | Error) => void): void {
    if (!pq.pipelineSync()) this.#lostInPipeline(pq);
    this.#unasked = false;
    this.#queue.push({ sql: 'Sync', writes: false, levels: [], sync: true, ...(settle && { settle }) });
  }

  /**
   * Reads the result of the oldest thing sent. A Sync ending a transaction committed later tells its caller
   * whether it committed: whatever failed before it (a conflict, a refused write) undid all of it.
   */
  #readNext(pq: Libpq): Piped {
    const entry = this.#queue[0] as Piped;
    if (entry.sync !== true) {
      this.#queue.shift();
      // Read even after a failure (its result says it was skipped); the first failure is kept.
      const refused = this.#pipedResult(pq, entry);
      this.#segmentFailure ??= refused;
      this.#laterFailed = false;
      return entry;
    }
    // Taken off the queue only once its answer came: a connection lost here tells its caller (#throwIfGone
    // tells every caller still queued), who would otherwise wait for ever.
    if (!pq.getResult() || pq.resultStatus() !== 'PGRES_PIPELINE_SYNC') this.#lostInPipeline(pq);
    this.#queue.shift();
    if (entry.settle !== undefined) {
      const failed = this.#segmentFailure !== undefined;
      this.#segmentFailure = undefined;
      this.#laterFailed = failed;
      entry.settle(!failed);
    }
    return entry;
  }

  /**
   * Out of pipeline mode, everything read. A transaction committed later whose statement failed left its
   * block open (the server skipped its COMMIT): it is ended here, unless a transaction of this process
   * followed it (whose own failure, then, ends it).
   */
  #leavePipeline(pq: Libpq): void {
    pq.exitPipelineMode();
    this.#piping = false;
    this.#stopWaiting(pq);
    if (this.#laterFailed && this.#depth === 0) rollback(pq);
    this.#laterFailed = false;
  }

  /** Answers of COMMITs sent later are read when the socket has them, or after OUTSTANDING_MS at most. */
  #startWaiting(pq: Libpq): void {
    if (this.#waiting !== undefined) return;
    pq.startReader();
    pq.once('readable', this.#readAnswers);
    this.#waiting = setTimeout(() => {
      try {
        this.#drain(undefined);
      } catch {
        // The transaction's caller was told what went wrong.
      }
    }, OUTSTANDING_MS);
  }

  #stopWaiting(pq: Libpq | undefined): void {
    if (this.#waiting === undefined) return;
    clearTimeout(this.#waiting);
    this.#waiting = undefined;
    pq?.stopReader();
    pq?.removeAllListeners('readable');
  }

  /**
   * The socket has answers: what has arrived is read without waiting, each COMMIT sent later told as its
   * Sync comes; the rest when more arrives. A transaction of this process in between is never waited for.
   */
  readonly #readAnswers = (): void => {
    const pq = this.#pq;
    if (pq === undefined || !this.#piping || this.#depth > 0) return;
    try {
      if (!pq.consumeInput() || !this.#queue.some((e) => e.settle !== undefined)) {
        this.#drain(undefined);
        return;
      }
      while (this.#queue.some((e) => e.settle !== undefined) && !pq.isBusy()) this.#readNext(pq);
      if (this.#queue.length === 0) {
        this.#leavePipeline(pq);
        return;
      }
      this.#waiting?.refresh();
      pq.once('readable', this.#readAnswers);
    } catch {
      // The transaction's caller was told what went wrong (or the connection ended, told the same way).
    }
  };

  /** Reads one piped statement's result (and the end of its results); the error when it failed. */
  #pipedResult(pq: Libpq, entry: Piped): Error | undefined {
    if (!pq.getResult()) this.#lostInPipeline(pq);
    const status = pq.resultStatus();
    if (entry.prepares !== undefined && status !== 'PGRES_COMMAND_OK') {
      // Not prepared (refused, or skipped after a failure): its next use prepares it under a new name.
      this.#prepared.delete(entry.prepares);
      if (status === 'PGRES_FATAL_ERROR' && UNTYPED.has(this.#sqlState(pq)))
        this.#untyped.add(entry.prepares);
    }
    let failure: Error | undefined;
    if (status === 'PGRES_PIPELINE_ABORTED') entry.tuples = '0';
    else if (status === 'PGRES_FATAL_ERROR' || status === 'PGRES_BAD_RESPONSE') {
      failure = this.#refusal(pq, entry.sql);
    } else {
      entry.tuples = pq.cmdTuples();
      if (entry.capture !== undefined) entry.captured = entry.capture(pq);
      if (entry.writes && entry.tuples !== '0') {
        entry.levels.forEach((id, i) => {
          if (this.#levelIds[i] === id) this.#changed[i + 1] = true;
        });
      }
    }
    // The end of this statement's results: at once, and the result just read stays the current one.
    pq.getResult();
    return failure;
  }

  /**
   * BEGIN of a transaction without savepoints: sent in pipeline mode with the statements that follow
   * (libpq 14+); a client library without pipelines sends it alone.
   */
  #beginLight(): void {
    // After COMMITs sent later and not answered yet, this transaction follows them in the same pipeline
    // without waiting for their answers: the server runs them in the order sent.
    const last = this.#queue.at(-1);
    // Statements met a changed schema: the connection forgets them first (#connection), never chained.
    const chained =
      !this.#stalePlans &&
      this.#piping &&
      this.#pq !== undefined &&
      last?.sync === true &&
      last.settle !== undefined;
    const pq = chained ? (this.#pq as Libpq) : this.#connection();
    if (!chained) {
      if (!pq.pipelineModeSupported() || !pq.enterPipelineMode()) {
        this.exec('BEGIN; SAVEPOINT sp0');
        return;
      }
      this.#piping = true;
    }
    for (const text of ['BEGIN', 'SAVEPOINT sp0']) {
      if (!pq.sendQueryParams(text, [])) this.#lostInPipeline(pq);
      this.#unasked = true;
      this.#queue.push({ sql: text, writes: false, levels: [] });
    }
  }

  #commitLight(): void {
    const pq = this.#pq;
    if (pq === undefined || !this.#piping) {
      this.exec('COMMIT');
      return;
    }
    if (!pq.sendQueryParams('COMMIT', [])) this.#lostInPipeline(pq);
    this.#unasked = true;
    this.#queue.push({ sql: 'COMMIT', writes: false, levels: [] });
    const later = this.#later;
    if (later === undefined) {
      this.#drain(undefined);
      return;
    }
    // Sent with a Sync, and read when the server answers (or when the connection is next used).
    this.#sendSync(pq, later);
    this.#startWaiting(pq);
  }

  /**
   * Runs `run` (a transaction) and sends its COMMIT without waiting for the server: this process goes on
   * (its HTTP answers, its files) while the server works. `committed` says, once the server answered,
   * whether the transaction committed (true) or was undone (false: a conflict with another worker, a
   * statement refused; run it again as a transaction, which answers as SQLite would). A transaction that
   * could not go in a pipeline commits before this returns. The next use of the connection reads the
   * answer first.
   */
  transactionLater<T>(run: () => T): { value: T; committed: Promise<boolean> } {
    if (this.#depth > 0 || this.#later !== undefined)
      return { value: run(), committed: Promise.resolve(true) };
    let settle: (committed: boolean | Error) => void = () => undefined;
    const committed = new Promise<boolean>((resolve, reject) => {
      settle = (outcome) => (outcome instanceof Error ? reject(outcome) : resolve(outcome));
    });
    this.#later = settle;
    let value: T;
    try {
      value = run();
    } finally {
      this.#later = undefined;
    }
    if (!this.#queue.some((e) => e.settle === settle)) settle(true);
    return { value, committed };
  }

  /**
   * Reads what is still in the pipeline when a level ends by a throw: all of it and out of pipeline mode
   * at the outer level (a ROLLBACK follows), else through the last statement sent. A failure found here
   * is in #pending (the transaction runs again) or ended the connection.
   */
  #settleQuietly(outer: boolean): void {
    try {
      this.#drain(outer ? undefined : this.#queue.at(-1));
    } catch {
      // A failure of the pipeline is in #pending (the transaction runs again) or ended the connection.
    }
  }

  /**
   * A write inside a transaction runs after a savepoint of its own (the previous one released in the same
   * round trip), so that when it fails only it is undone, as in SQLite, and the transaction goes on.
   */
  #markWrite(pq: Libpq): void {
    const level = this.#depth;
    const name = `w${level}`;
    pq.exec(
      this.#writeMarks[level] === true ? `RELEASE SAVEPOINT ${name}; SAVEPOINT ${name}` : `SAVEPOINT ${name}`,
    );
    this.#check(pq, 'SAVEPOINT');
    this.#writeMarks[level] = true;
  }

  /** A statement whose parameter types PostgreSQL cannot infer (`? IS NULL`): typed by the values bound. */
  #executeCast(sql: PgStatementText, values: readonly Bindable[]): Libpq {
    return this.execute({ ...sql, text: castText(sql.text, values) }, values, true);
  }

  #sqlState(pq: Libpq): string {
    return pq.resultErrorFields()?.sqlState ?? '';
  }

  /** An error that means the session ended (or never answered): the next statement outside a transaction opens a new one. */
  #throwIfGone(pq: Libpq, sqlState: string, message: string): void {
    if (sqlState !== '' && !sqlState.startsWith('08') && !CONNECTION_ENDED.has(sqlState)) return;
    this.#stopWaiting(pq);
    finish(pq);
    this.#pq = undefined;
    this.#piping = false;
    const later = this.#queue.flatMap((e) => (e.settle === undefined ? [] : [e.settle]));
    this.#queue.length = 0;
    this.#segmentFailure = undefined;
    this.#laterFailed = false;
    const gone = new StoreError(`the PostgreSQL state at ${this.name} went away: ${message}`, {
      kind: 'gone',
      file: this.name,
    });
    for (const settle of later) settle(gone);
    throw gone;
  }

  /** The error of a statement the server refused (`message` on one line). */
  #serverError(
    message: string,
    sqlState: string,
    sql: string,
    constraint: string | undefined,
    primary?: string,
  ): Error {
    const known = serverError(sqlState, primary ?? message, this.#server);
    if (known !== undefined) return known;
    return TIMED_OUT.has(sqlState)
      ? new StoreError(
          `the PostgreSQL state at ${this.name} is busy or slow: ${message.replace(/^ERROR:\s*/, '')}${/statement timeout/.test(message) ? ` (statement_timeout ${seconds(this.#statementMs)} s)` : ''}; run again to continue`,
          { kind: 'gone', file: this.name },
        )
      : new PgError(`${message} (in: ${sql.replace(/\s+/g, ' ').slice(0, 120)})`, sqlState, constraint);
  }

  /** The error of the current result, which failed; a session that ended throws at once (#throwIfGone). */
  #refusal(pq: Libpq, sql: string): Error {
    const fields = pq.resultErrorFields() ?? {};
    const sqlState = fields.sqlState ?? '';
    const full = oneLine(pq.resultErrorMessage() || pq.errorMessage());
    this.#throwIfGone(pq, sqlState, full);
    // The position in the statement (a LINE under it, when its PREPARE waited) says nothing to the user
    // of a timeout.
    const primary = fields.messagePrimary;
    const message = TIMED_OUT.has(sqlState) && primary !== undefined ? primary : full;
    const error = this.#serverError(message, sqlState, sql, fields.constraintName, primary);
    if (this.#depth > 0 && CONFLICT.has(sqlState) && error instanceof PgError) this.#conflict ??= error;
    if (isStalePlan(sqlState, message)) {
      this.#stalePlans = true;
      // As after a conflict, the transaction runs again from its start, its statements prepared again.
      if (this.#depth > 0 && error instanceof PgError) this.#conflict ??= error;
    }
    // A conditional write that changed no row, checked by the server: the transaction runs again with
    // savepoints, where the store sees the row count itself and refuses in its own words.
    if (this.#depth > 0 && isUnchanged(sql, sqlState)) this.#needCareful = true;
    return error;
  }

  #check(pq: Libpq, sql: string, guarded = false): void {
    const status = pq.resultStatus();
    if (
      status !== 'PGRES_FATAL_ERROR' &&
      status !== 'PGRES_BAD_RESPONSE' &&
      status !== 'PGRES_NONFATAL_ERROR'
    ) {
      return;
    }
    const error = this.#refusal(pq, sql);
    if (this.#depth > 0 && !this.#careful) {
      // Without savepoints the server refuses every statement of the transaction after this one: back to
      // its start, so that a body that goes on can still read; it then runs again, carefully.
      this.#pending ??= error;
      pq.exec('ROLLBACK TO SAVEPOINT sp0');
    } else if (guarded) {
      pq.exec(`ROLLBACK TO SAVEPOINT w${this.#depth}`);
    } else if (this.#depth > 0 && this.#failed === undefined) {
      // PostgreSQL refuses every statement after an error until a rollback: back to the savepoint
      // taken when this transaction began, so the caller's reads before it throws still work.
      this.#failed = error;
      pq.exec(`ROLLBACK TO SAVEPOINT sp${this.#depth - 1}`);
    }
    throw error;
  }

  /** better-sqlite3's transaction(): BEGIN…COMMIT, a savepoint when nested, rolled back on a throw. */
  transaction<F extends (...args: never[]) => unknown>(fn: F): F & Record<TxMode, F> {
    const wrap = (mode: TxMode) =>
      ((...args: Parameters<F>) => this.#inTransaction(mode, () => fn(...args), args)) as unknown as F;
    return Object.assign(wrap('default'), {
      default: wrap('default'),
      deferred: wrap('deferred'),
      immediate: wrap('immediate'),
      exclusive: wrap('exclusive'),
    });
  }

  /**
   * A transaction; at depth 0 one the server undid for a conflict (a deadlock between workers' row
   * locks, a serialization failure) is run again, up to CONFLICT_TRIES times after a random wait of a
   * few milliseconds, when its arguments can be read again (rerunnable). Its body only reads and writes
   * the database and returns what it read, so running it again is running it once.
   *
   * It first runs without savepoints: no round trips for nested levels (each write of a group commit is
   * one) nor for each write. That is exact as long as nothing fails, or what fails ends the whole
   * transaction: a failed statement, or a nested level that threw after it changed rows, whose error
   * every level lets through (then all is rolled back, as SQLite would). When a body goes on after such
   * an error (a group commit reports a refused write in its slot and commits the others), the
   * transaction is undone and run again with savepoints, which undo only what failed, as in SQLite. A
   * transaction whose arguments cannot be read twice has savepoints from the start.
   */
  #inTransaction<T>(_mode: TxMode, body: () => T, args: readonly unknown[] = []): T {
    if (this.#depth > 0) return this.#careful ? this.#once(body) : this.#onceLight(body);
    let careful = this.readonly || !rerunnable(args);
    for (let attempt = 1; ; attempt++) {
      this.#careful = careful;
      this.#pending = undefined;
      this.#needCareful = false;
      try {
        return careful ? this.#once(body) : this.#onceLight(body);
      } catch (error) {
        const conflict = this.#conflict;
        const rerun = this.#needCareful;
        this.#conflict = undefined;
        careful ||= rerun;
        if (conflict === undefined) {
          if (rerun) continue;
          throw error;
        }
        if (attempt >= CONFLICT_TRIES || !rerunnable(args)) {
          throw new StoreError(
            `the PostgreSQL state at ${this.name} kept undoing a transaction for a conflict with another worker (${oneLine(conflict.message).slice(0, 160)}) ${attempt} time(s); run again to continue`,
            { kind: 'gone', file: this.name },
          );
        }
        // Never at once: the server gives an undone transaction's rows to whoever asks next, and a worker
        // that asks again before the session it deadlocked with is scheduled takes them first, and
        // deadlocks again (seen under load). 4-8 ms, then twice as long each time.
        pause((2 + Math.random() * 2) * 2 ** attempt);
      } finally {
        this.#careful = true;
        this.#pending = undefined;
        this.#needCareful = false;
      }
    }
  }

  /**
   * A statement after a failure in a transaction without savepoints would read what SQLite would not
   * show (the transaction's rows before the failure are gone): whatever the body makes of it, the
   * transaction runs again with savepoints.
   */
  #afterFailure(): void {
    if (this.#pending !== undefined && this.#depth > 0 && !this.#careful) this.#needCareful = true;
  }

  /** A transaction level without savepoints (see #inTransaction). */
  #onceLight<T>(body: () => T): T {
    const depth = this.#depth;
    if (depth === 0) {
      try {
        this.#beginLight();
      } catch (error) {
        if (this.#pq !== undefined) rollback(this.#pq);
        throw error;
      }
    }
    this.#depth = depth + 1;
    this.#changed[depth + 1] = false;
    this.#levelIds[depth] = ++this.#levelSerial;
    try {
      const result = body();
      if (result instanceof Promise) throw new TypeError('Transaction function cannot return a promise');
      if (this.#pending !== undefined) this.#needCareful = true;
      if (depth > 0) {
        this.#changed[depth] ||= this.#changed[depth + 1] === true;
        return result;
      }
      if (this.#conflict !== undefined) throw this.#conflict;
      if (this.#needCareful) throw new Error('run again with savepoints');
      this.#commitLight();
      return result;
    } catch (error) {
      // What this level changed is known once the statements it sent are answered.
      this.#settleQuietly(depth === 0);
      if (this.#pending === undefined) {
        // Rows this level changed cannot be undone alone: only the end of the whole transaction may.
        if (this.#changed[depth + 1] === true) this.#pending = error as Error;
      } else if (error !== this.#pending) {
        this.#needCareful = true;
      }
      if (depth > 0) {
        this.#changed[depth] ||= this.#changed[depth + 1] === true;
        throw error;
      }
      this.#failed = undefined;
      try {
        if (this.#pq !== undefined) rollback(this.#pq);
      } catch {
        // The connection went while rolling back: the server rolls the transaction back itself.
      }
      throw error;
    } finally {
      this.#depth = depth;
      this.#levelIds.length = depth;
    }
  }

  #once<T>(body: () => T): T {
    const depth = this.#depth;
    const savepoint = `sp${depth}`;
    // No lock at the start: each decision takes the locks of what it depends on (a task's row by the
    // conditional UPDATE that moves it, a run's money lock, a period's; see the sub-stores).
    const begin = this.readonly ? 'BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY' : 'BEGIN';
    try {
      this.exec(depth === 0 ? `${begin}; SAVEPOINT ${savepoint}` : `SAVEPOINT ${savepoint}`);
    } catch (error) {
      // A transaction that began but whose savepoint failed is still open and aborted on the
      // connection: every later statement would fail until it is rolled back.
      if (depth === 0 && this.#pq !== undefined) rollback(this.#pq);
      throw error;
    }
    this.#depth = depth + 1;
    this.#writeMarks[depth + 1] = false;
    try {
      const result = body();
      if (result instanceof Promise) throw new TypeError('Transaction function cannot return a promise');
      if (this.#failed !== undefined) throw this.#failed;
      if (depth === 0 && this.#conflict !== undefined) throw this.#conflict;
      this.exec(depth === 0 ? 'COMMIT' : `RELEASE SAVEPOINT ${savepoint}`);
      return result;
    } catch (error) {
      this.#failed = undefined;
      if (this.#pq !== undefined) {
        try {
          this.#pq.exec(
            depth === 0 ? 'ROLLBACK' : `ROLLBACK TO SAVEPOINT ${savepoint}; RELEASE SAVEPOINT ${savepoint}`,
          );
        } catch {
          // The connection went while rolling back: the server rolls the transaction back itself.
        }
      }
      throw error;
    } finally {
      this.#depth = depth;
    }
  }
}
