// The state a run's parts share, and the few moves on it that more than one part makes: the concurrency
// slots, the money (whole micro-tokens, ../../util/money.ts), the stop and halt signals, the write queue,
// events and progress. Submitting, watching and fetching each live in their own module and act through
// this; the Runner (../runner.ts) only wires them together.

import { setMaxListeners } from 'node:events';
import pLimit, { type LimitFunction } from 'p-limit';
import { backoffDelay } from '../../api/backoff.js';
import { UNAUTHORIZED_MESSAGE } from '../../api/errors.js';
import type { PollOutcome } from '../../api/outcome.js';
import { findEntry } from '../../catalog/index.js';
import type { CatalogEntry } from '../../catalog/types.js';
import type { ProbeItem } from '../../media/probe.js';
import type { ProbeResult } from '../../media/types.js';
import { RunMoney } from '../../money/index.js';
import { stateFileError } from '../../store/db.js';
import type { TaskRecord } from '../../store/index.js';
import type { Logger } from '../../util/log.js';
import { toMicro } from '../../util/money.js';
import { sleep as defaultSleep } from '../../util/sleep.js';
import { type RunEventBody, stamp } from '../events.js';
import { JobDurations } from '../polling.js';
import { WriteQueue } from '../writes.js';
import {
  DEFAULT_WATCH_POLICY,
  type RunnerDeps,
  type RunnerOptions,
  type RunResult,
  type StopReason,
  type Watched,
  type WatchPolicy,
} from './types.js';
import { UpstreamRecords } from './upstream-records.js';

export { UNAUTHORIZED_MESSAGE };

export class RunCore {
  readonly deps: RunnerDeps;
  readonly opts: RunnerOptions;
  readonly policy: WatchPolicy;
  readonly now: () => number;
  readonly random: () => number;
  readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly log: Logger;
  readonly writes: WriteQueue;
  /** Polls in flight at once, for all jobs together (confirming polls and link refreshes included). */
  readonly pollLimit: LimitFunction;
  readonly downloadLimit: LimitFunction;
  /** Job durations learnt per model from this run's jobs: when to look at the next job of that model. */
  readonly durations: JobDurations;
  /** Some task of the run waits for another: submissions look at upstreams. */
  readonly chained: boolean;
  /** Success records of this process's jobs, links signed, for the downstreams that take their results. */
  readonly upstreamRecords = new UpstreamRecords();
  #measure: ((needs: ProbeItem[]) => Promise<Map<string, ProbeResult>>) | undefined;

  stopReason: StopReason | undefined;
  stopMessage: string | undefined;
  quota: RunResult['quota'];
  /** Stops submitting (first interrupt, money ran out, budget, API down, a local disk problem). */
  readonly stopSubmitting = new AbortController();
  /** Stops everything (401, second interrupt, lease lost). */
  readonly halt = new AbortController();

  /** Tasks this process is handling right now (submitting, watching or downloading). */
  readonly claimed = new Set<string>();
  readonly watched = new Map<string, Watched>();
  /** The run's money and slots: read from the store, owned by ../money.ts. */
  readonly money: RunMoney;
  readonly counters = { polls: 0, unreadable: 0, recovered: 0, retried: 0, accepted: 0 };
  /** How the successes of this process became known: a confirmed callback, or a poll of our own. */
  readonly arrivals = { poll: 0, callback: 0 };
  submitDone = false;
  /**
   * Tasks this process leaves unfinished for a reason of their own (put off to the end, a job the API did
   * not know), and why: the run's last line says it.
   */
  readonly leftUnfinished = new Map<string, string>();
  /**
   * A worker of a fleet with nothing to do looks for lost workers' work with this (the Runner's sweep);
   * true when it took some over (tasks back in the queue, jobs to watch).
   */
  sweepOthers: (() => boolean) | undefined;
  /** Wakes the watch loop early (a job due sooner, a halt, the end of submitting). */
  wakeWatcher: (() => void) | undefined;
  /** Everyone waiting for a wake: the submit loop, and submissions waiting for room for their exact price. */
  #waiting: (() => void)[] = [];
  readonly #pending = new Set<Promise<unknown>>();
  #lastProgressAt = 0;

  constructor(deps: RunnerDeps, opts: RunnerOptions) {
    this.deps = deps;
    this.opts = opts;
    this.policy = { ...DEFAULT_WATCH_POLICY, ...opts.watch };
    this.now = deps.now ?? Date.now;
    this.random = deps.random ?? Math.random;
    this.sleep = deps.sleep ?? defaultSleep;
    this.log = deps.logger.child({ run: opts.runId });
    this.money = new RunMoney(
      deps.store,
      opts.runId,
      opts.budget === undefined ? undefined : toMicro(opts.budget),
    );
    this.pollLimit = pLimit(opts.pollConcurrency);
    this.downloadLimit = pLimit(opts.downloadConcurrency);
    this.durations = new JobDurations(opts.jobTimeScale ?? 1);
    this.writes = new WriteQueue(deps.store, () => this.money.readWithBatch());
    this.chained = deps.store.chains.hasChains(opts.runId);
    this.#measure = deps.measure;
    // Every download and sleep listens on these; dozens at once are expected, not a leak.
    setMaxListeners(0, this.halt.signal, this.stopSubmitting.signal);
  }

  emit(body: RunEventBody): void {
    this.deps.onEvent?.(stamp(body, this.opts.runId, new Date(this.now())));
  }

  /** Stops submitting, for a reason the user is told. The first reason wins. */
  requestStop(reason: StopReason, message: string): void {
    if (!this.stopReason) {
      this.stopReason = reason;
      this.stopMessage = message;
    }
    this.stopSubmitting.abort();
    this.wakeSubmitter();
  }

  haltNow(reason: StopReason, message: string): void {
    this.requestStop(reason, message);
    if (reason === 'unauthorized' || reason === 'lease-lost') {
      // These override a softer reason: the user must act before anything else happens.
      this.stopReason = reason;
      this.stopMessage = message;
    }
    this.halt.abort();
    this.wakeWatcher?.();
    this.wakeSubmitter();
  }

  /**
   * Every background promise ends here: an unexpected error (a full state disk, a bug) stops the run
   * with one line and leaves everything resumable, never an unhandled rejection.
   */
  guard<T>(promise: Promise<T>, what: string): Promise<T | undefined> {
    return promise.catch((error: unknown) => {
      this.log.error({ err: error }, `unexpected error while ${what}`);
      this.haltNow('internal', this.stopLine(error, `stopped after an unexpected error while ${what}`));
      return undefined;
    });
  }

  /**
   * The one line for an error that stops the run: the state file's own trouble (full, read-only) named
   * with what to do, since everything committed stays resumable; anything else as what it says.
   */
  stopLine(error: unknown, context: string): string {
    const problem = stateFileError(error, this.deps.store.file);
    if (problem !== undefined && problem.kind !== 'data') return problem.message;
    return `${context}: ${messageOf(error)}`;
  }

  /** A background piece of work the run waits for before it returns. */
  track<T>(promise: Promise<T>, what = 'working on a task'): Promise<T | undefined> {
    const guarded = this.guard(promise, what);
    this.#pending.add(guarded);
    void guarded.finally(() => this.#pending.delete(guarded));
    return guarded;
  }

  async settle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  /** Counting tasks is a query: at most a few times a second, and always at the end. */
  progress(final = false, waitingForDecisions?: number): void {
    if (!this.deps.onProgress) return;
    const now = this.now();
    if (!final && now - this.#lastProgressAt < 200) return;
    this.#lastProgressAt = now;
    this.deps.onProgress({
      counts: this.deps.store.tasks.countTasksByState(this.opts.runId),
      charged: this.money.charged,
      refunded: this.money.refunded,
      inFlight: this.money.slots,
      estimateChange: this.money.estimateChange,
      ...(waitingForDecisions !== undefined ? { waitingForDecisions } : {}),
    });
  }

  /** Chained tasks the store just blocked: said, as events and in the log. */
  blocked(tasks: ReadonlyArray<{ taskId: string; reason: string }>): void {
    for (const { taskId, reason } of tasks) {
      this.emit({ event: 'blocked', task: taskId, reason });
      this.log.warn({ task: taskId, reason }, 'blocked: an upstream gives it nothing in this run');
    }
    if (tasks.length > 0) this.progress();
  }

  entryOf(model: string): CatalogEntry | undefined {
    return findEntry(model);
  }

  /** Measures media lengths over HTTP (loaded on first use: most runs never measure). */
  async measure(needs: ProbeItem[]): Promise<Map<string, ProbeResult>> {
    if (this.#measure === undefined) {
      const { createProber, probeMany } = await import('../../media/probe.js');
      const prober = createProber();
      this.#measure = (items) => probeMany(prober, items, 4);
    }
    return this.#measure(needs);
  }

  /**
   * A job's record asked for again, for fresh links (a downstream's references, a result link the CDN
   * refused). A passing fault (a 500, a 429, a reset) is retried like a submission: giving up on it would
   * leave a downstream pending, or a paid result unfetched, although nothing was wrong with either.
   */
  async jobRecordAgain(imgUuid: string): Promise<PollOutcome> {
    let outcome = await this.pollLimit(() => this.deps.client.getJob(imgUuid));
    this.counters.polls++;
    for (let attempt = 0; outcome.type === 'retryable' && attempt < this.opts.submitRetries; attempt++) {
      await this.sleep(Math.max(outcome.retryAfterMs ?? 0, this.backoff(attempt)), this.halt.signal);
      if (this.halt.signal.aborted) break;
      outcome = await this.pollLimit(() => this.deps.client.getJob(imgUuid));
      this.counters.polls++;
    }
    return outcome;
  }

  retriesOf(task: TaskRecord): number {
    return this.opts.retries ?? task.retries;
  }

  backoff(attempt: number): number {
    return backoffDelay(attempt, {
      baseMs: this.opts.retryBaseMs,
      capMs: this.opts.retryCapMs,
      random: this.random,
    });
  }

  // ---- slots -----------------------------------------------------------------------------------

  /**
   * Resolves when a slot is freed, money is known, or submitting must stop. Several wait at once (the loop
   * for room, chained submissions for room for their exact price): each wake wakes them all, and each
   * looks again at what it waits for.
   */
  async waitForWake(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.#waiting.push(resolve);
    });
  }

  wakeSubmitter(): void {
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const resolve of waiting) resolve();
  }

  releaseSlot(taskId: string): void {
    if (!this.claimed.delete(taskId)) return;
    const watched = this.watched.get(taskId);
    if (watched === undefined || watched.holdsSlot) this.money.freeSlot();
    if (watched) watched.holdsSlot = false;
    this.wakeSubmitter();
  }

  /** A stalled job gives its slot back but stays claimed and watched. */
  giveBackSlot(watched: Watched): void {
    if (!watched.holdsSlot) return;
    watched.holdsSlot = false;
    this.money.freeSlot();
    this.wakeSubmitter();
  }
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
