// The synchronous PostgreSQL client: npm `libpq`, node bindings of PostgreSQL's own C library, built
// against Debian's libpq-dev. Synchronous on purpose, like better-sqlite3: the store's contract is that a
// transaction never spans an await, and every caller of the store stays as it is.

import { createRequire } from 'node:module';
import { StoreError } from '../errors.js';
import type { Watch } from './watchdog.js';

/** The part of libpq's binding the store uses (the package ships no types). */
export interface Libpq {
  connectSync(conninfo: string): void;
  exec(sql: string): void;
  execParams(sql: string, params: readonly (string | null)[]): void;
  prepare(name: string, sql: string, nParams: number): void;
  execPrepared(name: string, params: readonly (string | null)[]): void;
  resultStatus(): string;
  resultErrorMessage(): string;
  resultErrorFields(): Record<string, string | undefined> | undefined;
  errorMessage(): string;
  ntuples(): number;
  nfields(): number;
  fname(column: number): string;
  ftype(column: number): number;
  getvalue(row: number, column: number): string;
  getisnull(row: number, column: number): boolean;
  cmdTuples(): string;
  transactionStatus(): number;
  /** COPY … FROM STDIN: 1 when queued or sent, -1 on a broken connection (blocking mode never gives 0). */
  putCopyData(chunk: Buffer): number;
  putCopyEnd(errorMessage?: string): number;
  /** The next result of the command sent (true), or none left (false): waits for the server. */
  getResult(): boolean;
  finish(): void;
  clear(): void;
  // Pipeline mode (libpq 14+): statements sent without waiting, their results read later in order.
  pipelineModeSupported(): boolean;
  enterPipelineMode(): boolean;
  exitPipelineMode(): boolean;
  /** Sends a Sync (the server answers everything before it) and flushes; false on a broken connection. */
  pipelineSync(): boolean;
  /** Asks the server to send what it has answered so far, without a Sync. */
  sendFlushRequest(): boolean;
  /** Sends what libpq has buffered: 0 when all is sent, -1 on a broken connection. */
  flush(): number;
  /** Sends a PREPARE without waiting (in pipeline mode, its result comes in order); false when broken. */
  sendPrepare(name: string, sql: string, nParams: number): boolean;
  sendQueryPrepared(name: string, params: readonly (string | null)[]): boolean;
  sendQueryParams(sql: string, params: readonly (string | null)[]): boolean;
  /** Reads what the socket has into libpq's buffer, without waiting; false on a broken connection. */
  consumeInput(): boolean;
  /** Whether getResult() would wait for the server (what it needs has not all arrived). */
  isBusy(): boolean;
  /** Watches the socket: 'readable' is emitted when the server sent something (libuv's poll). */
  startReader(): void;
  stopReader(): void;
  once(event: 'readable', listener: () => void): void;
  removeAllListeners(event: 'readable'): void;
}

type LibpqConstructor = new () => Libpq;

let loaded: LibpqConstructor | undefined;

/** Loads the binding when a PostgreSQL state is first opened: SQLite users never need it built. */
export function newLibpq(): Libpq {
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)('libpq') as LibpqConstructor;
    } catch (error) {
      throw new StoreError(
        `a PostgreSQL state needs the optional package libpq, which is not installed or not built (${(error as Error).message.split('\n')[0]}): install libpq-dev and a C compiler, then npm install libpq`,
        { kind: 'path', file: 'postgres' },
      );
    }
  }
  return new loaded();
}

/** The calls that wait on the network. */
const WAITING = [
  'connectSync',
  'exec',
  'execParams',
  'prepare',
  'execPrepared',
  'putCopyData',
  'putCopyEnd',
  'getResult',
  'pipelineSync',
  'flush',
  'sendPrepare',
  'sendQueryPrepared',
  'sendQueryParams',
] as const;

/** `pq` with every call that waits on the server made under `watch`'s deadline. */
export function watched(pq: Libpq, watch: Watch): Libpq {
  for (const method of WAITING) {
    const call = pq[method] as (...args: unknown[]) => void;
    Object.defineProperty(pq, method, {
      value: (...args: unknown[]) => watch.around(() => call.apply(pq, args)),
    });
  }
  return pq;
}

/**
 * libpq's finish() closes the connection's libuv handle, which libuv finishes closing on a later turn of
 * the event loop; if the object holding that handle is collected first, node aborts
 * (uv__finish_close). So a finished connection is kept reachable for a while after finish().
 */
const finishing = new Set<Libpq>();

export function finish(pq: Libpq): void {
  finishing.add(pq);
  try {
    pq.finish();
  } finally {
    setTimeout(() => finishing.delete(pq), 1000).unref();
  }
}

/** Keeps a connection that failed to open (libpq finished it already) reachable for the same reason. */
export function keepFailed(pq: Libpq): void {
  finishing.add(pq);
  setTimeout(() => finishing.delete(pq), 1000).unref();
}
