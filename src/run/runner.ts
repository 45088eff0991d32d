// Drives one run: submits pending tasks with a bounded number in flight, watches their jobs, downloads
// results, and records every step in the store before acting on it. The order per task is the money
// guarantee: intent committed -> POST -> img_uuid and cost committed. Anything that interrupts it leaves
// a row that says what may have happened, and a resumed run reads those rows, never its memory.

import { setMaxListeners } from 'node:events';
import { basename, dirname, extname, join } from 'node:path';
import pLimit from 'p-limit';
import { backoffDelay } from '../api/backoff.js';
import type { ApiClient } from '../api/client.js';
import type { DownloadOptions, DownloadResult } from '../api/download.js';
import type { SubmitOutcome } from '../api/outcome.js';
import type { JobRecord } from '../api/schemas.js';
import { findEntry } from '../catalog/index.js';
import type { CatalogEntry, RequestBody, ResultItemKind } from '../catalog/types.js';
import type { NewFile, Store, TaskRecord, TaskState } from '../store/index.js';
import { jobPhase, withoutSignedQueries } from '../store/index.js';
import {
  ensureFolderUnder,
  removeLeftoverTemps,
  removeLeftoverTempsFor,
  UnsafePathError,
  writeFileAtomic,
} from '../util/fsatomic.js';
import type { Logger } from '../util/log.js';
import { fromMicro, toMicro } from '../util/money.js';
import { sleep as defaultSleep } from '../util/sleep.js';
import { type RunEvent, type RunEventBody, stamp } from './events.js';
import { taskFolderName } from './names.js';
import { DueQueue, nextPollDelay, type PollProfiles } from './polling.js';
import { fitsBudget } from './preflight.js';
import { type FileToFetch, planResults, type ResultPlan } from './results.js';
import { WriteQueue } from './writes.js';

export type StopReason =
  | 'interrupted'
  | 'insufficient-tokens'
  | 'quota-exceeded'
  | 'unauthorized'
  | 'budget'
  | 'unreachable'
  | 'lease-lost'
  | 'local-disk'
  | 'limit'
  | 'internal';

export interface RunnerDeps {
  store: Store;
  client: ApiClient;
  /** Fingerprint of the API key for the ledger; never the key. */
  keyFingerprint: string;
  logger: Logger;
  download: (url: string, dest: string, opts: DownloadOptions) => Promise<DownloadResult>;
  now?: () => number;
  random?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Called whenever counts change (the renderer throttles). */
  onProgress?: (progress: RunProgress) => void;
  /** Called once for each thing that happens to a task (see ./events.ts); must not throw. */
  onEvent?: (event: RunEvent) => void;
}

export type MediaKind = 'image' | 'audio' | 'video';

/** How long the runner waits on the service, and how hard it tries before a task changes state. */
export interface WatchPolicy {
  /** Past this long after submission a job is `stalled`: its slot is released, it is polled slowly. */
  jobDeadlineMs: Record<MediaKind, number>;
  /** Poll interval of a stalled job. */
  stalledPollMs: number;
  /** jobs/detail may not know a job right after its submission: a 404 within this window is waited on. */
  notFoundWindowMs: number;
  /** A job that says success with no result list yet is polled this long before it counts as unfetched. */
  successGraceMs: number;
  /** Fresh job records fetched for one file whose link is refused or expired. */
  linkRefreshes: number;
  /** Result items kept per job; a server listing more is cut there. */
  maxResultItems: number;
  /** Bytes per job, all its files together. */
  maxJobBytes: number;
  /** Throttled (429) answers one task may get before it is left pending for a later run. */
  maxThrottledPerTask: number;
  /** With callbacks, how long the run waits for the callback of a task it just put in doubt. */
  doubtCallbackWaitMs: number;
}

/** Generous on purpose: a video of the service can take many minutes in a busy queue. */
export const DEFAULT_WATCH_POLICY: WatchPolicy = {
  jobDeadlineMs: { image: 30 * 60_000, audio: 60 * 60_000, video: 3 * 60 * 60_000 },
  stalledPollMs: 60_000,
  notFoundWindowMs: 60_000,
  successGraceMs: 60_000,
  linkRefreshes: 3,
  maxResultItems: 16,
  maxJobBytes: 8 * 1024 ** 3,
  maxThrottledPerTask: 200,
  doubtCallbackWaitMs: 30_000,
};

export interface RunnerOptions {
  runId: string;
  /** `<output>/<run>`. */
  runDir: string;
  concurrency: number;
  budget?: number;
  pollProfiles: PollProfiles;
  /** Polls in flight at once, for all jobs together. */
  pollConcurrency: number;
  downloadConcurrency: number;
  maxDownloadBytes: number;
  downloadTimeoutMs: number;
  /** Submissions answered 500 / refused connection are retried this many times per task. */
  submitRetries: number;
  retryBaseMs: number;
  retryCapMs: number;
  /** After this many tasks in a row gave up on retries, stop submitting: the API is down. */
  giveUpAfterTasks: number;
  /** Aborted on the first Ctrl-C / SIGTERM: stop submitting, record the answers in flight, return. */
  stop: AbortSignal;
  /** Aborted on a second Ctrl-C: return at once. */
  halt?: AbortSignal;
  /** With a callback receiver: the URL given to the service for each task. */
  callbackUrlFor?: (taskId: string) => string;
  /** `run --retries N`: replaces every task's own `retries` for this run. */
  retries?: number;
  /** `run --only`: submit only these tasks (the others stay pending). */
  only?: readonly string[];
  /** `run --limit N`: submit at most this many tasks that were pending (a smoke test before the batch). */
  limit?: number;
  watch?: Partial<WatchPolicy>;
}

export interface RunProgress {
  counts: Record<TaskState, number>;
  charged: number;
  refunded: number;
  inFlight: number;
}

export interface RunResult {
  stopReason?: StopReason;
  /** One line for the user about why the run stopped early. */
  stopMessage?: string;
  counts: Record<TaskState, number>;
  polls: number;
  /** How the successes of this process became known: a confirmed callback, or a poll of our own. */
  arrivals: { poll: number; callback: number };
  /** Quota figures learned from a code-101 answer. */
  quota?: { used: number; quota: number; period: string };
  /** Answers from the API that could not be read at all (each retried). */
  unreadableAnswers: number;
  /** In-doubt tasks a callback proved accepted, adopted by this process. */
  recoveredFromDoubt: number;
  /** Failed (refunded) jobs submitted again by `retries`. */
  retriedFailures: number;
}

/** Job statuses on the way; a callback claiming one changes nothing we act on. */
const ON_THE_WAY: ReadonlySet<string> = new Set(['pending', 'processing', 'waiting', 'queued']);
const LOCAL_HINT = 'free space or fix the folder, then run the same command again to fetch it';
const PAID_NOTE = 'the result is paid and still on the service';

interface Watched {
  task: TaskRecord;
  entry: CatalogEntry;
  polls: number;
  /** Whether the task holds one of the run's concurrency slots. */
  holdsSlot: boolean;
  /** When jobs/detail first said success without a result list. */
  emptySuccessSince?: number;
  stalled: boolean;
}

function kindOf(entry: CatalogEntry): MediaKind {
  return entry.kind;
}

export class Runner {
  readonly #deps: RunnerDeps;
  readonly #opts: RunnerOptions;
  readonly #policy: WatchPolicy;
  readonly #now: () => number;
  readonly #random: () => number;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly #log: Logger;

  #stopReason: StopReason | undefined;
  #stopMessage: string | undefined;
  #quota: RunResult['quota'];
  /** Stops submitting (first interrupt, money ran out, budget, API down, a local disk problem). */
  readonly #stopSubmitting = new AbortController();
  /** Stops everything (401, second interrupt, lease lost). */
  readonly #halt = new AbortController();

  /** Tasks this process is handling right now (submitting, watching or downloading). */
  readonly #claimed = new Set<string>();
  /** Pending tasks this process gave up on (retries exhausted): left pending for a later run. */
  readonly #skipped = new Set<string>();
  #submitDone = false;
  #lastProgressAt = 0;
  /** Tasks holding a concurrency slot: submitting, or a job the service is producing. */
  #inFlight = 0;
  // Money that decides anything is kept in whole micro-tokens (../util/money.ts).
  #inFlightMaxMicro = 0;
  /** Worst cases of tasks in doubt: they may have been charged, so the budget keeps room for them. */
  #inDoubtMaxMicro = 0;
  #chargedMicro = 0;
  #refundedMicro = 0;
  readonly #budgetMicro: number | undefined;
  #polls = 0;
  #giveUpStreak = 0;
  #unreadable = 0;
  #recovered = 0;
  #retried = 0;
  /** Tasks that were pending and got their first submission in this process (for --limit). */
  #started = 0;
  readonly #startedIds = new Set<string>();
  /** Tasks left pending because their worst case exceeds what is left of the budget. */
  readonly #overBudget: TaskRecord[] = [];
  readonly #watched = new Map<string, Watched>();
  readonly #due = new DueQueue<{ taskId: string; at: number }>();
  /** The one due time that counts per job; queue entries with another time are stale and skipped. */
  readonly #dueAt = new Map<string, number>();
  readonly #arrivals = { poll: 0, callback: 0 };
  /** Confirming polls asked for by callbacks, per task; one not yet started serves every later hint. */
  readonly #confirming = new Map<string, { started: boolean; status: Promise<string | undefined> }>();
  /** Tasks a callback named before their submission answer was recorded: looked at once it is. */
  readonly #hintedEarly = new Map<string, string | undefined>();
  /** When this process last put a task in doubt: callbacks that could recover it are waited for a while. */
  #lastInDoubtAt: number | undefined;
  /** In-doubt tasks a callback is being checked for, so repeats do not ask twice. */
  readonly #adopting = new Set<string>();
  /** Set when the watching is over: a late callback must not start a poll or a download. */
  #hintsClosed = false;
  readonly #downloading = new Set<string>();
  /** Things worth one warning per job, not one per poll (an unknown status, an unreadable answer). */
  readonly #warnedOnce = new Set<string>();
  readonly #pollLimit;
  readonly #writes: WriteQueue;
  readonly #downloadLimit;
  readonly #pending = new Set<Promise<unknown>>();
  #wakeWatcher: (() => void) | undefined;
  #slotFreed: (() => void) | undefined;

  constructor(deps: RunnerDeps, opts: RunnerOptions) {
    this.#deps = deps;
    this.#opts = opts;
    this.#policy = { ...DEFAULT_WATCH_POLICY, ...opts.watch };
    this.#now = deps.now ?? Date.now;
    this.#random = deps.random ?? Math.random;
    this.#sleep = deps.sleep ?? defaultSleep;
    this.#log = deps.logger.child({ run: opts.runId });
    this.#budgetMicro = opts.budget === undefined ? undefined : toMicro(opts.budget);
    this.#pollLimit = pLimit(opts.pollConcurrency);
    this.#writes = new WriteQueue(deps.store);
    // Every download and sleep listens on these; dozens at once are expected, not a leak.
    setMaxListeners(0, this.#halt.signal, this.#stopSubmitting.signal);
    this.#downloadLimit = pLimit(opts.downloadConcurrency);
    const onStop = () =>
      this.#requestStop(
        'interrupted',
        'interrupted: stopped submitting; run the same command again to continue',
      );
    if (opts.stop.aborted) onStop();
    else opts.stop.addEventListener('abort', onStop, { once: true });
    const onHalt = () =>
      this.#haltNow(
        'interrupted',
        'interrupted twice: stopped at once; run the same command again to continue',
      );
    if (opts.halt?.aborted) onHalt();
    else opts.halt?.addEventListener('abort', onHalt, { once: true });
  }

  #emit(body: RunEventBody): void {
    this.#deps.onEvent?.(stamp(body, this.#opts.runId, new Date(this.#now())));
  }

  /** Stops submitting, for a reason the user is told. The first reason wins. */
  #requestStop(reason: StopReason, message: string): void {
    if (!this.#stopReason) {
      this.#stopReason = reason;
      this.#stopMessage = message;
    }
    this.#stopSubmitting.abort();
    this.#slotFreed?.();
  }

  #haltNow(reason: StopReason, message: string): void {
    this.#requestStop(reason, message);
    if (reason === 'unauthorized' || reason === 'lease-lost') {
      // These override a softer reason: the user must act before anything else happens.
      this.#stopReason = reason;
      this.#stopMessage = message;
    }
    this.#halt.abort();
    this.#wakeWatcher?.();
    this.#slotFreed?.();
  }

  /** Another process took the run's lease: stop touching it. */
  leaseLost(): void {
    this.#haltNow('lease-lost', 'another mediabatch process took over this run; this one stopped');
  }

  async run(): Promise<RunResult> {
    const { store } = this.#deps;
    const { runId } = this.#opts;
    const recovered = store.recoverInterruptedSubmissions(runId);
    for (const taskId of recovered) {
      this.#log.warn(
        { task: taskId },
        'submission was interrupted before its answer was recorded: task is in doubt',
      );
    }
    const spent = store.runSpent(runId);
    this.#chargedMicro = toMicro(spent.charged);
    this.#refundedMicro = toMicro(spent.refunded);
    this.#inDoubtMaxMicro = store
      .tasksByState(runId, ['in_doubt'])
      .reduce((n, t) => n + toMicro(t.estimate.max), 0);

    // Paid results not on disk yet come first: a fresh look at each job re-signs its links.
    for (const task of store.tasksByState(runId, ['unfetched', 'downloading'])) this.#watch(task, 0, false);
    // Jobs submitted by an earlier process are watched again; stalled ones slowly, without a slot.
    for (const task of store.tasksByState(runId, ['submitted', 'running'])) this.#watch(task, 0, true);
    for (const task of store.tasksByState(runId, ['stalled'])) this.#watch(task, 0, false);
    this.#progress();

    const watcher = this.#guard(this.#watchLoop(), 'watching jobs');
    await this.#guard(this.#submitLoop(), 'submitting');
    this.#submitDone = true;
    this.#wakeWatcher?.();
    // Interrupted: the answers in flight are recorded (the submit loop waited for them); jobs are left
    // for the next run to watch. Otherwise wait until every watched job has finished or stalled.
    await watcher;
    this.#hintsClosed = true;
    await this.#settle();
    this.#progress(true);
    if (this.#stopReason) {
      this.#emit({
        event: 'stopped',
        reason: this.#stopReason,
        message: this.#stopMessage ?? this.#stopReason,
      });
    }
    return {
      ...(this.#stopReason ? { stopReason: this.#stopReason } : {}),
      ...(this.#stopMessage ? { stopMessage: this.#stopMessage } : {}),
      ...(this.#quota ? { quota: this.#quota } : {}),
      counts: store.countTasksByState(runId),
      polls: this.#polls,
      arrivals: { ...this.#arrivals },
      unreadableAnswers: this.#unreadable,
      recoveredFromDoubt: this.#recovered,
      retriedFailures: this.#retried,
    };
  }

  /**
   * Every background promise ends here: an unexpected error (a full state disk, a bug) stops the run
   * with one line and leaves everything resumable, never an unhandled rejection.
   */
  #guard<T>(promise: Promise<T>, what: string): Promise<T | undefined> {
    return promise.catch((error: unknown) => {
      this.#log.error({ err: error }, `unexpected error while ${what}`);
      this.#haltNow('internal', `stopped after an unexpected error while ${what}: ${messageOf(error)}`);
      return undefined;
    });
  }

  async #settle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  #track<T>(promise: Promise<T>, what = 'working on a task'): Promise<T | undefined> {
    const guarded = this.#guard(promise, what);
    this.#pending.add(guarded);
    void guarded.finally(() => this.#pending.delete(guarded));
    return guarded;
  }

  /** Counting tasks is a query: at most a few times a second, and always at the end. */
  #progress(final = false): void {
    if (!this.#deps.onProgress) return;
    const now = this.#now();
    if (!final && now - this.#lastProgressAt < 200) return;
    this.#lastProgressAt = now;
    this.#deps.onProgress({
      counts: this.#deps.store.countTasksByState(this.#opts.runId),
      charged: fromMicro(this.#chargedMicro),
      refunded: fromMicro(this.#refundedMicro),
      inFlight: this.#inFlight,
    });
  }

  // ---- submitting ------------------------------------------------------------------------------

  async #waitForWake(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.#slotFreed = resolve;
    });
  }

  async #waitForSlot(): Promise<void> {
    while (this.#inFlight >= this.#opts.concurrency && !this.#stopSubmitting.signal.aborted) {
      await this.#waitForWake();
    }
  }

  #releaseSlot(taskId: string): void {
    if (!this.#claimed.delete(taskId)) return;
    const watched = this.#watched.get(taskId);
    if (watched === undefined || watched.holdsSlot) this.#inFlight--;
    if (watched) watched.holdsSlot = false;
    this.#wakeSubmitter();
  }

  /** A stalled job gives its slot back but stays claimed and watched. */
  #giveBackSlot(watched: Watched): void {
    if (!watched.holdsSlot) return;
    watched.holdsSlot = false;
    this.#inFlight--;
    this.#wakeSubmitter();
  }

  #wakeSubmitter(): void {
    const resolve = this.#slotFreed;
    this.#slotFreed = undefined;
    resolve?.();
  }

  /** A watched job that may still fail and come back for another attempt keeps the submitter alive. */
  #mayComeBack(): boolean {
    for (const w of this.#watched.values()) if (this.#retriesOf(w.task) > 0) return true;
    return false;
  }

  #retriesOf(task: TaskRecord): number {
    return this.#opts.retries ?? task.retries;
  }

  async #submitLoop(): Promise<void> {
    const { store } = this.#deps;
    const { runId, concurrency } = this.#opts;
    const submissions = new Set<Promise<unknown>>();
    outer: while (!this.#stopSubmitting.signal.aborted) {
      const batch = store
        .nextPending(runId, concurrency * 2 + this.#claimed.size + this.#skipped.size, this.#opts.only)
        .filter((t) => !this.#claimed.has(t.taskId) && !this.#skipped.has(t.taskId));
      if (batch.length === 0) {
        if (submissions.size > 0) {
          // Tasks waiting to retry are still claimed; wait for one to settle before looking again.
          await Promise.race(submissions);
          continue;
        }
        if (this.#mayComeBack() && !this.#halt.signal.aborted) {
          await this.#waitForWake();
          continue;
        }
        break;
      }
      for (const task of batch) {
        await this.#waitForSlot();
        if (this.#stopSubmitting.signal.aborted) break outer;
        if (this.#opts.limit !== undefined && this.#started >= this.#opts.limit) {
          this.#requestStop(
            'limit',
            `submitted ${this.#started} task(s) as --limit asked; the rest stays pending: run again without --limit to continue`,
          );
          break outer;
        }
        const taskMax = toMicro(task.estimate.max);
        // Fits what fits: a task whose worst case exceeds what is left even with nothing in flight is left
        // pending, and cheaper ones go on.
        if (!fitsBudget(this.#budgetMicro, this.#committedMicro(), 0, taskMax)) {
          this.#overBudget.push(task);
          this.#skipped.add(task.taskId);
          continue;
        }
        while (!fitsBudget(this.#budgetMicro, this.#committedMicro(), this.#inFlightMaxMicro, taskMax)) {
          if (this.#inFlightMaxMicro === 0) {
            this.#requestStop(
              'budget',
              `the budget of ${this.#opts.budget} tokens cannot cover the next task (${task.taskId}, up to ${task.estimate.max} tokens): raise budget and run again to continue`,
            );
            break outer;
          }
          // Answers in flight will turn worst cases into real costs; look again after one arrives.
          await this.#waitForWake();
          if (this.#stopSubmitting.signal.aborted) break outer;
        }
        const entry = findEntry(task.model);
        if (!entry) {
          store.markBlocked(
            runId,
            task.taskId,
            `unknown model ${task.model}: this mediabatch does not know it`,
          );
          continue;
        }
        this.#claimed.add(task.taskId);
        this.#inFlight++;
        if (task.state === 'pending' && !this.#startedIds.has(task.taskId)) {
          this.#startedIds.add(task.taskId);
          this.#started++;
        }
        const p = this.#track(this.#submitTask(task, entry), `submitting ${task.taskId}`);
        submissions.add(p);
        void p.finally(() => submissions.delete(p));
      }
    }
    // Every submission in flight gets its answer recorded, whatever stopped the loop.
    await Promise.allSettled([...submissions]);
    if (this.#overBudget.length > 0) {
      const need = this.#overBudget.reduce((n, t) => n + toMicro(t.estimate.max), 0);
      const left = (this.#budgetMicro ?? 0) - this.#committedMicro();
      this.#requestStop(
        'budget',
        `${this.#overBudget.length} task(s) did not fit under the budget of ${this.#opts.budget} tokens (${fromMicro(Math.max(0, left))} left; they need up to ${fromMicro(need)}): raise budget and run again to continue`,
      );
    }
  }

  /** What the budget already holds: charged net, plus the worst case of the tasks in doubt. */
  #committedMicro(): number {
    return this.#chargedMicro - this.#refundedMicro + this.#inDoubtMaxMicro;
  }

  async #submitTask(task: TaskRecord, entry: CatalogEntry): Promise<void> {
    const { store, client } = this.#deps;
    const { runId } = this.#opts;
    const body = JSON.parse(task.wireBody) as RequestBody;
    // The per-task callback URL carries the run's token; it is added when sending, so the stored request
    // (and its hash) stays the same whatever receiver a resumed run uses.
    const callbackUrl = this.#opts.callbackUrlFor?.(task.taskId);
    if (callbackUrl) body['custom_callback_url'] = callbackUrl;
    const taskMax = toMicro(task.estimate.max);
    this.#inFlightMaxMicro += taskMax;
    let answered = false;
    let throttled = 0;
    try {
      for (let attempt = 0; ; ) {
        // The intent is committed before a byte is sent: a crash from here on leaves the task in doubt.
        const attemptNo = await this.#writes.write(() => store.recordSubmitIntent(runId, task.taskId));
        const outcome = await client.submit(entry.endpoint, body);
        const retry = await this.#recordOutcome(task, entry, attemptNo, outcome);
        // Only now is the real cost (or its absence) recorded: until then the worst case stays counted.
        answered = true;
        this.#inFlightMaxMicro -= taskMax;
        // A worst case became a real cost: a task waiting for room under the budget may fit now.
        this.#wakeSubmitter();
        if (retry === 'done') return;
        // A 429 proves nothing was charged and says nothing about the task: it spends no retry.
        const isThrottle = outcome.type === 'retryable' && outcome.throttled === true;
        if (isThrottle) throttled++;
        else attempt++;
        const exhausted = attempt > this.#opts.submitRetries || throttled > this.#policy.maxThrottledPerTask;
        if (exhausted || this.#stopSubmitting.signal.aborted) {
          if (exhausted) this.#gaveUp(task, outcome, attempt + throttled);
          this.#releaseSlot(task.taskId);
          return;
        }
        const retryAfter = outcome.type === 'retryable' ? outcome.retryAfterMs : undefined;
        const delay = retryAfter ?? this.#backoff(Math.max(0, attempt - 1));
        this.#log.info(
          { task: task.taskId, attempt: attempt + throttled, delayMs: delay, throttled: isThrottle },
          'submission not accepted; retrying',
        );
        await this.#sleep(delay, this.#stopSubmitting.signal);
        if (this.#stopSubmitting.signal.aborted) {
          this.#releaseSlot(task.taskId);
          return;
        }
        answered = false;
        this.#inFlightMaxMicro += taskMax;
      }
    } catch (error) {
      // An error after the intent (a store failure, a bug) must not free the task for a second POST in
      // this process; the intent row makes it in doubt for the next run.
      this.#log.error({ task: task.taskId, err: error }, 'submission failed unexpectedly');
      if (!answered) this.#inFlightMaxMicro -= taskMax;
      this.#requestStop('internal', `error while submitting ${task.taskId}: ${messageOf(error)}`);
      this.#releaseSlot(task.taskId);
    } finally {
      this.#progress();
    }
  }

  #backoff(attempt: number): number {
    return backoffDelay(attempt, {
      baseMs: this.#opts.retryBaseMs,
      capMs: this.#opts.retryCapMs,
      random: this.#random,
    });
  }

  #gaveUp(task: TaskRecord, outcome: SubmitOutcome, attempts: number): void {
    this.#skipped.add(task.taskId);
    const reason = outcome.type === 'retryable' ? outcome.reason : outcome.type;
    this.#deps.store.setTaskError(
      this.#opts.runId,
      task.taskId,
      `not submitted after ${attempts} attempts: ${reason}`,
    );
    this.#giveUpStreak++;
    if (this.#giveUpStreak >= this.#opts.giveUpAfterTasks) {
      this.#requestStop(
        'unreachable',
        `the API keeps failing (${reason}); nothing was charged for those tasks: run again later`,
      );
    }
  }

  /** Records one answer. Returns 'retry' when the same request may be sent again. */
  async #recordOutcome(
    task: TaskRecord,
    entry: CatalogEntry,
    attemptNo: number,
    outcome: SubmitOutcome,
  ): Promise<'done' | 'retry'> {
    const { store, keyFingerprint } = this.#deps;
    const write = <T>(w: () => T) => this.#writes.write(w);
    const { runId } = this.#opts;
    const id = task.taskId;
    // Support asks for the request id: it goes into logs and stored messages.
    const ref = outcome.requestId ? ` (request ${outcome.requestId})` : '';
    const notCharged = (
      state: 'rejected' | 'not_charged',
      message: string,
      code?: number,
      httpStatus?: number,
    ) =>
      write(() =>
        store.recordNotCharged(runId, id, attemptNo, {
          outcome: state,
          message: `${message}${ref}`,
          ...(code !== undefined && { code }),
          ...(httpStatus !== undefined && { httpStatus }),
        }),
      );
    switch (outcome.type) {
      case 'accepted': {
        const listPrice = task.estimate.max;
        const recorded = await write(() => {
          const r = store.recordSubmitted(runId, id, attemptNo, {
            imgUuid: outcome.imgUuid,
            cost: outcome.cost,
            listPrice,
            keyFingerprint,
          });
          return { r, fresh: store.getTask(runId, id) };
        });
        if (recorded.r.state === 'in_doubt') {
          this.#inDoubtMaxMicro += toMicro(listPrice);
          this.#emit({ event: 'in_doubt', task: id, reason: recorded.r.message });
          this.#log.warn({ task: id, img_uuid: outcome.imgUuid }, recorded.r.message);
          this.#releaseSlot(id);
          return 'done';
        }
        this.#chargedMicro += toMicro(outcome.cost ?? listPrice);
        this.#giveUpStreak = 0;
        this.#emit({
          event: 'submitted',
          task: id,
          img_uuid: outcome.imgUuid,
          cost: outcome.cost ?? listPrice,
          cost_assumed: outcome.cost === undefined,
          attempt: store.chargedAttempts(runId, id),
        });
        if (outcome.cost === undefined) {
          this.#log.warn(
            { task: id, img_uuid: outcome.imgUuid, listPrice },
            'the API did not state the cost; the list price is booked for budget and reports',
          );
        }
        this.#log.info(
          { task: id, img_uuid: outcome.imgUuid, cost: outcome.cost, request_id: outcome.requestId },
          'submitted',
        );
        if (recorded.fresh) this.#watch(recorded.fresh, 0, true, entry);
        else this.#releaseSlot(id);
        // The job may have ended before its submission answer reached us (a fast job, a slow answer).
        if (this.#hintedEarly.delete(id)) void this.#confirm(id).catch(() => undefined);
        return 'done';
      }
      case 'rejected':
        await notCharged('rejected', outcome.message, 400, outcome.httpStatus);
        this.#emit({ event: 'rejected', task: id, message: outcome.message });
        this.#log.warn(
          { task: id, msg: outcome.message, request_id: outcome.requestId },
          'rejected by the API (not charged)',
        );
        this.#releaseSlot(id);
        return 'done';
      case 'insufficient-tokens':
        await notCharged('not_charged', outcome.message, 100);
        this.#requestStop(
          'insufficient-tokens',
          'the balance ran out (code 100): top up, then run again to continue',
        );
        this.#releaseSlot(id);
        return 'done';
      case 'quota-exceeded':
        await notCharged('not_charged', outcome.message, 101);
        if (outcome.used !== undefined && outcome.quota !== undefined) {
          this.#quota = { used: outcome.used, quota: outcome.quota, period: outcome.period ?? 'monthly' };
          store.recordQuota(keyFingerprint, this.#quota);
        }
        this.#requestStop(
          'quota-exceeded',
          `the API key's quota is used up (${outcome.message}): run again in the next period`,
        );
        this.#releaseSlot(id);
        return 'done';
      case 'unauthorized':
        await notCharged('not_charged', outcome.message, undefined, 401);
        this.#haltNow(
          'unauthorized',
          'the API refused the credentials (401): check MEDIABATCH_API_KEY and the base URL',
        );
        this.#releaseSlot(id);
        return 'done';
      case 'retryable':
        await notCharged('not_charged', outcome.reason);
        return 'retry';
      case 'in-doubt': {
        await write(() => store.recordInDoubt(runId, id, attemptNo, { message: `${outcome.reason}${ref}` }));
        this.#inDoubtMaxMicro += toMicro(task.estimate.max);
        this.#lastInDoubtAt = this.#now();
        this.#emit({ event: 'in_doubt', task: id, reason: outcome.reason });
        // A callback for this task may have come before its answer was given up on.
        const early = this.#hintedEarly.get(id);
        this.#hintedEarly.delete(id);
        if (early !== undefined)
          void this.#track(this.#adoptFromDoubt(id, early), `recovering ${id} from doubt`);
        this.#log.warn(
          { task: id, reason: outcome.reason, request_id: outcome.requestId },
          'answer lost after sending: task is in doubt',
        );
        this.#releaseSlot(id);
        return 'done';
      }
    }
  }

  // ---- watching --------------------------------------------------------------------------------

  /**
   * Starts watching a task's job. `holdsSlot`: the job counts against the run's concurrency (a job the
   * service is producing); results to fetch again and stalled jobs do not.
   */
  #watch(task: TaskRecord, polls: number, holdsSlot: boolean, known?: CatalogEntry): void {
    const entry = known ?? findEntry(task.model);
    if (!entry) return;
    const stalled = task.state === 'stalled';
    const slot = holdsSlot && !stalled;
    if (!this.#claimed.has(task.taskId)) {
      this.#claimed.add(task.taskId);
      if (slot) this.#inFlight++;
    }
    this.#watched.set(task.taskId, { task, entry, polls, holdsSlot: slot, stalled });
    const delay =
      task.state === 'downloading' || task.state === 'unfetched'
        ? 0
        : nextPollDelay(this.#opts.pollProfiles[entry.kind], polls);
    this.#schedule(task.taskId, this.#now() + delay);
  }

  #schedule(taskId: string, at: number): void {
    const before = this.#due.peekAt();
    this.#dueAt.set(taskId, at);
    this.#due.push(at, { taskId, at });
    if (before === undefined || at < before) this.#wakeWatcher?.();
  }

  #unwatch(taskId: string): void {
    this.#releaseSlot(taskId);
    this.#watched.delete(taskId);
    this.#dueAt.delete(taskId);
    this.#wakeWatcher?.();
    // A task that left the watch may have been the last reason for the submitter to wait.
    this.#wakeSubmitter();
  }

  /**
   * With a callback receiver, a task put in doubt by this process may still be proved accepted by the
   * job's own callback: the run waits a little for it before it ends (never longer than the policy says).
   */
  #waitingForDoubtCallbacks(): boolean {
    if (this.#lastInDoubtAt === undefined || !this.#opts.callbackUrlFor || this.#stopReason !== undefined)
      return false;
    if (this.#adopting.size > 0) return true;
    return this.#now() - this.#lastInDoubtAt < this.#policy.doubtCallbackWaitMs;
  }

  /** Whether the watching can end: nothing left but stalled jobs (resumable, polled by a later run). */
  #onlyStalledLeft(): boolean {
    for (const w of this.#watched.values())
      if (!w.stalled || this.#downloading.has(w.task.taskId)) return false;
    return true;
  }

  /**
   * Runs until every watched job has finished (or stalled) and nothing more will be submitted. After an
   * interrupt it ends as soon as the submissions in flight are answered: the next run watches the jobs.
   */
  async #watchLoop(): Promise<void> {
    const halt = this.#halt.signal;
    for (;;) {
      if (halt.aborted) return;
      if (this.#submitDone && this.#stopReason === 'interrupted') return;
      if (this.#submitDone && this.#onlyStalledLeft() && !this.#waitingForDoubtCallbacks()) return;
      for (const { taskId, at } of this.#due.popDue(this.#now())) {
        if (!this.#watched.has(taskId) || this.#dueAt.get(taskId) !== at) continue;
        this.#dueAt.delete(taskId);
        void this.#track(
          this.#pollLimit(() => this.#poll(taskId, 'poll')),
          `watching ${taskId}`,
        );
      }
      const next = this.#due.peekAt();
      const wait = next === undefined ? 1_000 : Math.max(0, next - this.#now());
      const wake = new AbortController();
      this.#wakeWatcher = () => wake.abort();
      await this.#sleep(Math.min(wait, 1_000), AbortSignal.any([wake.signal, halt]));
      this.#wakeWatcher = undefined;
    }
  }

  /**
   * A callback said this job changed. The body is not trusted: the job is looked at now through
   * jobs/detail, and only what that answer says is recorded. Resolves to whether the claim is settled
   * (true: repeats of it can be dropped; false: it was not borne out yet, so a repeat must be heard).
   */
  hint(hint: { taskId: string; imgUuid: string | undefined; status: string | undefined }): Promise<boolean> {
    const { taskId, imgUuid, status } = hint;
    if (this.#hintsClosed || this.#halt.signal.aborted) return Promise.resolve(true);
    const watched = this.#watched.get(taskId);
    if (!watched) {
      // Still being submitted: the callback outran the submission answer. Looked at once it is recorded.
      if (this.#claimed.has(taskId)) {
        // Kept even for pending/processing: if the answer turns out lost, this job id recovers the task.
        if (imgUuid !== undefined || status === undefined || !ON_THE_WAY.has(status.toLowerCase()))
          this.#hintedEarly.set(taskId, imgUuid ?? this.#hintedEarly.get(taskId));
        return Promise.resolve(false);
      }
      // A task whose submission answer was lost: the callback may prove the job exists.
      if (imgUuid !== undefined) return this.#adoptFromDoubt(taskId, imgUuid);
      return Promise.resolve(true);
    }
    if (this.#downloading.has(taskId)) return Promise.resolve(true);
    if (imgUuid !== undefined && imgUuid !== watched.task.imgUuid) {
      this.#log.warn({ task: taskId, claimed: imgUuid }, 'callback names another job; ignored');
      return Promise.resolve(true);
    }
    // pending / processing: recording it would cost a request per job and change nothing we act on;
    // the fallback poll records it. An unreadable or unknown status is looked at, as an end might be.
    if (status !== undefined && ON_THE_WAY.has(status.toLowerCase())) return Promise.resolve(true);
    return this.#confirm(taskId).then(
      (seen) => seen !== undefined && (seen === status || jobPhase(seen) !== 'waiting'),
      () => false,
    );
  }

  /**
   * An in-doubt task named by a callback: if jobs/detail knows the job the callback names, the lost
   * submission was accepted. The task adopts the job (charge booked at list price, since the answer that
   * stated the cost was lost) and is watched like any other: nothing is ever submitted twice.
   */
  async #adoptFromDoubt(taskId: string, imgUuid: string): Promise<boolean> {
    const { store, client, keyFingerprint } = this.#deps;
    const { runId } = this.#opts;
    const task = store.getTask(runId, taskId);
    if (task?.state !== 'in_doubt' || this.#adopting.has(taskId)) return true;
    const entry = findEntry(task.model);
    if (!entry) return true;
    this.#adopting.add(taskId);
    try {
      const outcome = await this.#pollLimit(() => client.getJob(imgUuid));
      if (outcome.type !== 'ok') return outcome.type !== 'retryable';
      if (outcome.value.img_uuid !== imgUuid) return true;
      const listPrice = task.estimate.max;
      const adopted = await this.#writes.write(() =>
        store.adoptInDoubt(runId, taskId, { imgUuid, cost: undefined, listPrice, keyFingerprint }),
      );
      if (!adopted) return true;
      this.#recovered++;
      this.#emit({ event: 'recovered', task: taskId, img_uuid: imgUuid });
      this.#inDoubtMaxMicro -= toMicro(listPrice);
      this.#chargedMicro += toMicro(listPrice);
      this.#log.warn(
        { task: taskId, img_uuid: imgUuid },
        'recovered from doubt: a callback proved the job exists',
      );
      const fresh = store.getTask(runId, taskId);
      if (!fresh) return true;
      this.#watch(fresh, 1, true, entry);
      const watched = this.#watched.get(taskId);
      if (watched)
        await this.#onJobRecord(watched, outcome.value, 'callback', () => this.#nextPollAt(watched));
      return true;
    } finally {
      this.#adopting.delete(taskId);
    }
  }

  /** One confirming poll per task at a time; hints arriving before it starts share it. */
  #confirm(taskId: string): Promise<string | undefined> {
    const queued = this.#confirming.get(taskId);
    if (queued && !queued.started) return queued.status;
    // The callback's poll replaces the scheduled one; the poll schedules the next look itself.
    this.#dueAt.delete(taskId);
    const entry: { started: boolean; status: Promise<string | undefined> } = {
      started: false,
      status: Promise.resolve(undefined),
    };
    entry.status = this.#track(
      this.#pollLimit(() => {
        entry.started = true;
        return this.#poll(taskId, 'callback');
      }),
      `confirming a callback for ${taskId}`,
    );
    this.#confirming.set(taskId, entry);
    void entry.status
      .finally(() => {
        if (this.#confirming.get(taskId) === entry) this.#confirming.delete(taskId);
      })
      .catch(() => undefined);
    return entry.status;
  }

  #nextPollAt(watched: Watched): number {
    if (watched.stalled) return this.#now() + this.#policy.stalledPollMs;
    return this.#now() + nextPollDelay(this.#opts.pollProfiles[watched.entry.kind], watched.polls);
  }

  #warnOnce(key: string, fields: Record<string, unknown>, message: string): void {
    if (this.#warnedOnce.has(key)) return;
    this.#warnedOnce.add(key);
    this.#log.warn(fields, message);
  }

  /** Looks at one job; resolves to the status the API gave, if it answered. */
  async #poll(taskId: string, source: 'poll' | 'callback'): Promise<string | undefined> {
    const watched = this.#watched.get(taskId);
    if (!watched || this.#halt.signal.aborted) return undefined;
    const { store, client } = this.#deps;
    const { runId } = this.#opts;
    const imgUuid = watched.task.imgUuid;
    if (!imgUuid) {
      this.#unwatch(taskId);
      return undefined;
    }
    this.#polls++;
    const outcome = await client.getJob(imgUuid);
    watched.polls++;
    const nextAt = () => this.#nextPollAt(watched);
    let at: number | undefined;
    switch (outcome.type) {
      case 'ok': {
        if (outcome.value.img_uuid !== imgUuid) {
          // A record of another job must never be applied to this task.
          this.#warnOnce(
            `${taskId}:other:${outcome.value.img_uuid}`,
            { task: taskId, img_uuid: imgUuid, answered: outcome.value.img_uuid },
            'jobs/detail answered with another job; ignored',
          );
          break;
        }
        await this.#onJobRecord(watched, outcome.value, source, nextAt);
        return outcome.value.status;
      }
      case 'unauthorized':
        this.#haltNow(
          'unauthorized',
          'the API refused the credentials (401): check MEDIABATCH_API_KEY and the base URL',
        );
        return undefined;
      case 'not-found':
      case 'rejected': {
        // Right after a submission the service may not know the job yet: waited on for a window of time.
        const since = watched.task.submittedAt?.getTime() ?? 0;
        if (this.#now() - since < this.#policy.notFoundWindowMs) break;
        const message = `the API does not know job ${imgUuid} (${outcome.message}); it stays ${watched.task.state} for a later run`;
        await this.#writes.write(() => store.setTaskError(runId, taskId, message));
        this.#log.error({ task: taskId, img_uuid: imgUuid }, 'job unknown to the API; stopped watching it');
        this.#unwatch(taskId);
        return undefined;
      }
      case 'retryable':
        if (outcome.unreadable) {
          this.#unreadable++;
          this.#warnOnce(
            `${taskId}:unreadable`,
            { task: taskId, reason: outcome.reason, request_id: outcome.requestId },
            'the job record could not be read; will look again',
          );
        } else {
          this.#log.debug({ task: taskId, reason: outcome.reason }, 'poll failed; will look again');
        }
        if (outcome.retryAfterMs !== undefined) at = this.#now() + outcome.retryAfterMs;
        break;
    }
    const next = Math.max(nextAt(), at ?? 0);
    this.#notePolled(taskId, next);
    this.#schedule(taskId, next);
    return undefined;
  }

  /** Poll bookkeeping is for people reading the state; it rides along with the next commit. */
  #notePolled(taskId: string, at: number): void {
    const { store } = this.#deps;
    const { runId } = this.#opts;
    this.#writes
      .write(() => store.notePolled(runId, taskId, new Date(at)))
      .catch((error: unknown) =>
        this.#log.debug({ task: taskId, err: error }, 'poll bookkeeping not recorded'),
      );
  }

  /** A job record from a poll or a confirmed callback: record the status, then act on it. */
  async #onJobRecord(
    watched: Watched,
    record: JobRecord,
    source: 'poll' | 'callback',
    nextAt: () => number,
  ): Promise<void> {
    const { store } = this.#deps;
    const { runId } = this.#opts;
    const taskId = watched.task.taskId;
    const status = record.status;
    const phase = jobPhase(status);
    const result = await this.#writes.write(() =>
      store.recordJobStatus(watched.task.imgUuid ?? '', status, record, source),
    );
    if (!result.knownStatus) {
      this.#warnOnce(
        `${taskId}:status:${status}`,
        { task: taskId, status },
        phase === 'waiting'
          ? 'job status the spec does not name; treated as not finished yet'
          : `job status the spec does not name; read as ${phase}`,
      );
    }
    const state = result.to ?? store.getTask(runId, taskId)?.state;
    if (state === 'failed') {
      if (result.refunded !== null) this.#refundedMicro += toMicro(result.refunded);
      this.#log.warn({ task: taskId, refunded: result.refunded }, 'job failed (refunded)');
      await this.#retryFailed(watched, result.refunded);
      this.#progress();
      return;
    }
    const fetchable = state === 'downloading' || state === 'unfetched';
    if (phase === 'success' && fetchable && hasResults(record)) {
      if (result.moved) this.#arrivals[source]++;
      this.#startDownload(watched, record);
      this.#progress();
      return;
    }
    if (state === 'done' || state === 'lost' || state === 'rejected' || state === 'in_doubt') {
      this.#unwatch(taskId);
      return;
    }
    if (phase === 'success' && fetchable) {
      // Success with no result list yet: a grace period, then it is paid but unfetched (resumable).
      watched.emptySuccessSince ??= this.#now();
      if (this.#now() - watched.emptySuccessSince >= this.#policy.successGraceMs) {
        const reason = `the service said ${status} but gave no result list for ${Math.round(this.#policy.successGraceMs / 1000)} s; the job is charged, not refunded: run again to fetch it`;
        if (state === 'unfetched') this.#unwatch(taskId);
        else await this.#unfetched(watched, reason, false);
        return;
      }
    } else if (phase !== 'success' && !watched.stalled && this.#pastDeadline(watched)) {
      await this.#stall(watched);
    }
    if (result.moved) this.#progress();
    const at = phase === 'success' ? Math.min(nextAt(), this.#now() + 1_000) : nextAt();
    this.#notePolled(taskId, at);
    this.#schedule(taskId, at);
  }

  #pastDeadline(watched: Watched): boolean {
    const since = watched.task.submittedAt?.getTime();
    if (since === undefined) return false;
    return this.#now() - since > this.#policy.jobDeadlineMs[kindOf(watched.entry)];
  }

  /** Past its deadline: the slot goes back to the batch; the job is still watched, slowly. */
  async #stall(watched: Watched): Promise<void> {
    const { store } = this.#deps;
    const taskId = watched.task.taskId;
    const minutes = Math.round(this.#policy.jobDeadlineMs[kindOf(watched.entry)] / 60_000);
    const reason = `no result ${minutes} min after submission; still watched, and a later run keeps watching it`;
    const moved = await this.#writes
      .write(() => store.moveTask(this.#opts.runId, taskId, 'stalled', reason))
      .then(
        () => true,
        () => false,
      );
    if (!moved) return;
    watched.stalled = true;
    watched.task = { ...watched.task, state: 'stalled' };
    this.#emit({ event: 'stalled', task: taskId, reason });
    this.#log.warn({ task: taskId, img_uuid: watched.task.imgUuid }, 'job stalled past its deadline');
    this.#giveBackSlot(watched);
    this.#progress();
  }

  /**
   * A failed job was refunded (recorded with its status). With `retries` left, the task goes back to
   * pending as a new attempt: the budget counts at most one unrefunded attempt per task.
   */
  async #retryFailed(watched: Watched, refunded: number | null): Promise<void> {
    const { store } = this.#deps;
    const { runId } = this.#opts;
    const taskId = watched.task.taskId;
    const allowed = this.#retriesOf(watched.task);
    const charged = store.chargedAttempts(runId, taskId);
    let retrying = false;
    if (allowed > 0 && charged <= allowed && !this.#stopSubmitting.signal.aborted) {
      const requeued = await this.#writes.write(() => store.requeueTasks(runId, [taskId], ['failed']));
      retrying = requeued.length === 1;
      if (retrying) {
        this.#retried++;
        this.#log.info(
          { task: taskId, attempt: charged + 1, of: allowed + 1 },
          'job failed; submitting it again',
        );
      }
    }
    this.#emit({ event: 'failed', task: taskId, refunded, retrying });
    this.#unwatch(taskId);
  }

  // ---- downloading -----------------------------------------------------------------------------

  #startDownload(watched: Watched, record: JobRecord): void {
    const taskId = watched.task.taskId;
    if (this.#downloading.has(taskId)) return;
    this.#downloading.add(taskId);
    void this.#track(
      this.#downloadLimit(() => this.#downloadJob(watched, record)).finally(() => {
        this.#downloading.delete(taskId);
        this.#unwatch(taskId);
        this.#progress();
      }),
      `fetching the results of ${taskId}`,
    );
  }

  /** Paid, result not on disk: said so, kept for every later run. A local cause also stops submitting. */
  async #unfetched(watched: Watched, reason: string, local: boolean): Promise<void> {
    const { store } = this.#deps;
    const taskId = watched.task.taskId;
    await this.#writes.write(() => store.moveTask(this.#opts.runId, taskId, 'unfetched', reason));
    this.#emit({ event: 'unfetched', task: taskId, reason });
    this.#log.error({ task: taskId, img_uuid: watched.task.imgUuid }, reason);
    // The disk will not get better by itself: paying for more results that cannot be written is pointless.
    if (local) this.#requestStop('local-disk', reason);
    this.#unwatch(taskId);
    this.#progress();
  }

  async #downloadJob(watched: Watched, first: JobRecord): Promise<void> {
    const { store } = this.#deps;
    const { runId, runDir } = this.#opts;
    const task = watched.task;
    const body = JSON.parse(task.wireBody) as RequestBody;
    let record = first;
    const plan = () => planResults(watched.entry, body, record.json, this.#policy.maxResultItems);
    let current = plan();
    if (task.state === 'unfetched') {
      await this.#writes.write(() => store.moveTask(runId, task.taskId, 'downloading', null));
    }
    if (current.files.length === 0) {
      await this.#unfetched(
        watched,
        `the job's results cannot be used: ${current.problems.join('; ')}`,
        false,
      );
      return;
    }
    const folderName = taskFolderName(task.taskId);
    let folder: string;
    try {
      // From the output folder, so that a run folder planted as a link is refused too (issue 13).
      folder = await ensureFolderUnder(dirname(runDir), join(basename(runDir), folderName));
      // A process killed while writing here left its temporary files; this run holds the lease.
      await removeLeftoverTemps(folder);
    } catch (error) {
      await this.#unfetched(watched, localProblem(error, join(runDir, folderName)), true);
      return;
    }
    // With the manifest's file_name the files go beside the other tasks' in the run folder, under that name.
    const named = task.fileName;
    const place = (file: FileToFetch): string =>
      named === null ? join(folder, file.fileName) : join(runDir, namedFile(named, file));
    if (named !== null) {
      for (const file of current.files) await removeLeftoverTempsFor(runDir, basename(place(file)));
    }
    const done: NewFile[] = [];
    const names = new Map<number, string>();
    let bytesLeft = this.#policy.maxJobBytes;
    for (const file of current.files) {
      if (this.#halt.signal.aborted) return;
      const fetched = await this.#fetchFile(
        watched,
        file.position,
        place,
        current,
        bytesLeft,
        (fresh) => {
          record = fresh;
          current = plan();
          return current;
        },
        () => record.link_expired_at ?? undefined,
      );
      if (fetched.type === 'halted') return;
      if (fetched.type === 'lost') {
        await this.#writes.write(() => store.moveTask(runId, task.taskId, 'lost', fetched.reason));
        this.#emit({ event: 'lost', task: task.taskId, reason: fetched.reason });
        this.#log.error({ task: task.taskId, img_uuid: task.imgUuid }, fetched.reason);
        return;
      }
      if (fetched.type === 'unfetched') {
        await this.#unfetched(watched, fetched.reason, fetched.local);
        return;
      }
      const { result } = fetched;
      bytesLeft -= result.bytes;
      const name = basename(result.path);
      names.set(file.position, name);
      done.push({
        index: file.position,
        kind: result.kind !== 'unknown' ? result.kind : isMediaKind(file.kind) ? file.kind : 'image',
        path: result.path,
        bytes: result.bytes,
        sha256: result.sha256,
        url: fetched.url,
      });
    }
    const jobFile = {
      task: task.taskId,
      model: task.model,
      img_uuid: task.imgUuid,
      files: current.files.map((f) => names.get(f.position) ?? f.fileName),
      ...(current.songs.length > 0
        ? {
            songs: current.songs.map((s) => ({
              ...s,
              file: names.get(positionOf(current, s.file)) ?? s.file,
            })),
          }
        : {}),
      ...(current.problems.length > 0 ? { problems: current.problems } : {}),
      job: withoutSignedQueries(record),
    };
    try {
      if (current.sheet !== undefined) {
        await writeFileAtomic(join(folder, 'sheet.json'), `${JSON.stringify(current.sheet, null, 2)}\n`);
      }
      await writeFileAtomic(join(folder, 'job.json'), `${JSON.stringify(jobFile, null, 2)}\n`);
    } catch (error) {
      await this.#unfetched(watched, localProblem(error, join(folder, 'job.json')), true);
      return;
    }
    // The files and the task's end in one commit: a task is done exactly when all its files are recorded.
    await this.#writes.write(() => {
      for (const file of done) store.recordFile(runId, task.taskId, file);
      store.markDone(runId, task.taskId);
    });
    this.#emit({
      event: 'done',
      task: task.taskId,
      files: done.map((f) => ({ path: f.path, kind: f.kind, bytes: f.bytes, sha256: f.sha256 })),
    });
    this.#log.info({ task: task.taskId, files: current.files.length }, 'done');
  }

  /**
   * Fetches the file at `position`. A link the CDN refuses (403/404/410) or past its expiry is not the
   * end: a fresh job record re-signs it, a bounded number of times. Only the service saying it no longer
   * has the job gives the result up.
   */
  async #fetchFile(
    watched: Watched,
    position: number,
    place: (file: FileToFetch) => string,
    initial: ResultPlan,
    maxBytes: number,
    refreshed: (record: JobRecord) => ResultPlan,
    jobExpiry: () => string | number | undefined,
  ): Promise<
    | { type: 'ok'; result: Extract<DownloadResult, { ok: true }> & { path: string }; url: string }
    | { type: 'unfetched'; reason: string; local: boolean }
    | { type: 'lost'; reason: string }
    | { type: 'halted' }
  > {
    const taskId = watched.task.taskId;
    let plan = initial;
    for (let refresh = 0; ; refresh++) {
      const file = plan.files.find((f) => f.position === position);
      if (!file)
        return {
          type: 'unfetched',
          reason: `result file ${position} is no longer listed by the job`,
          local: false,
        };
      const dest = place(file);
      const result = await this.#downloadWithRetries(
        file.url,
        dest,
        taskId,
        maxBytes,
        file.expiresAt ?? jobExpiry(),
      );
      if (this.#halt.signal.aborted) return { type: 'halted' };
      if (result.ok) return { type: 'ok', result: { ...result, path: result.path ?? dest }, url: file.url };
      if (result.type === 'disk')
        return { type: 'unfetched', reason: `${result.message}; ${PAID_NOTE}`, local: true };
      const refusedLink = result.type === 'expired' || result.type === 'link-refused';
      if (!refusedLink || refresh >= this.#policy.linkRefreshes) {
        const what = refusedLink
          ? `the result link was refused ${refresh + 1} times, fresh links included`
          : result.message;
        return {
          type: 'unfetched',
          reason: `${file.fileName} could not be fetched (${what}); the job is charged: run again to fetch it`,
          local: false,
        };
      }
      await this.#sleep(this.#backoff(refresh), this.#halt.signal);
      const fresh = await this.#pollLimit(() => this.#deps.client.getJob(watched.task.imgUuid ?? ''));
      this.#polls++;
      if (fresh.type === 'not-found' && !this.#withinNotFoundWindow(watched)) {
        return {
          type: 'lost',
          reason: `paid, result lost: the service no longer has job ${watched.task.imgUuid} (${fresh.message})`,
        };
      }
      if (fresh.type === 'ok' && fresh.value.img_uuid === watched.task.imgUuid && hasResults(fresh.value)) {
        this.#log.info(
          { task: taskId, file: file.fileName },
          'result link refused; fetched a fresh job record',
        );
        plan = refreshed(fresh.value);
      }
    }
  }

  #withinNotFoundWindow(watched: Watched): boolean {
    const since = watched.task.submittedAt?.getTime() ?? 0;
    return this.#now() - since < this.#policy.notFoundWindowMs;
  }

  async #downloadWithRetries(
    url: string,
    dest: string,
    taskId: string,
    maxBytes: number,
    linkExpiresAt: string | number | undefined,
  ): Promise<DownloadResult> {
    let result: DownloadResult = { ok: false, type: 'network', message: 'not tried', retrySafe: true };
    for (let attempt = 0; attempt < 4; attempt++) {
      result = await this.#deps.download(url, dest, {
        maxBytes: Math.min(this.#opts.maxDownloadBytes, maxBytes),
        timeoutMs: this.#opts.downloadTimeoutMs,
        signal: this.#halt.signal,
        detectType: true,
        root: this.#opts.runDir,
        now: this.#now,
        ...(linkExpiresAt !== undefined ? { linkExpiresAt } : {}),
      });
      if (result.ok || !result.retrySafe || this.#halt.signal.aborted) return result;
      this.#log.warn({ task: taskId, reason: result.message }, 'download failed; retrying');
      await this.#sleep(this.#backoff(attempt), this.#halt.signal);
    }
    return result;
  }
}

function hasResults(record: JobRecord): boolean {
  return Array.isArray(record.json) && record.json.length > 0;
}

function isMediaKind(kind: string): kind is ResultItemKind {
  return kind === 'image' || kind === 'audio' || kind === 'video' || kind === 'json';
}

function positionOf(plan: ResultPlan, fileName: string): number {
  return plan.files.find((f) => f.fileName === fileName)?.position ?? -1;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

const LOCAL_CODES: Record<string, string> = {
  ENOSPC: 'no space left on the device',
  EDQUOT: 'disk quota exceeded',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'the file system is read-only',
  EIO: 'input/output error',
  ENOTDIR: 'a file stands where a folder should be',
  ELOOP: 'a symbolic link stands where a folder should be',
};

/** One line for a file that could not be written on this machine: what happened, where, what to do. */
function localProblem(error: unknown, path: string): string {
  if (error instanceof UnsafePathError) return `${error.message}; ${PAID_NOTE}`;
  const code = (error as { code?: unknown }).code;
  const what = typeof code === 'string' ? (LOCAL_CODES[code] ?? code) : messageOf(error);
  return `${what} writing ${path}: ${LOCAL_HINT}; ${PAID_NOTE}`;
}

/** `<name>.<ext>` for a task's first file, `<name>-2.<ext>` for its second, and so on. */
function namedFile(name: string, file: FileToFetch): string {
  const ext = extname(file.fileName);
  return file.position === 1 ? `${name}${ext}` : `${name}-${file.position}${ext}`;
}
