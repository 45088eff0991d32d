// Drives one run: submits pending tasks with a bounded number in flight, watches their jobs, downloads
// results, and records every step in the store before acting on it. The order per task is the money
// guarantee: intent committed -> POST -> img_uuid and cost committed. Anything that interrupts it leaves
// a row that says what may have happened, and a resumed run reads those rows, never its memory.

import { setMaxListeners } from 'node:events';
import { join } from 'node:path';
import pLimit from 'p-limit';
import type { ApiClient } from '../api/client.js';
import type { DownloadOptions, DownloadResult } from '../api/download.js';
import type { SubmitOutcome } from '../api/outcome.js';
import type { JobRecord } from '../api/schemas.js';
import { findEntry } from '../catalog/index.js';
import type { CatalogEntry, RequestBody, ResultItemKind } from '../catalog/types.js';
import type { NewFile, Store, TaskRecord, TaskState } from '../store/index.js';
import { withoutSignedQueries } from '../store/index.js';
import { writeFileAtomic } from '../util/fsatomic.js';
import type { Logger } from '../util/log.js';
import { sleep as defaultSleep } from '../util/sleep.js';
import { taskFolderName } from './names.js';
import { DueQueue, nextPollDelay, type PollProfiles } from './polling.js';
import { fitsBudget } from './preflight.js';
import { planResults } from './results.js';
import { WriteQueue } from './writes.js';

export type StopReason =
  | 'interrupted'
  | 'insufficient-tokens'
  | 'quota-exceeded'
  | 'unauthorized'
  | 'budget'
  | 'unreachable'
  | 'lease-lost';

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
}

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
}

const FINAL: ReadonlySet<TaskState> = new Set(['done', 'failed', 'rejected', 'in_doubt', 'blocked']);
/** Job statuses that end a job; only a callback claiming one of these is worth a confirming poll. */
const JOB_ENDS: ReadonlySet<string> = new Set(['success', 'failed']);
/** Job statuses on the way; a callback claiming one changes nothing we act on. */
const JOB_ON_THE_WAY: ReadonlySet<string> = new Set(['pending', 'processing']);

interface Watched {
  task: TaskRecord;
  entry: CatalogEntry;
  polls: number;
  misses: number;
}

export class Runner {
  readonly #deps: RunnerDeps;
  readonly #opts: RunnerOptions;
  readonly #now: () => number;
  readonly #random: () => number;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly #log: Logger;

  #stopReason: StopReason | undefined;
  #stopMessage: string | undefined;
  #quota: RunResult['quota'];
  /** Stops submitting (first interrupt, money ran out, budget, API down). */
  readonly #stopSubmitting = new AbortController();
  /** Stops everything (401, second interrupt, lease lost). */
  readonly #halt = new AbortController();

  /** Tasks this process is handling right now (submitting, watching or downloading). */
  readonly #claimed = new Set<string>();
  /** Pending tasks this process gave up on (retries exhausted): left pending for a later run. */
  readonly #skipped = new Set<string>();
  #submitDone = false;
  #lastProgressAt = 0;
  #inFlight = 0;
  #inFlightMax = 0;
  /** Worst cases of tasks in doubt: they may have been charged, so the budget keeps room for them. */
  #inDoubtMax = 0;
  #charged = 0;
  #refunded = 0;
  #polls = 0;
  #giveUpStreak = 0;
  readonly #watched = new Map<string, Watched>();
  readonly #due = new DueQueue<{ taskId: string; at: number }>();
  /** The one due time that counts per job; queue entries with another time are stale and skipped. */
  readonly #dueAt = new Map<string, number>();
  readonly #arrivals = { poll: 0, callback: 0 };
  /** Confirming polls asked for by callbacks, per task; one not yet started serves every later hint. */
  readonly #confirming = new Map<string, { started: boolean; status: Promise<string | undefined> }>();
  /** Tasks a callback named before their submission answer was recorded: looked at once it is. */
  readonly #hintedEarly = new Set<string>();
  /** Set when the watching is over: a late callback must not start a poll or a download. */
  #hintsClosed = false;
  readonly #downloading = new Set<string>();
  readonly #unknownStatusesLogged = new Set<string>();
  readonly #pollLimit;
  readonly #writes: WriteQueue;
  readonly #downloadLimit;
  readonly #pending = new Set<Promise<unknown>>();
  #wakeWatcher: (() => void) | undefined;
  #slotFreed: (() => void) | undefined;

  constructor(deps: RunnerDeps, opts: RunnerOptions) {
    this.#deps = deps;
    this.#opts = opts;
    this.#now = deps.now ?? Date.now;
    this.#random = deps.random ?? Math.random;
    this.#sleep = deps.sleep ?? defaultSleep;
    this.#log = deps.logger.child({ run: opts.runId });
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
    this.#charged = spent.charged;
    this.#refunded = spent.refunded;
    this.#inDoubtMax = store.tasksByState(runId, ['in_doubt']).reduce((n, t) => n + t.estimate.max, 0);

    // Jobs submitted by an earlier process are watched again; unfinished downloads restart after a fresh look.
    for (const task of store.tasksByState(runId, ['submitted', 'running', 'downloading'])) {
      this.#watch(task, 0);
    }
    this.#progress();

    const watcher = this.#watchLoop();
    await this.#submitLoop();
    this.#submitDone = true;
    this.#wakeWatcher?.();
    // Interrupted: the answers in flight are recorded (the submit loop waited for them); jobs are left
    // for the next run to watch. Otherwise wait until every watched job has finished.
    await watcher;
    this.#hintsClosed = true;
    await this.#settle();
    this.#progress(true);
    return {
      ...(this.#stopReason ? { stopReason: this.#stopReason } : {}),
      ...(this.#stopMessage ? { stopMessage: this.#stopMessage } : {}),
      ...(this.#quota ? { quota: this.#quota } : {}),
      counts: store.countTasksByState(runId),
      polls: this.#polls,
      arrivals: { ...this.#arrivals },
    };
  }

  async #settle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  #track<T>(promise: Promise<T>): Promise<T> {
    this.#pending.add(promise);
    void promise.finally(() => this.#pending.delete(promise));
    return promise;
  }

  /** Counting tasks is a query: at most a few times a second, and always at the end. */
  #progress(final = false): void {
    if (!this.#deps.onProgress) return;
    const now = this.#now();
    if (!final && now - this.#lastProgressAt < 200) return;
    this.#lastProgressAt = now;
    this.#deps.onProgress({
      counts: this.#deps.store.countTasksByState(this.#opts.runId),
      charged: this.#charged,
      refunded: this.#refunded,
      inFlight: this.#inFlight,
    });
  }

  // ---- submitting ------------------------------------------------------------------------------

  async #waitForSlot(): Promise<void> {
    while (this.#inFlight >= this.#opts.concurrency && !this.#stopSubmitting.signal.aborted) {
      await new Promise<void>((resolve) => {
        this.#slotFreed = resolve;
      });
    }
  }

  #releaseSlot(taskId: string): void {
    if (!this.#claimed.delete(taskId)) return;
    this.#inFlight--;
    this.#wakeSubmitter();
  }

  #wakeSubmitter(): void {
    const resolve = this.#slotFreed;
    this.#slotFreed = undefined;
    resolve?.();
  }

  async #submitLoop(): Promise<void> {
    const { store } = this.#deps;
    const { runId, concurrency } = this.#opts;
    const submissions = new Set<Promise<void>>();
    outer: while (!this.#stopSubmitting.signal.aborted) {
      const batch = store
        .nextPending(runId, concurrency * 2 + this.#claimed.size + this.#skipped.size)
        .filter((t) => !this.#claimed.has(t.taskId) && !this.#skipped.has(t.taskId));
      if (batch.length === 0) {
        if (submissions.size === 0) break;
        // Tasks waiting to retry are still claimed; wait for one to settle before looking again.
        await Promise.race(submissions);
        continue;
      }
      for (const task of batch) {
        await this.#waitForSlot();
        if (this.#stopSubmitting.signal.aborted) break outer;
        while (
          !fitsBudget(
            this.#opts.budget,
            this.#charged - this.#refunded + this.#inDoubtMax,
            this.#inFlightMax,
            task.estimate.max,
          )
        ) {
          if (this.#inFlightMax === 0) {
            this.#requestStop(
              'budget',
              `the budget of ${this.#opts.budget} tokens cannot cover the next task (${task.taskId}, up to ${task.estimate.max} tokens): raise budget and run again to continue`,
            );
            break outer;
          }
          // Answers in flight will turn worst cases into real costs; look again after one arrives.
          await new Promise<void>((resolve) => {
            this.#slotFreed = resolve;
          });
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
        const p = this.#track(this.#submitTask(task, entry));
        submissions.add(p);
        void p.finally(() => submissions.delete(p));
      }
    }
    // Every submission in flight gets its answer recorded, whatever stopped the loop.
    await Promise.allSettled([...submissions]);
  }

  async #submitTask(task: TaskRecord, entry: CatalogEntry): Promise<void> {
    const { store, client } = this.#deps;
    const { runId } = this.#opts;
    const body = JSON.parse(task.wireBody) as RequestBody;
    // The per-task callback URL carries the run's token; it is added when sending, so the stored request
    // (and its hash) stays the same whatever receiver a resumed run uses.
    const callbackUrl = this.#opts.callbackUrlFor?.(task.taskId);
    if (callbackUrl) body['custom_callback_url'] = callbackUrl;
    this.#inFlightMax += task.estimate.max;
    let answered = false;
    try {
      for (let attempt = 0; ; attempt++) {
        // The intent is committed before a byte is sent: a crash from here on leaves the task in doubt.
        const attemptNo = await this.#writes.write(() => store.recordSubmitIntent(runId, task.taskId));
        const outcome = await client.submit(entry.endpoint, body);
        const retry = await this.#recordOutcome(task, entry, attemptNo, outcome);
        // Only now is the real cost (or its absence) recorded: until then the worst case stays counted.
        answered = true;
        this.#inFlightMax -= task.estimate.max;
        // A worst case became a real cost: a task waiting for room under the budget may fit now.
        this.#wakeSubmitter();
        if (retry === 'done') return;
        if (attempt + 1 > this.#opts.submitRetries || this.#stopSubmitting.signal.aborted) {
          if (attempt + 1 > this.#opts.submitRetries) this.#gaveUp(task, outcome);
          this.#releaseSlot(task.taskId);
          return;
        }
        const delay = this.#backoff(attempt);
        this.#log.info(
          { task: task.taskId, attempt: attempt + 1, delayMs: delay },
          'submission not accepted; retrying',
        );
        await this.#sleep(delay, this.#stopSubmitting.signal);
        if (this.#stopSubmitting.signal.aborted) {
          this.#releaseSlot(task.taskId);
          return;
        }
        answered = false;
        this.#inFlightMax += task.estimate.max;
      }
    } catch (error) {
      // An error after the intent (a store failure, a bug) must not free the task for a second POST in
      // this process; the intent row makes it in doubt for the next run.
      this.#log.error({ task: task.taskId, err: error }, 'submission failed unexpectedly');
      if (!answered) this.#inFlightMax -= task.estimate.max;
      this.#requestStop(
        'interrupted',
        `internal error while submitting ${task.taskId}: ${(error as Error).message}`,
      );
      this.#releaseSlot(task.taskId);
    } finally {
      this.#progress();
    }
  }

  #backoff(attempt: number): number {
    const ceiling = Math.min(this.#opts.retryCapMs, this.#opts.retryBaseMs * 2 ** attempt);
    return Math.floor(this.#random() * ceiling);
  }

  #gaveUp(task: TaskRecord, outcome: SubmitOutcome): void {
    this.#skipped.add(task.taskId);
    const reason = outcome.type === 'retryable' ? outcome.reason : outcome.type;
    this.#deps.store.setTaskError(
      this.#opts.runId,
      task.taskId,
      `not submitted after ${this.#opts.submitRetries + 1} attempts: ${reason}`,
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
    switch (outcome.type) {
      case 'accepted': {
        const fresh = await write(() => {
          store.recordSubmitted(runId, id, attemptNo, {
            imgUuid: outcome.imgUuid,
            cost: outcome.cost,
            keyFingerprint,
          });
          return store.getTask(runId, id);
        });
        this.#charged += outcome.cost;
        this.#giveUpStreak = 0;
        this.#log.info({ task: id, img_uuid: outcome.imgUuid, cost: outcome.cost }, 'submitted');
        if (fresh) this.#watch(fresh, 0, entry);
        else this.#releaseSlot(id);
        // The job may have ended before its submission answer reached us (a fast job, a slow answer).
        if (this.#hintedEarly.delete(id)) void this.#confirm(id).catch(() => undefined);
        return 'done';
      }
      case 'rejected':
        await write(() =>
          store.recordNotCharged(runId, id, attemptNo, {
            outcome: 'rejected',
            httpStatus: outcome.httpStatus,
            code: 400,
            message: outcome.message,
          }),
        );
        this.#log.warn({ task: id, msg: outcome.message }, 'rejected by the API (not charged)');
        this.#releaseSlot(id);
        return 'done';
      case 'insufficient-tokens':
        await write(() =>
          store.recordNotCharged(runId, id, attemptNo, {
            outcome: 'not_charged',
            code: 100,
            message: outcome.message,
          }),
        );
        this.#requestStop(
          'insufficient-tokens',
          'the balance ran out (code 100): top up, then run again to continue',
        );
        this.#releaseSlot(id);
        return 'done';
      case 'quota-exceeded':
        await write(() =>
          store.recordNotCharged(runId, id, attemptNo, {
            outcome: 'not_charged',
            code: 101,
            message: outcome.message,
          }),
        );
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
        await write(() =>
          store.recordNotCharged(runId, id, attemptNo, {
            outcome: 'not_charged',
            httpStatus: 401,
            message: outcome.message,
          }),
        );
        this.#haltNow(
          'unauthorized',
          'the API refused the credentials (401): check MEDIABATCH_API_KEY and the base URL',
        );
        this.#releaseSlot(id);
        return 'done';
      case 'retryable':
        await write(() =>
          store.recordNotCharged(runId, id, attemptNo, { outcome: 'not_charged', message: outcome.reason }),
        );
        return 'retry';
      case 'in-doubt':
        await write(() => store.recordInDoubt(runId, id, attemptNo, { message: outcome.reason }));
        this.#inDoubtMax += task.estimate.max;
        this.#log.warn({ task: id, reason: outcome.reason }, 'answer lost after sending: task is in doubt');
        this.#releaseSlot(id);
        return 'done';
    }
  }

  // ---- watching --------------------------------------------------------------------------------

  #watch(task: TaskRecord, polls: number, known?: CatalogEntry): void {
    const entry = known ?? findEntry(task.model);
    if (!entry) return;
    if (!this.#claimed.has(task.taskId)) {
      // A job from an earlier process holds a slot too: it counts as in flight until it finishes.
      this.#claimed.add(task.taskId);
      this.#inFlight++;
    }
    this.#watched.set(task.taskId, { task, entry, polls, misses: 0 });
    const delay =
      task.state === 'downloading' ? 0 : nextPollDelay(this.#opts.pollProfiles[entry.kind], polls);
    this.#schedule(task.taskId, this.#now() + delay);
  }

  #schedule(taskId: string, at: number): void {
    const before = this.#due.peekAt();
    this.#dueAt.set(taskId, at);
    this.#due.push(at, { taskId, at });
    if (before === undefined || at < before) this.#wakeWatcher?.();
  }

  #unwatch(taskId: string): void {
    this.#watched.delete(taskId);
    this.#dueAt.delete(taskId);
    this.#releaseSlot(taskId);
    this.#wakeWatcher?.();
  }

  /**
   * Runs until every watched job has finished and nothing more will be submitted. After an interrupt
   * it ends as soon as the submissions in flight are answered: the next run watches the jobs.
   */
  async #watchLoop(): Promise<void> {
    const halt = this.#halt.signal;
    for (;;) {
      if (halt.aborted) return;
      if (this.#submitDone && (this.#watched.size === 0 || this.#stopReason === 'interrupted')) return;
      for (const { taskId, at } of this.#due.popDue(this.#now())) {
        if (!this.#watched.has(taskId) || this.#dueAt.get(taskId) !== at) continue;
        this.#dueAt.delete(taskId);
        void this.#track(this.#pollLimit(() => this.#poll(taskId, 'poll')));
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
      if (this.#claimed.has(taskId) && (status === undefined || !JOB_ON_THE_WAY.has(status))) {
        this.#hintedEarly.add(taskId);
        return Promise.resolve(false);
      }
      return Promise.resolve(true);
    }
    if (this.#downloading.has(taskId)) return Promise.resolve(true);
    if (imgUuid !== undefined && imgUuid !== watched.task.imgUuid) {
      this.#log.warn({ task: taskId, claimed: imgUuid }, 'callback names another job; ignored');
      return Promise.resolve(true);
    }
    // pending / processing: recording it would cost a request per job and change nothing we act on;
    // the fallback poll records it. An unreadable or unknown status is looked at, as an end might be.
    if (status !== undefined && JOB_ON_THE_WAY.has(status)) return Promise.resolve(true);
    return this.#confirm(taskId).then(
      (seen) => seen !== undefined && (seen === status || JOB_ENDS.has(seen)),
      () => false,
    );
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
    );
    this.#confirming.set(taskId, entry);
    void entry.status
      .finally(() => {
        if (this.#confirming.get(taskId) === entry) this.#confirming.delete(taskId);
      })
      .catch(() => undefined);
    return entry.status;
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
    const nextAt = () =>
      this.#now() + nextPollDelay(this.#opts.pollProfiles[watched.entry.kind], watched.polls);
    switch (outcome.type) {
      case 'ok': {
        watched.misses = 0;
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
        watched.misses++;
        if (watched.misses >= 3) {
          store.setTaskError(
            runId,
            taskId,
            `the API does not know job ${imgUuid} (${outcome.message}); it stays submitted for a later run`,
          );
          this.#log.error({ task: taskId, img_uuid: imgUuid }, 'job unknown to the API; stopped watching it');
          this.#unwatch(taskId);
          return undefined;
        }
        break;
      }
      case 'retryable':
        this.#log.debug({ task: taskId, reason: outcome.reason }, 'poll failed; will look again');
        break;
    }
    const at = nextAt();
    this.#notePolled(taskId, at);
    this.#schedule(taskId, at);
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

  /** A job record from a poll (or, later, a confirmed callback): record the status, then act on it. */
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
    const result = await this.#writes.write(() =>
      store.recordJobStatus(watched.task.imgUuid ?? '', status, record, source),
    );
    if (!result.knownStatus) {
      const key = `${taskId}:${status}`;
      if (!this.#unknownStatusesLogged.has(key)) {
        this.#unknownStatusesLogged.add(key);
        this.#log.warn({ task: taskId, status }, 'unknown job status; treated as not finished yet');
      }
    }
    const state = result.to ?? store.getTask(runId, taskId)?.state;
    if (state === 'failed') {
      if (result.refunded !== null) this.#refunded += result.refunded;
      this.#log.warn({ task: taskId, refunded: result.refunded }, 'job failed (refunded)');
      this.#unwatch(taskId);
      this.#progress();
      return;
    }
    if (state === 'downloading' && status === 'success') {
      if (result.moved) this.#arrivals[source]++;
      this.#startDownload(watched, record);
      this.#progress();
      return;
    }
    if (state && FINAL.has(state)) {
      this.#unwatch(taskId);
      return;
    }
    if (result.moved) this.#progress();
    const at = nextAt();
    this.#notePolled(taskId, at);
    this.#schedule(taskId, at);
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
    );
  }

  async #downloadJob(watched: Watched, record: JobRecord): Promise<void> {
    const { store } = this.#deps;
    const { runId, runDir } = this.#opts;
    const task = watched.task;
    const body = JSON.parse(task.wireBody) as RequestBody;
    const plan = planResults(watched.entry, body, record.json);
    const folder = join(runDir, taskFolderName(task.taskId));
    if (plan.problems.length > 0 && plan.files.length === 0) {
      await this.#writes.write(() => store.markFailed(runId, task.taskId, plan.problems.join('; ')));
      return;
    }
    const done: NewFile[] = [];
    for (const file of plan.files) {
      if (this.#halt.signal.aborted) return;
      const dest = join(folder, file.fileName);
      const result = await this.#downloadWithRetries(file.url, dest, task.taskId);
      if (!result.ok) {
        const message =
          result.type === 'expired'
            ? `the result link expired before it could be downloaded (${file.fileName}); the job was charged`
            : `download of ${file.fileName} failed: ${result.message}`;
        if (result.type === 'expired' || !result.retrySafe) {
          await this.#writes.write(() => store.markFailed(runId, task.taskId, message));
        } else {
          // Still downloading: a later run looks at the job again and retries with a fresh link.
          await this.#writes.write(() => store.setTaskError(runId, task.taskId, message));
        }
        this.#log.error({ task: task.taskId, file: file.fileName, type: result.type }, message);
        return;
      }
      done.push({
        index: file.position,
        kind: (['image', 'audio', 'video', 'json'].includes(file.kind)
          ? file.kind
          : 'image') as ResultItemKind,
        path: dest,
        bytes: result.bytes,
        sha256: result.sha256,
        url: file.url,
      });
    }
    if (plan.sheet !== undefined) {
      await writeFileAtomic(join(folder, 'sheet.json'), `${JSON.stringify(plan.sheet, null, 2)}\n`);
    }
    const jobFile = {
      task: task.taskId,
      model: task.model,
      img_uuid: task.imgUuid,
      files: plan.files.map((f) => f.fileName),
      ...(plan.songs.length > 0 ? { songs: plan.songs } : {}),
      ...(plan.problems.length > 0 ? { problems: plan.problems } : {}),
      job: withoutSignedQueries(record),
    };
    await writeFileAtomic(join(folder, 'job.json'), `${JSON.stringify(jobFile, null, 2)}\n`);
    // The files and the task's end in one commit: a task is done exactly when all its files are recorded.
    await this.#writes.write(() => {
      for (const file of done) store.recordFile(runId, task.taskId, file);
      store.markDone(runId, task.taskId);
    });
    this.#log.info({ task: task.taskId, files: plan.files.length }, 'done');
  }

  async #downloadWithRetries(url: string, dest: string, taskId: string): Promise<DownloadResult> {
    let result: DownloadResult = { ok: false, type: 'network', message: 'not tried', retrySafe: true };
    for (let attempt = 0; attempt < 4; attempt++) {
      result = await this.#deps.download(url, dest, {
        maxBytes: this.#opts.maxDownloadBytes,
        timeoutMs: this.#opts.downloadTimeoutMs,
        signal: this.#halt.signal,
      });
      if (result.ok || !result.retrySafe || this.#halt.signal.aborted) return result;
      this.#log.warn({ task: taskId, reason: result.message }, 'download failed; retrying');
      await this.#sleep(this.#backoff(attempt), this.#halt.signal);
    }
    return result;
  }
}
