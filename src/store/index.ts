// The state database: the one module that holds SQL. Everything is synchronous on purpose: a
// transaction can never span an `await`, so no other work interleaves with a half-written change.

import { type AccountFacts, AccountReadStore } from './account-reads.js';
import { ChainStore } from './chains.js';
import { type Db, openDatabase, openDatabaseReadOnly } from './db.js';
import { FileStore } from './files.js';
import { JobStore } from './jobs.js';
import { LeaseStore } from './leases.js';
import { LedgerStore } from './ledger.js';
import { isPostgresUrl, redactUrl } from './location.js';
import { openPgDatabase } from './pg/open.js';
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

export type { AccountAttemptRow, AccountFacts, AccountLedgerRow } from './account-reads.js';
export { BLOCKING_STATES, type WaitingOn } from './chains.js';
export { StoreError } from './db.js';
export { bodyHash, keyFingerprint } from './fingerprint.js';
export type { JobEvent } from './jobs.js';
export { leaseHolder } from './leases.js';
export { MIGRATIONS, type Migration } from './migrations.js';
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
export { type MoneyFigures, OverBudgetError } from './reservations.js';
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

/** The outcome of one write of a `batch`. */
export type BatchResult = { ok: true; value: unknown } | { ok: false; error: unknown };

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
 * in another process is never slowed or blocked. Every write method fails (SQLITE_READONLY). A file of
 * an older schema is refused with kind 'older' (open it once with openStore to migrate it).
 */
export function openReadOnlyStore(file: string, opts: StoreOptions = {}): Store {
  const now = opts.now ?? (() => new Date());
  return new Store(file, openDatabaseReadOnly(file), now);
}

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

  // Runs
  readonly createRun: RunStore['createRun'];
  readonly getRun: RunStore['getRun'];
  readonly listRuns: RunStore['listRuns'];
  readonly unfinishedRuns: RunStore['unfinishedRuns'];
  readonly unfinishedRunOf: RunStore['unfinishedRunOf'];
  readonly bindRunToApi: RunStore['bindRunToApi'];
  readonly markRunState: RunStore['markRunState'];
  readonly setRunBalance: RunStore['setRunBalance'];
  readonly updateRunSettings: RunStore['updateRunSettings'];
  readonly setCallbackToken: RunStore['setCallbackToken'];

  // Tasks
  readonly upsertTasks: TaskStore['upsertTasks'];
  readonly getTask: TaskStore['getTask'];
  readonly getTaskByImgUuid: TaskStore['getTaskByImgUuid'];
  readonly tasksOfRun: TaskStore['tasksOfRun'];
  readonly tasksByState: TaskStore['tasksByState'];
  readonly nextPending: TaskStore['nextPending'];
  readonly countTasksByState: TaskStore['countTasksByState'];
  readonly pendingByModel: TaskStore['pendingByModel'];
  readonly tasksToWatch: TaskStore['tasksToWatch'];
  readonly nextPollAt: TaskStore['nextPollAt'];
  readonly notePolled: TaskStore['notePolled'];
  readonly setNextPoll: TaskStore['setNextPoll'];
  readonly markBlocked: TaskStore['markBlocked'];
  readonly unblock: TaskStore['unblock'];
  readonly requeueTasks: TaskStore['requeueTasks'];
  readonly markDone: TaskStore['markDone'];
  readonly moveTask: TaskStore['moveTask'];
  readonly setTaskError: TaskStore['setTaskError'];

  // Local inputs in a bucket
  readonly hasUpload: UploadStore['hasUpload'];
  readonly recordUpload: UploadStore['recordUpload'];
  readonly pendingRequestsWith: UploadStore['pendingRequestsWith'];

  // Chains
  readonly hasChains: ChainStore['hasChains'];
  readonly upstreamsOf: ChainStore['upstreamsOf'];
  readonly upstreamsOfRun: ChainStore['upstreamsOfRun'];
  readonly waitingOnActive: ChainStore['waitingOnActive'];
  readonly blockDownstreams: ChainStore['blockDownstreams'];
  readonly unblockDownstreams: ChainStore['unblockDownstreams'];
  readonly fillIn: ChainStore['fillIn'];
  readonly rejectUnsent: ChainStore['rejectUnsent'];
  readonly skipDownstreams: ChainStore['skipDownstreams'];

  // Choosing results
  readonly awaitingReview: ReviewStore['awaiting'];
  readonly countAwaitingReview: ReviewStore['countAwaiting'];
  readonly reviewedTasks: ReviewStore['reviewedTasks'];
  readonly hasReviewed: ReviewStore['hasReviewed'];
  readonly decisionMark: ReviewStore['decisionMark'];
  readonly decisionsOf: ReviewStore['decisionsOf'];
  readonly queuedRerollMax: ReviewStore['queuedRerollMax'];
  readonly decide: ReviewStore['decide'];
  readonly decideMany: ReviewStore['decideMany'];
  readonly reviewCounts: ReviewStore['reviewCounts'];
  readonly waitingOnReview: ReviewStore['waitingOnReview'];
  readonly rerollSpend: ReviewStore['rerollSpend'];
  readonly dropEarlierFiles: ReviewStore['dropEarlierFiles'];
  readonly tasksAwaitingReview: ReviewStore['tasksAwaitingReview'];
  readonly shownStateOf: ReviewStore['shownStateOf'];

  // Submissions
  readonly recordSubmitIntent: SubmissionStore['recordSubmitIntent'];
  readonly moneyFigures: ReservationStore['figures'];
  readonly setRunBudget: ReservationStore['setBudget'];
  readonly heldFor: ReservationStore['heldFor'];
  readonly recordSubmitted: SubmissionStore['recordSubmitted'];
  readonly recordNotCharged: SubmissionStore['recordNotCharged'];
  readonly recordInDoubt: SubmissionStore['recordInDoubt'];
  readonly recoverInterruptedSubmissions: SubmissionStore['recoverInterruptedSubmissions'];
  readonly attemptsOf: SubmissionStore['attemptsOf'];
  readonly adoptInDoubt: SubmissionStore['adoptInDoubt'];
  readonly chargedAttempts: SubmissionStore['chargedAttempts'];

  // Jobs and files
  readonly recordJobStatus: JobStore['recordJobStatus'];
  readonly jobEvents: JobStore['jobEvents'];
  readonly recordFile: FileStore['recordFile'];
  readonly filesOfTask: FileStore['filesOfTask'];
  readonly filesOfRun: FileStore['filesOfRun'];

  // Ledger and quota
  readonly ledgerSpent: LedgerStore['ledgerSpent'];
  readonly ledgerSpentSince: LedgerStore['ledgerSpentSince'];
  readonly spendByPeriod: LedgerStore['spendByPeriod'];
  readonly runSpent: LedgerStore['runSpent'];
  readonly manifestSpent: LedgerStore['manifestSpent'];
  readonly modelTotals: LedgerStore['modelTotals'];
  readonly recordQuota: LedgerStore['recordQuota'];
  readonly getQuota: LedgerStore['getQuota'];
  readonly taskSpend: SpendStore['taskSpend'];
  readonly runKeys: SpendStore['runKeys'];

  // The cost report, a page of tasks at a time
  readonly reportTaskPages: ReportReadStore['reportTaskPages'];
  readonly reportModelFigures: ReportReadStore['reportModelFigures'];
  readonly runFileTotals: ReportReadStore['runFileTotals'];
  readonly taskAttemptCounts: ReportReadStore['taskAttemptCounts'];
  readonly problemTasks: ReportReadStore['problemTasks'];
  readonly notOnDiskByState: ReportReadStore['notOnDiskByState'];
  readonly runTotals: ReportReadStore['runTotals'];

  // Leases and schedules
  readonly acquireLease: LeaseStore['acquireLease'];
  readonly renewLease: LeaseStore['renewLease'];
  readonly releaseLease: LeaseStore['releaseLease'];
  readonly getLease: LeaseStore['getLease'];
  readonly recordFiring: ScheduleStore['recordFiring'];
  readonly claimFiring: ScheduleStore['claimFiring'];
  readonly setNextFire: ScheduleStore['setNextFire'];
  readonly getSchedule: ScheduleStore['getSchedule'];
  readonly currentReportBasis: ReportBasisStore['currentReportBasis'];
  readonly storedReportBasis: ReportBasisStore['storedReportBasis'];
  readonly rememberReportBasis: ReportBasisStore['rememberReportBasis'];
  readonly listSchedules: ScheduleStore['listSchedules'];

  // Long on purpose: every statement is prepared once, here, and named for what it does.
  /** Use openStore(); this takes a database already opened and migrated. */
  constructor(file: string, db: Db, now: Clock) {
    this.file = file;
    this.#db = db;

    const runs = new RunStore(db, now);
    this.createRun = runs.createRun.bind(runs);
    this.getRun = runs.getRun.bind(runs);
    this.listRuns = runs.listRuns.bind(runs);
    this.unfinishedRuns = runs.unfinishedRuns.bind(runs);
    this.unfinishedRunOf = runs.unfinishedRunOf.bind(runs);
    this.bindRunToApi = runs.bindRunToApi.bind(runs);
    this.markRunState = runs.markRunState.bind(runs);
    this.setRunBalance = runs.setRunBalance.bind(runs);
    this.updateRunSettings = runs.updateRunSettings.bind(runs);
    this.setCallbackToken = runs.setCallbackToken.bind(runs);

    const uploads = new UploadStore(db, now);
    this.hasUpload = uploads.hasUpload.bind(uploads);
    this.recordUpload = uploads.recordUpload.bind(uploads);
    this.pendingRequestsWith = uploads.pendingRequestsWith.bind(uploads);

    const chains = new ChainStore(db, now);
    this.hasChains = chains.hasChains.bind(chains);
    this.upstreamsOf = chains.upstreamsOf.bind(chains);
    this.upstreamsOfRun = chains.upstreamsOfRun.bind(chains);
    this.waitingOnActive = chains.waitingOnActive.bind(chains);
    this.blockDownstreams = chains.blockDownstreams.bind(chains);
    this.unblockDownstreams = chains.unblockDownstreams.bind(chains);
    this.fillIn = chains.fillIn.bind(chains);
    this.rejectUnsent = chains.rejectUnsent.bind(chains);
    this.skipDownstreams = chains.skipDownstreams.bind(chains);

    const reservations = new ReservationStore(db);
    this.moneyFigures = reservations.figures.bind(reservations);
    this.setRunBudget = reservations.setBudget.bind(reservations);
    this.heldFor = reservations.heldFor.bind(reservations);
    const reviews = new ReviewStore(db, now, chains, reservations);
    this.awaitingReview = reviews.awaiting.bind(reviews);
    this.countAwaitingReview = reviews.countAwaiting.bind(reviews);
    this.reviewedTasks = reviews.reviewedTasks.bind(reviews);
    this.hasReviewed = reviews.hasReviewed.bind(reviews);
    this.decisionMark = reviews.decisionMark.bind(reviews);
    this.decisionsOf = reviews.decisionsOf.bind(reviews);
    this.queuedRerollMax = reviews.queuedRerollMax.bind(reviews);
    this.decide = reviews.decide.bind(reviews);
    this.decideMany = reviews.decideMany.bind(reviews);
    this.reviewCounts = reviews.reviewCounts.bind(reviews);
    this.waitingOnReview = reviews.waitingOnReview.bind(reviews);
    this.rerollSpend = reviews.rerollSpend.bind(reviews);
    this.dropEarlierFiles = reviews.dropEarlierFiles.bind(reviews);
    this.tasksAwaitingReview = reviews.tasksAwaitingReview.bind(reviews);
    this.shownStateOf = reviews.shownStateOf.bind(reviews);

    const tasks = new TaskStore(db, now, chains);
    this.upsertTasks = tasks.upsertTasks.bind(tasks);
    this.getTask = tasks.getTask.bind(tasks);
    this.getTaskByImgUuid = tasks.getTaskByImgUuid.bind(tasks);
    this.tasksOfRun = tasks.tasksOfRun.bind(tasks);
    this.tasksByState = tasks.tasksByState.bind(tasks);
    this.nextPending = tasks.nextPending.bind(tasks);
    this.countTasksByState = tasks.countTasksByState.bind(tasks);
    this.pendingByModel = tasks.pendingByModel.bind(tasks);
    this.tasksToWatch = tasks.tasksToWatch.bind(tasks);
    this.nextPollAt = tasks.nextPollAt.bind(tasks);
    this.notePolled = tasks.notePolled.bind(tasks);
    this.setNextPoll = tasks.setNextPoll.bind(tasks);
    this.markBlocked = tasks.markBlocked.bind(tasks);
    this.unblock = tasks.unblock.bind(tasks);
    this.requeueTasks = tasks.requeueTasks.bind(tasks);
    this.markDone = tasks.markDone.bind(tasks);
    this.moveTask = tasks.moveTask.bind(tasks);
    this.setTaskError = tasks.setTaskError.bind(tasks);

    const submissions = new SubmissionStore(db, now, reservations);
    this.recordSubmitIntent = submissions.recordSubmitIntent.bind(submissions);
    this.recordSubmitted = submissions.recordSubmitted.bind(submissions);
    this.recordNotCharged = submissions.recordNotCharged.bind(submissions);
    this.recordInDoubt = submissions.recordInDoubt.bind(submissions);
    this.recoverInterruptedSubmissions = submissions.recoverInterruptedSubmissions.bind(submissions);
    this.attemptsOf = submissions.attemptsOf.bind(submissions);
    this.adoptInDoubt = submissions.adoptInDoubt.bind(submissions);
    this.chargedAttempts = submissions.chargedAttempts.bind(submissions);

    const jobs = new JobStore(db, now);
    this.recordJobStatus = jobs.recordJobStatus.bind(jobs);
    this.jobEvents = jobs.jobEvents.bind(jobs);
    const files = new FileStore(db, now);
    this.recordFile = files.recordFile.bind(files);
    this.filesOfTask = files.filesOfTask.bind(files);
    this.filesOfRun = files.filesOfRun.bind(files);

    const ledger = new LedgerStore(db, now);
    this.ledgerSpent = ledger.ledgerSpent.bind(ledger);
    this.ledgerSpentSince = ledger.ledgerSpentSince.bind(ledger);
    this.spendByPeriod = ledger.spendByPeriod.bind(ledger);
    this.runSpent = ledger.runSpent.bind(ledger);
    this.manifestSpent = ledger.manifestSpent.bind(ledger);
    this.modelTotals = ledger.modelTotals.bind(ledger);
    this.recordQuota = ledger.recordQuota.bind(ledger);
    this.getQuota = ledger.getQuota.bind(ledger);
    const spend = new SpendStore(db);
    this.taskSpend = spend.taskSpend.bind(spend);
    this.runKeys = spend.runKeys.bind(spend);
    const reportReads = new ReportReadStore(db);
    this.reportTaskPages = reportReads.reportTaskPages.bind(reportReads);
    this.reportModelFigures = reportReads.reportModelFigures.bind(reportReads);
    this.runFileTotals = reportReads.runFileTotals.bind(reportReads);
    this.taskAttemptCounts = reportReads.taskAttemptCounts.bind(reportReads);
    this.problemTasks = reportReads.problemTasks.bind(reportReads);
    this.notOnDiskByState = reportReads.notOnDiskByState.bind(reportReads);
    this.runTotals = reportReads.runTotals.bind(reportReads);

    const basis = new ReportBasisStore(db);
    this.currentReportBasis = basis.currentReportBasis.bind(basis);
    this.storedReportBasis = basis.storedReportBasis.bind(basis);
    this.rememberReportBasis = basis.rememberReportBasis.bind(basis);

    const leases = new LeaseStore(db, now);
    this.acquireLease = leases.acquireLease.bind(leases);
    this.renewLease = leases.renewLease.bind(leases);
    this.releaseLease = leases.releaseLease.bind(leases);
    this.getLease = leases.getLease.bind(leases);
    const schedules = new ScheduleStore(db, now);
    this.recordFiring = schedules.recordFiring.bind(schedules);
    this.claimFiring = schedules.claimFiring.bind(schedules);
    this.setNextFire = schedules.setNextFire.bind(schedules);
    this.getSchedule = schedules.getSchedule.bind(schedules);
    this.listSchedules = schedules.listSchedules.bind(schedules);
  }

  get isOpen(): boolean {
    return this.#db.open;
  }

  /**
   * Runs several writes in one transaction: one commit (one fsync) for all of them, which is what lets a
   * run with many tasks in flight keep up. Each write gets its own savepoint, so one that throws (a
   * refused move) is rolled back alone and reported in its slot; the others commit. Nothing is durable
   * until this returns, and callers act on a write only after that.
   */
  batch(writes: readonly (() => unknown)[]): BatchResult[] {
    if (!this.#batchAll) {
      const savepoint = this.#db.transaction((write: () => unknown) => write());
      this.#batchAll = this.#db.transaction((list: readonly (() => unknown)[], results: BatchResult[]) => {
        for (const write of list) {
          try {
            results.push({ ok: true, value: savepoint(write) });
          } catch (error) {
            results.push({ ok: false, error });
          }
        }
      });
    }
    const results: BatchResult[] = [];
    this.#batchAll.immediate(writes, results);
    return results;
  }

  #batchAll: { immediate: (list: readonly (() => unknown)[], results: BatchResult[]) => void } | undefined;

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
