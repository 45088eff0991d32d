// The state database: the one module that holds SQL. Everything is synchronous on purpose: a
// transaction can never span an `await`, so no other work interleaves with a half-written change.

import { type AccountFacts, AccountReadStore, type AccountSums } from './account-reads.js';
import { AccountScanStore } from './account-scan.js';
import { ChainStore } from './chains.js';
import { ClaimStore } from './claims.js';
import {
  type BatchResult,
  type Db,
  type GroupCommit,
  groupCommit,
  openDatabase,
  openDatabaseReadOnly,
} from './db.js';
import { FileStore } from './files.js';
import { JobStore } from './jobs.js';
import { LeaseStore } from './leases.js';
import { LedgerStore } from './ledger.js';
import { isPostgresUrl, redactUrl } from './location.js';
import { openPgDatabase, openPgDatabaseReadOnly } from './pg/open.js';
import { ReportBasisStore } from './report-basis.js';
import { ReportReadStore } from './report-reads.js';
import { ReservationStore } from './reservations.js';
import { ReviewStore } from './reviews.js';
import { RunStore } from './runs.js';
import { ScheduleStore } from './schedules.js';
import { SpendStore } from './spend.js';
import { SubmissionStore } from './submissions.js';
import { TaskStore } from './tasks.js';
import type { Clock } from './types.js';
import { UploadStore } from './uploads.js';
import { ViewReadStore } from './view-reads.js';
import { WorkerStore } from './workers.js';

export type { AccountEstimates, AccountFacts, AccountSums, KindSums } from './account-reads.js';
export { activeMsOf, lastSignOfWork, runLeaseName } from './active.js';
export { BLOCKING_STATES, type WaitingOn } from './chains.js';
export { JOB_STATES, type LeaveResult, type SweepResult } from './claims.js';
export { type BatchResult, StoreError } from './db.js';
export { bodyHash, keyFingerprint } from './fingerprint.js';
export type { JobEvent } from './jobs.js';
export { leaseHolder } from './leases.js';
export { isPostgresUrl } from './location.js';
export { MIGRATIONS, type Migration } from './migrations.js';
export { PlanDigest, planDigestOf } from './plan-digest.js';
export { hostOf, withoutSignedQueries } from './redact.js';
export {
  type AttemptCounts,
  emptyNotOnDisk,
  isNotOnDisk,
  NOT_ON_DISK,
  type NotOnDiskFigures,
  type NotOnDiskState,
  type ProblemTaskRow,
  parseRequest,
  REQUEST_TEXT_FIELDS,
  type ReportModelFigures,
  type ReportPagesOptions,
  type ReportTaskRow,
  type RequestTextField,
  type RunFileTotals,
  type RunTotals,
} from './report-reads.js';
export { type MoneyFigures, OverBudgetError, type PeriodFigures, type PeriodMoney } from './reservations.js';
export {
  type DecideOutcome,
  type DecideRequest,
  type DecisionRecord,
  type ReviewCounts,
  VERDICTS,
  type Verdict,
} from './reviews.js';
export type { ReportTaskSpend } from './spend.js';
export type { SubmitRecorded } from './submissions.js';
export { periodOf } from './time.js';
export * from './transitions.js';
export * from './types.js';
export type { UploadRecord } from './uploads.js';
export * from './view-reads.js';
export {
  holderIsDead,
  type WorkerCounts,
  type WorkerRecord,
  workerIsLost,
} from './workers.js';

export interface StoreOptions {
  now?: Clock;
}

/**
 * Opens the state database at `file` (default of the CLI: `state/mediabatch.db`), creating it if needed;
 * a `postgres://…` URL opens a state kept in PostgreSQL (its `file` is then the URL without password).
 */
export function openStore(file: string, opts: StoreOptions = {}): Store {
  const now = opts.now ?? (() => new Date());
  if (isPostgresUrl(file)) return new Store(redactUrl(file), openPgDatabase(file, now), now);
  return new Store(file, openDatabase(file, now), now);
}

/**
 * Opens an existing state database read-only (`mediabatch view`): no write lock is ever taken, so a run
 * in another process is never slowed or blocked. Every write method fails (SQLITE_READONLY; on
 * PostgreSQL, a read-only transaction's refusal). A state of an older schema is refused with kind
 * 'older' (open it once with openStore to migrate it).
 */
export function openReadOnlyStore(file: string, opts: StoreOptions = {}): Store {
  const now = opts.now ?? (() => new Date());
  if (isPostgresUrl(file)) return new Store(redactUrl(file), openPgDatabaseReadOnly(file), now);
  return new Store(file, openDatabaseReadOnly(file), now);
}

/** What a PostgreSQL connection offers beyond better-sqlite3's (src/store/pg/db.ts). */
export class Store {
  readonly file: string;
  readonly #db: Db;
  #viewReads: ViewReadStore | undefined;

  /** The reads of `mediabatch view`, prepared on first use (runs never need them). */
  get viewReads(): ViewReadStore {
    this.#viewReads ??= new ViewReadStore(this.#db);
    return this.#viewReads;
  }

  #accountReads: AccountReadStore | undefined;
  #readAll: ((read: () => unknown) => unknown) | undefined;

  /**
   * Runs reads in one read transaction: every statement in `read` sees the database as of its first
   * one, whatever other connections commit meanwhile (WAL snapshots). Nothing in `read` may await.
   */
  readAtOnce<T>(read: () => T): T {
    this.#readAll ??= this.#db.transaction((fn: () => unknown) => fn());
    return this.#readAll(read) as T;
  }

  /** Every fact of a run's account (src/account/), in one read transaction; prepared on first use. */
  accountFacts(runId: string): AccountFacts {
    this.#accountReads ??= new AccountReadStore(this.#db);
    return this.#accountReads.accountFacts(runId);
  }

  /**
   * The sums of accountFacts (estimates, money by kind) computed by reading every row of the run: the
   * check of the sums the store keeps by triggers, which must always equal it.
   */
  accountSumsByScan(runId: string): AccountSums {
    return new AccountScanStore(this.#db).accountSumsByScan(runId);
  }

  // One sub-store per part of the state; a caller names the part it needs (`store.tasks.nextPending`).
  readonly runs: RunStore;
  readonly uploads: UploadStore;
  readonly chains: ChainStore;
  readonly reservations: ReservationStore;
  readonly reviews: ReviewStore;
  readonly tasks: TaskStore;
  readonly submissions: SubmissionStore;
  readonly jobs: JobStore;
  readonly files: FileStore;
  readonly ledger: LedgerStore;
  readonly spend: SpendStore;
  readonly reportReads: ReportReadStore;
  readonly basis: ReportBasisStore;
  readonly leases: LeaseStore;
  readonly schedules: ScheduleStore;
  readonly workers: WorkerStore;
  readonly claims: ClaimStore;

  /** Use openStore(); this takes a database already opened and migrated. Each statement is prepared once. */
  constructor(file: string, db: Db, now: Clock) {
    this.file = file;
    this.#db = db;
    this.runs = new RunStore(db, now);
    this.uploads = new UploadStore(db, now);
    this.chains = new ChainStore(db, now);
    this.reservations = new ReservationStore(db);
    this.reviews = new ReviewStore(db, now, this.chains, this.reservations);
    this.tasks = new TaskStore(db, now, this.chains);
    this.submissions = new SubmissionStore(db, now, this.reservations);
    this.jobs = new JobStore(db, now);
    this.files = new FileStore(db, now);
    this.ledger = new LedgerStore(db, now);
    this.spend = new SpendStore(db);
    this.reportReads = new ReportReadStore(db);
    this.basis = new ReportBasisStore(db);
    this.leases = new LeaseStore(db, now);
    this.schedules = new ScheduleStore(db, now);
    this.workers = new WorkerStore(db, now);
    this.claims = new ClaimStore(db, this.workers, this.submissions);
  }

  get isOpen(): boolean {
    return this.#db.open;
  }

  #group: GroupCommit | undefined;

  /** Several writes in one transaction, each refused alone in its slot (groupCommit in src/store/db.ts). */
  batch(writes: readonly (() => unknown)[]): BatchResult[] {
    this.#group ??= groupCommit(this.#db);
    return this.#group.batch(writes);
  }

  /** batch(), for a caller that awaits the commit: on PostgreSQL this process goes on meanwhile. */
  batchLater(writes: readonly (() => unknown)[]): Promise<BatchResult[]> {
    this.#group ??= groupCommit(this.#db);
    return this.#group.batchLater(writes);
  }

  /** The durability settings as SQLite reports them now, for `status` and tests. */
  pragmas(): { journalMode: string; synchronous: number; foreignKeys: number; busyTimeoutMs: number } {
    return {
      journalMode: String(this.#db.pragma('journal_mode', { simple: true })),
      synchronous: Number(this.#db.pragma('synchronous', { simple: true })),
      foreignKeys: Number(this.#db.pragma('foreign_keys', { simple: true })),
      busyTimeoutMs: Number(this.#db.pragma('busy_timeout', { simple: true })),
    };
  }

  /** Closes the database (the last connection to close folds the WAL back into the file). Safe to call twice. */
  close(): void {
    if (!this.#db.open) return;
    this.#db.close();
  }
}
