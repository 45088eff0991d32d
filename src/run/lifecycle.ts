// A run's life after it is opened: the preflight (figures and a decision, no printing), the execution
// (the Runner with its lease, its callback receiver and its policy), and the close (the balance after,
// the final state, the report). The CLI and the scheduler call these and only word the outcome.

import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { ApiClient } from '../api/client.js';
import { type DownloadOptions, type DownloadResult, downloadResult } from '../api/download.js';
import { UNAUTHORIZED_MESSAGE } from '../api/errors.js';
import { findEntry, roundTokens } from '../catalog/index.js';
import type { PriceTable } from '../catalog/types.js';
import { EXIT, type ExitCode } from '../exit-codes.js';
import type { TaskOrder } from '../manifest/types.js';
import { owedSoFar } from '../money/index.js';
import { resultsRunId } from '../plan/shard.js';
import type { ReportOptions, WrittenReport } from '../report/index.js';
import { reportFiles, writeReport } from '../report/index.js';
import { abortUnfinishedUploads, type BucketOutput, objectUrl, putText } from '../results/bucket.js';
import type { Reader } from '../results/invocation.js';
import { isBucketLocation } from '../results/output.js';
import { StorageError } from '../storage/index.js';
import { type Store, type TaskState, UNFINISHED } from '../store/index.js';
import { quotaStanding } from '../store/quota.js';
import type { Logger } from '../util/log.js';
import { fromMicro } from '../util/money.js';
import { bucketExtraReader, putReportFiles } from './bucket-report.js';
import {
  type CallbackHint,
  type CallbackReceiver,
  callbackKey,
  callbackUrlFor,
  startCallbackReceiver,
} from './callbacks.js';
import { checkOutputFolder, expectedResultBytes, type OutputCheck } from './disk.js';
import type { RunEvent } from './events.js';
import { claimBucketPrefix, MARKER_FILE, RunFolderTakenError } from './marker.js';
import { decidePreflight, type PreflightDecision } from './preflight.js';
import type { RunnerOptions, StopReason } from './runner/types.js';
import { Runner, type RunProgress, type RunResult } from './runner.js';
import { type PendingModel, RunError, type RunSession } from './session.js';
import { downloadConcurrencyFor, type RunPolicy, runnerPolicyOf, withCallbacks } from './settings.js';
import { unstoredOf } from './storing.js';

export type { PendingModel };

export interface QuotaFigures {
  limit: number;
  used: number;
  /** Where the figures come from, in words. */
  source: string;
}

export interface PreflightReport {
  counts: Record<TaskState, number>;
  /** Of the tasks to submit, those that wait for a reviewed result: priced as if it were approved. */
  waitingOnReview: number;
  /** Nothing is pending or being watched: the run has nothing left to do. */
  complete: boolean;
  /** What this session would submit (narrowed by `only` and `limit`), per model. */
  pending: PendingModel[];
  pendingCount: number;
  /** Submitted jobs and results still to fetch. */
  toWatch: number;
  remaining: { tokens: number; min: number; max: number };
  balance: number | undefined;
  /** Why the balance is unknown, when it is. */
  balanceProblem?: string;
  quota: QuotaFigures | undefined;
  budget: number | undefined;
  chargedSoFar: number;
  /** Worst cases the run holds beside the tasks it would send (in doubt, in flight): they may be charged. */
  reservedSoFar: number;
  decision: PreflightDecision;
  /** The output folder's check; undefined when nothing is to be submitted. */
  disk: OutputCheck | undefined;
}

/** The budget a session works under: the manifest's, or the caller's cap (a period's rest), the lower. */
export function effectiveBudget(
  manifestBudget: number | undefined,
  cap: number | undefined,
): number | undefined {
  if (cap === undefined) return manifestBudget;
  return manifestBudget === undefined ? cap : Math.min(manifestBudget, cap);
}

export interface PreflightOptions {
  client: ApiClient;
  keyFingerprint: string;
  /** The account's quota from configuration, when set. */
  configQuota: number | undefined;
  budget: number | undefined;
  allowPartial: boolean;
  only?: readonly string[];
  limit?: number;
  order?: TaskOrder;
  now: Date;
  shown?: (path: string) => string;
}

/** What the caller of a session knows; the preflight's options are put together from it here, once. */
export interface PreflightRequest {
  client: ApiClient;
  keyFingerprint: string;
  configQuota: number | undefined;
  /** The manifest's settings: its budget and its order of submission. */
  settings: { budget?: number | undefined; order?: TaskOrder | undefined };
  /** A cap on top of the manifest's budget (`--budget`, or what is left of a period's budget). */
  budgetCap?: number | undefined;
  allowPartial?: boolean | undefined;
  only?: readonly string[] | undefined;
  limit?: number | undefined;
  /** The order asked for on the command line, over the manifest's. */
  order?: TaskOrder | undefined;
  now: Date;
  shown?: (path: string) => string;
}

/** The preflight's options for a session: the budget it works under, the order, partial runs refused by default. */
export function preflightOptions(r: PreflightRequest): PreflightOptions {
  const order = r.order ?? r.settings.order;
  return {
    client: r.client,
    keyFingerprint: r.keyFingerprint,
    configQuota: r.configQuota,
    budget: effectiveBudget(r.settings.budget, r.budgetCap),
    allowPartial: r.allowPartial ?? false,
    ...(r.only !== undefined ? { only: r.only } : {}),
    ...(r.limit !== undefined ? { limit: r.limit } : {}),
    ...(order !== undefined ? { order } : {}),
    now: r.now,
    ...(r.shown !== undefined ? { shown: r.shown } : {}),
  };
}

/** Unfinished tasks already sent: pending and awaiting review (a pending task shown apart) are not. */
function sentAndUnfinished(counts: Record<TaskState, number>): number {
  return UNFINISHED.reduce((n, s) => (s === 'pending' || s === 'awaiting_review' ? n : n + counts[s]), 0);
}

/** Gathers every figure the preflight shows and decides. Throws RunError('unauthorized') on a 401. */
export async function preflightRun(session: RunSession, o: PreflightOptions): Promise<PreflightReport> {
  const { store, runId } = session;
  const counts = store.tasks.countTasksByState(runId);
  // A new run still being stored: its plan says what it will submit (every task of it is pending).
  const storing = session.storing?.ended === false ? session.storing : undefined;
  if (storing) counts.pending += storing.unstored;
  const pending =
    storing && session.plannedPending
      ? session.plannedPending
      : store.tasks.pendingByModel(runId, {
          ...(o.only !== undefined ? { only: o.only } : {}),
          ...(o.limit !== undefined ? { limit: o.limit } : {}),
          ...(o.order !== undefined ? { order: o.order } : {}),
        });
  const pendingCount = pending.reduce((n, m) => n + m.tasks, 0);
  const toWatch = sentAndUnfinished(counts);
  const remaining = {
    tokens: roundTokens(pending.reduce((n, m) => n + m.tokens, 0)),
    min: roundTokens(pending.reduce((n, m) => n + m.min, 0)),
    max: roundTokens(pending.reduce((n, m) => n + m.max, 0)),
  };
  // What the store says the run spent and may still owe (src/money's figures, as every spender reads them).
  const owed = owedSoFar(store, runId);
  const soFar = { chargedSoFar: fromMicro(owed.spent), reservedSoFar: fromMicro(owed.reserved) };
  const waitingOnReview = store.reviews.waitingOnReview(runId);
  const base = {
    counts,
    waitingOnReview,
    pending,
    pendingCount,
    toWatch,
    remaining,
    budget: o.budget,
    ...soFar,
  };
  // A result awaiting review keeps the run open: a re-roll or an approval may still send something.
  const unsent = counts.pending + counts.awaiting_review;
  if (unsent === 0 && toWatch === 0 && store.reviews.countAwaiting(runId) === 0) {
    const decision = decidePreflight({ remainingMax: 0, remainingTokens: 0, ...soFar, allowPartial: true });
    return { ...base, complete: true, balance: undefined, quota: undefined, decision, disk: undefined };
  }
  const answer = await o.client.getBalance();
  if (answer.type === 'unauthorized') {
    session.refuse(EXIT.unauthorized);
    throw new RunError('unauthorized', UNAUTHORIZED_MESSAGE);
  }
  const balance = answer.type === 'ok' ? answer.value : undefined;
  if (balance !== undefined && !session.existing) store.runs.setRunBalance(runId, { before: balance });
  const quota = quotaFigures(store, o.configQuota, o.keyFingerprint, o.now);
  const decision = decidePreflight({
    remainingMax: remaining.max,
    remainingTokens: remaining.tokens,
    ...soFar,
    ...(balance !== undefined ? { balance } : {}),
    ...(quota ? { quota } : {}),
    ...(o.budget !== undefined ? { budget: o.budget } : {}),
    allowPartial: o.allowPartial,
  });
  // A bucket has no disk to fill: its own check comes when the run starts (credentials, the bucket itself).
  const disk =
    pendingCount > 0 && !isBucketLocation(session.runDir)
      ? await checkDisk(session, pending, o.shown)
      : undefined;
  return {
    ...base,
    complete: false,
    balance,
    ...(answer.type === 'ok'
      ? {}
      : { balanceProblem: answer.type === 'retryable' ? answer.reason : answer.message }),
    quota,
    decision,
    disk,
  };
}

async function checkDisk(
  session: RunSession,
  pending: readonly PendingModel[],
  shown: ((path: string) => string) | undefined,
): Promise<OutputCheck> {
  const byKind: Partial<Record<'image' | 'audio' | 'video', number>> = {};
  for (const m of pending) {
    const kind = findEntry(m.model)?.kind;
    if (kind) byKind[kind] = (byKind[kind] ?? 0) + m.tasks;
  }
  return checkOutputFolder(
    session.runDir,
    expectedResultBytes(byKind),
    shown?.(session.runDir) ?? session.runDir,
  );
}

/** The quota as the preflight weighs it: its limit and what is used, from quota.ts's one rule. */
export function quotaFigures(
  store: Store,
  configQuota: number | undefined,
  fingerprint: string,
  now: Date,
): QuotaFigures | undefined {
  const standing = quotaStanding(store, configQuota, fingerprint, now);
  if (standing.limit === null || standing.used === null || standing.source === null) return undefined;
  return { limit: standing.limit, used: standing.used, source: standing.source };
}

export interface ExecuteOptions {
  client: ApiClient;
  keyFingerprint: string;
  logger: Logger;
  policy: RunPolicy;
  concurrency: number;
  budget?: number;
  retries?: number;
  only?: readonly string[];
  limit?: number;
  order?: TaskOrder;
  /** The account's prices: chained tasks are priced exactly with them when filled in. */
  prices?: PriceTable;
  /** A callback receiver on this address; `publicBase` is what the service is told (its own address when absent). */
  receiver?: { host: string; port: number; publicBase?: string };
  /** Without a receiver: the callback URL every task is sent with (a receiver of the user's). */
  plainCallbackUrl?: string;
  /** Every task id of the manifest: callbacks for others are ignored. */
  taskIds: readonly string[];
  stop: AbortSignal;
  halt?: AbortSignal;
  onProgress?: (progress: RunProgress) => void;
  onEvent?: (event: RunEvent) => void;
  /** Called once the receiver listens, with the address the service is told. */
  onReceiver?: (receiver: CallbackReceiver, publicBase: string) => void;
  download?: (url: string, dest: string, opts: DownloadOptions) => Promise<DownloadResult>;
  /** Local inputs, uploaded already: turns `file:` values into fresh links at each POST (runner/uploads.ts). */
  inputLinks?: RunnerOptions['inputLinks'];
  /** `run --wait-for-review`: keep submitting until every reviewed result is decided. */
  waitForReview?: boolean;
  reviewPollMs?: number;
  /** Results go to this bucket (`output: s3://…` or `storage`), not to the local disk. */
  bucket?: BucketOutput;
}

export interface RunOutcome {
  result: RunResult;
  /** The exit code the run's record keeps (and the CLI exits with). */
  exitCode: ExitCode;
  state: 'finished' | 'interrupted';
  unfinished: number;
  spent: { charged: number; refunded: number; net: number };
  balanceAfter: number | undefined;
  receiverStats?: { received: number; ignored: number };
  /** A worker of a fleet that left while others still work on the run: they close it, not this one. */
  left?: { others: number };
}

/** Marks the run running, drives it to its end, and closes it. The lease is renewed meanwhile. */
export async function executeRun(session: RunSession, o: ExecuteOptions): Promise<RunOutcome> {
  const { store, runId } = session;
  if (o.bucket) {
    await readyBucket(o.bucket, o.logger);
    await claimPrefix(o.bucket, session);
  }
  if (session.existing && session.fleet?.joined !== true) store.runs.markRunState(runId, 'running');
  session.startWorking();
  let runner: Runner | undefined;
  const receiver =
    o.receiver && session.callbackToken ? await startReceiver(session, o, (h) => runner?.hint(h)) : undefined;
  const callbackBase = receiver ? (o.receiver?.publicBase ?? receiver.localUrl) : undefined;
  if (receiver && callbackBase) o.onReceiver?.(receiver, callbackBase);
  const token = session.callbackToken;
  const callbackUrl =
    receiver && callbackBase && token
      ? (taskId: string) => callbackUrlFor(callbackBase, token, taskId)
      : o.plainCallbackUrl
        ? () => o.plainCallbackUrl as string
        : undefined;
  runner = new Runner(
    {
      store,
      client: o.client,
      keyFingerprint: o.keyFingerprint,
      logger: o.logger,
      download: o.download ?? downloadResult,
      ...(o.onProgress ? { onProgress: o.onProgress } : {}),
      ...(o.onEvent ? { onEvent: o.onEvent } : {}),
    },
    runnerOptions(session, o, { callbackUrl, receiving: receiver !== undefined }),
  );
  const active = runner;
  // A worker of a fleet beats in its runner instead (store.workers); a lone run renews its lease, at the
  // lease's own time to live (the one it was taken with), not the policy's.
  const renew = setInterval(() => {
    if (!session.renew()) active.leaseLost();
  }, session.leaseTtlMs / 4);
  renew.unref();
  let result: RunResult;
  try {
    result = await active.run();
  } finally {
    clearInterval(renew);
    await receiver?.close();
  }
  if (session.fleet) {
    const leaving = store.claims.leave(runId, session.holder);
    if (!leaving.last) return leftOutcome(session, result, leaving.others);
    // The last worker out closes the run: what nobody gives anything any more is said to be blocked.
    if (store.chains.hasChains(runId)) store.chains.blockDownstreams(runId);
    result.counts = store.tasks.countTasksByState(runId);
    // A plan nobody finished storing (every worker stopped): its missing tasks are pending, the run unfinished.
    result.counts.pending += unstoredOf(store, runId);
  }
  const after = await o.client.getBalance();
  const balanceAfter = after.type === 'ok' ? after.value : undefined;
  if (balanceAfter !== undefined) store.runs.setRunBalance(runId, { after: balanceAfter });
  const exitCode = exitCodeFor(result.stopReason, result.counts, result.awaitingReview);
  const unfinished = UNFINISHED.reduce((n, s) => n + result.counts[s], 0);
  const state =
    unfinished === 0 && !result.stopReason && result.awaitingReview === 0 ? 'finished' : 'interrupted';
  store.runs.markRunState(runId, state, exitCode);
  // A process whose run another one took over stops for itself: the run goes on there.
  if (state === 'interrupted' && result.stopReason !== 'lease-lost') {
    store.runs.recordStop(runId, stopOf(result, unfinished));
  }
  return {
    result,
    exitCode,
    state,
    unfinished,
    spent: store.ledger.runSpent(runId),
    balanceAfter,
    ...(receiver
      ? { receiverStats: { received: receiver.stats.received, ignored: receiver.stats.ignored } }
      : {}),
  };
}

/** The stops of one worker that stop every worker of a fleet: the run's money or its key. */
const RUN_WIDE_STOPS: ReadonlySet<StopReason> = new Set<StopReason>([
  'budget',
  'period-budget',
  'insufficient-tokens',
  'quota-exceeded',
  'unauthorized',
]);

/** Why a run that did not finish stopped, as `status` and the report say it. */
function stopOf(result: RunResult, unfinished: number): { reason: string; message: string } {
  if (result.stopReason !== undefined) {
    return { reason: result.stopReason, message: result.stopMessage ?? result.stopReason };
  }
  if (result.awaitingReview > 0) {
    return {
      reason: 'review',
      message: `${result.awaitingReview} result(s) await review; their downstreams wait for the decisions`,
    };
  }
  return {
    reason: 'unfinished',
    message: `${unfinished} task(s) left unfinished (${result.unfinishedWhy ?? 'retries used up, a job the API did not know, a download to retry'})`,
  };
}

/** A worker that left a run others still work on: its own figures; the run stays running. */
function leftOutcome(session: RunSession, result: RunResult, others: number): RunOutcome {
  // A worker's own end (a signal, its disk) is not the run's; money that ran out is everyone's.
  if (result.stopReason !== undefined && RUN_WIDE_STOPS.has(result.stopReason)) {
    session.store.runs.recordStop(session.runId, stopOf(result, 0));
  }
  const exitCode = result.stopReason ? exitCodeFor(result.stopReason, result.counts) : EXIT.ok;
  const unfinished = UNFINISHED.reduce((n, s) => n + result.counts[s], 0);
  return {
    result,
    exitCode,
    state: 'interrupted',
    unfinished,
    spent: session.store.ledger.runSpent(session.runId),
    balanceAfter: undefined,
    left: { others },
  };
}

/** The Runner's options: the run's policy, the caller's options, and where callbacks go (if anywhere). */
function runnerOptions(
  session: RunSession,
  o: ExecuteOptions,
  callbacks: { callbackUrl: ((taskId: string) => string) | undefined; receiving: boolean },
): RunnerOptions {
  const { runId } = session;
  const { callbackUrl } = callbacks;
  return {
    runId,
    ...(session.fleet
      ? {
          fleet: {
            workerId: session.holder,
            ttlMs: session.fleet.ttlMs,
            idlePollMs: Math.min(1_000, session.fleet.ttlMs / 8),
          },
        }
      : {}),
    runDir: session.runDir,
    concurrency: o.concurrency,
    ...(o.budget !== undefined ? { budget: o.budget } : {}),
    // Callbacks can be dropped after three failed attempts: polling stays on, slowly, as the safety net.
    pollProfiles: callbacks.receiving ? withCallbacks(o.policy) : o.policy.pollProfiles,
    jobTimeScale: o.policy.jobTimeScale,
    ...(callbackUrl ? { callbackUrlFor: callbackUrl } : {}),
    ...runnerPolicyOf(o.policy),
    downloadConcurrency: downloadConcurrencyFor(o.concurrency),
    ...(o.retries !== undefined ? { retries: o.retries } : {}),
    ...(o.only !== undefined ? { only: o.only } : {}),
    ...(o.limit !== undefined ? { limit: o.limit } : {}),
    ...(o.order !== undefined ? { order: o.order } : {}),
    ...(o.prices !== undefined ? { prices: o.prices } : {}),
    ...(o.bucket ? { bucket: o.bucket } : {}),
    watch: o.policy.watch,
    stop: o.stop,
    ...(o.halt ? { halt: o.halt } : {}),
    ...(o.inputLinks ? { inputLinks: o.inputLinks } : {}),
    ...(session.storing ? { incoming: session.storing } : {}),
    ...(o.waitForReview ? { waitForReview: true } : {}),
    ...(o.reviewPollMs !== undefined ? { reviewPollMs: o.reviewPollMs } : {}),
  };
}

async function startReceiver(
  session: RunSession,
  o: ExecuteOptions,
  onHint: (hint: CallbackHint) => Promise<boolean> | undefined,
): Promise<CallbackReceiver> {
  const at = o.receiver as { host: string; port: number };
  // Tasks the manifest no longer lists keep their jobs; their callbacks are ignored and polling finds them.
  const byKey = new Map(o.taskIds.map((id) => [callbackKey(id), id]));
  try {
    return await startCallbackReceiver({
      host: at.host,
      port: at.port,
      token: session.callbackToken as string,
      taskForKey: (key) => byKey.get(key),
      onHint,
      logger: o.logger,
    });
  } catch (error) {
    throw new RunError(
      'invalid',
      `--listen ${at.host}:${at.port}: cannot start the callback receiver (${(error as Error).message})`,
    );
  }
}

/** A run that has nothing left to do: recorded as finished (unless it already was), with its exit code. */
export function closeCompleteRun(session: RunSession, counts: Record<TaskState, number>): ExitCode {
  const code = exitCodeFor(undefined, counts);
  // Nothing happened: a finished run's times stay those of its real start and end.
  if (session.existing?.state !== 'finished')
    session.store.runs.markRunState(session.runId, 'finished', code);
  return code;
}

/** The exit code of a run's end (docs/troubleshooting.md): 5 refused key, 4 stopped or unfinished, 2 some failed, 0 ok. */
export function exitCodeFor(
  stopReason: RunResult['stopReason'],
  counts: Record<TaskState, number>,
  awaitingReview = 0,
): ExitCode {
  if (stopReason === 'unauthorized') return EXIT.unauthorized;
  if (stopReason) return EXIT.interrupted;
  // Results waiting for a person: resumable once they are decided.
  if (awaitingReview > 0) return EXIT.interrupted;
  // Tasks left unfinished (retries exhausted, a job the API did not know, a download to retry) are
  // picked up by the next run: resumable, like an interruption.
  if (UNFINISHED.some((s) => counts[s] > 0)) return EXIT.interrupted;
  const bad = counts.failed + counts.rejected + counts.in_doubt + counts.blocked + counts.lost;
  return bad > 0 ? EXIT.someFailed : EXIT.ok;
}

/** The run's prefix in the bucket, claimed by its shards (src/run/marker.ts); refusals are one line, exit 1. */
async function claimPrefix(bucket: BucketOutput, session: RunSession): Promise<void> {
  const key = `${bucket.runKey}/${MARKER_FILE}`;
  try {
    await claimBucketPrefix(
      objectUrl(bucket, bucket.runKey),
      {
        read: async () =>
          (await bucket.storage.size(key)) === undefined
            ? undefined
            : (await bucket.storage.getBytes(key)).toString('utf8'),
        write: (text) => putText(bucket, key, text, 'application/json'),
      },
      session.runId,
    );
  } catch (error) {
    if (error instanceof RunFolderTakenError) {
      session.refuse(EXIT.invalid);
      throw new RunError('invalid', error.message);
    }
    if (error instanceof StorageError) {
      throw new RunError(error.exitCode === EXIT.unauthorized ? 'unauthorized' : 'invalid', error.message);
    }
    throw error;
  }
}

/**
 * Before anything is submitted into a bucket run: the bucket answers with these credentials (one line,
 * exit 5 or 1, nothing charged), and the multipart uploads a killed run left are aborted (their results
 * are fetched again, whole).
 */
async function readyBucket(bucket: BucketOutput, logger: Logger): Promise<void> {
  try {
    await bucket.storage.check();
    const { aborted, left } = await abortUnfinishedUploads(bucket);
    if (aborted > 0) logger.info({ aborted }, 'aborted the unfinished uploads of a process that stopped');
    if (left > 0) {
      logger.warn(
        { left },
        'the storage server cannot abort the unfinished multipart uploads of a process that stopped; they are no objects, and their parts stay until the bucket lifecycle rule removes them',
      );
    }
  } catch (error) {
    if (error instanceof StorageError) {
      throw new RunError(error.exitCode === EXIT.unauthorized ? 'unauthorized' : 'invalid', error.message);
    }
    throw error;
  }
}

/**
 * Writes report.json/csv/md and the gallery; resolves to their paths, or to the error (a report that
 * cannot be written is a warning: the money and the files are recorded, `mediabatch report` writes it again).
 */
export async function writeRunReport(
  session: Pick<RunSession, 'store' | 'runId' | 'runDir'>,
  o: { now: Date; quota?: number; unlessCurrent?: boolean; bucket?: BucketOutput; reader?: Reader },
): Promise<{ ok: true; markdown: string; gallery: string; current?: true } | { ok: false; error: Error }> {
  const { store, runId, runDir } = session;
  try {
    // Read before writing: a change while the report is written makes the next look see it as stale.
    const basis = store.basis.currentReportBasis(runId, { quota: o.quota ?? null, runDir });
    if (o.unlessCurrent && store.basis.storedReportBasis(runId) === basis) {
      const files = reportFiles(runDir, runId);
      if (existsSync(files.json) && existsSync(files.markdown) && existsSync(files.gallery)) {
        return { ok: true, markdown: files.markdown, gallery: files.gallery, current: true };
      }
    }
    const written = o.bucket
      ? await writeBucketReport(session, o.bucket, o)
      : await writeReport(store, runId, runDir, {
          now: o.now,
          ...(o.quota !== undefined ? { quota: o.quota } : {}),
          ...(o.reader !== undefined ? { reader: o.reader } : {}),
        });
    try {
      store.basis.rememberReportBasis(runId, basis);
    } catch {
      // The report is written; a state file that cannot note it (full) only means the next run writes it again.
    }
    return { ok: true, markdown: written.files.markdown, gallery: written.files.gallery };
  } catch (error) {
    return { ok: false, error: error instanceof Error ? error : new Error(String(error)) };
  }
}

/** The report written in a local temporary folder, then put beside the results in the bucket. */
export async function writeBucketReport(
  session: Pick<RunSession, 'store' | 'runId' | 'runDir'>,
  bucket: BucketOutput,
  o: Pick<ReportOptions, 'now' | 'quota' | 'reader' | 'shownState'>,
  /** Called with the local copies before they are removed (`mediabatch report` prints one). */
  beforeRemoving?: (files: WrittenReport['files']) => Promise<void>,
): Promise<{ files: { markdown: string; gallery: string } }> {
  const temp = await mkdtemp(join(tmpdir(), 'mediabatch-report-'));
  try {
    const written = await writeReport(session.store, session.runId, session.runDir, {
      now: o.now,
      ...(o.quota !== undefined ? { quota: o.quota } : {}),
      ...(o.reader !== undefined ? { reader: o.reader } : {}),
      ...(o.shownState !== undefined ? { shownState: o.shownState } : {}),
      writeTo: join(temp, resultsRunId(session.runId)),
      readExtra: bucketExtraReader(bucket.storage, bucket.runKey),
    });
    await putReportFiles(bucket.storage, bucket.runKey, written.files);
    await beforeRemoving?.(written.files);
    const url = (path: string) => objectUrl(bucket, `${bucket.runKey}/${basename(path)}`);
    return { files: { markdown: url(written.files.markdown), gallery: url(written.files.gallery) } };
  } finally {
    await rm(temp, { recursive: true, force: true });
  }
}
