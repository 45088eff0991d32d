// Watching the jobs the service is producing: polls on an adaptive schedule, callbacks as hints that a
// poll confirms (a callback's body is never trusted), deadlines after which a job is `stalled` and gives
// its slot back, failed jobs requeued while retries last, and in-doubt tasks a callback proves accepted.

import type { JobRecord } from '../../api/schemas.js';
import { findEntry } from '../../catalog/index.js';
import type { CatalogEntry, RequestBody } from '../../catalog/types.js';
import type { TaskRecord } from '../../store/index.js';
import { jobPhase } from '../../store/index.js';
import { DueQueue, nextLookDelay, observedJobMs } from '../polling.js';
import { type RunCore, UNAUTHORIZED_MESSAGE } from './core.js';
import { type Fetcher, hasResults, withinNotFoundWindow } from './fetch.js';
import type { CallbackHint, Watched } from './types.js';

/** The request a task sent (its wire body); an unreadable one counts as a request with no size fields. */
function requestOf(task: TaskRecord): RequestBody {
  try {
    const body: unknown = JSON.parse(task.wireBody);
    return body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as RequestBody) : {};
  } catch {
    return {};
  }
}

/** Job statuses on the way; a callback claiming one changes nothing we act on. */
const ON_THE_WAY: ReadonlySet<string> = new Set(['pending', 'processing', 'waiting', 'queued']);

type Source = 'poll' | 'callback';

export class Watcher {
  readonly #core: RunCore;
  readonly #fetcher: Fetcher;
  readonly #due = new DueQueue<{ taskId: string; at: number }>();
  /** The one due time that counts per job; queue entries with another time are stale and skipped. */
  readonly #dueAt = new Map<string, number>();
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
  /** Things worth one warning per job, not one per poll (an unknown status, an unreadable answer). */
  readonly #warnedOnce = new Set<string>();

  constructor(core: RunCore, fetcher: Fetcher) {
    this.#core = core;
    this.#fetcher = fetcher;
  }

  closeHints(): void {
    this.#hintsClosed = true;
  }

  /**
   * Starts watching a task's job. `holdsSlot`: the job counts against the run's concurrency (a job the
   * service is producing); results to fetch again and stalled jobs do not.
   */
  watch(task: TaskRecord, polls: number, holdsSlot: boolean, known?: CatalogEntry): void {
    const core = this.#core;
    const entry = known ?? findEntry(task.model);
    if (!entry) return;
    const stalled = task.state === 'stalled';
    const slot = holdsSlot && !stalled;
    if (!core.claimed.has(task.taskId)) {
      core.claimed.add(task.taskId);
      if (slot) core.money.takeSlot();
    }
    const body = requestOf(task);
    const expected = core.durations.expect(entry, body);
    const watched: Watched = {
      task,
      entry,
      polls,
      holdsSlot: slot,
      stalled,
      expected,
      body,
      watchedAt: core.now(),
    };
    core.watched.set(task.taskId, watched);
    // A result to fetch, or a job already past its expected shortest time (a resumed run), is looked at now.
    const now = core.now();
    const submitted = task.submittedAt?.getTime();
    const due = submitted === undefined || now - submitted >= expected.lowMs;
    const fetching = task.state === 'downloading' || task.state === 'unfetched';
    this.#schedule(task.taskId, fetching || (due && !stalled) ? now : this.#nextPollAt(watched));
  }

  #schedule(taskId: string, at: number): void {
    const before = this.#due.peekAt();
    this.#dueAt.set(taskId, at);
    this.#due.push(at, { taskId, at });
    if (before === undefined || at < before) this.#core.wakeWatcher?.();
  }

  unwatch(taskId: string): void {
    const core = this.#core;
    core.releaseSlot(taskId);
    core.watched.delete(taskId);
    this.#dueAt.delete(taskId);
    core.wakeWatcher?.();
    // A task that left the watch may have been the last reason for the submitter to wait.
    core.wakeSubmitter();
  }

  /** The submission answer of a task was recorded: a callback that came before it is looked at now. */
  answerRecorded(taskId: string): void {
    if (this.#hintedEarly.delete(taskId)) void this.confirm(taskId).catch(() => undefined);
  }

  /** This process just put a task in doubt; a callback that came before may already name its job. */
  putInDoubt(taskId: string): void {
    const core = this.#core;
    this.#lastInDoubtAt = core.now();
    const early = this.#hintedEarly.get(taskId);
    this.#hintedEarly.delete(taskId);
    if (early !== undefined)
      void core.track(this.#adoptFromDoubt(taskId, early), `recovering ${taskId} from doubt`);
  }

  /**
   * With a callback receiver, a task put in doubt by this process may still be proved accepted by the
   * job's own callback: the run waits a little for it before it ends (never longer than the policy says).
   */
  #waitingForDoubtCallbacks(): boolean {
    const core = this.#core;
    if (this.#lastInDoubtAt === undefined || !core.opts.callbackUrlFor || core.stopReason !== undefined)
      return false;
    if (this.#adopting.size > 0) return true;
    return core.now() - this.#lastInDoubtAt < core.policy.doubtCallbackWaitMs;
  }

  /** Whether the watching can end: nothing left but stalled jobs (resumable, polled by a later run). */
  #onlyStalledLeft(): boolean {
    for (const w of this.#core.watched.values())
      if (!w.stalled || this.#fetcher.isDownloading(w.task.taskId)) return false;
    return true;
  }

  /**
   * Runs until every watched job has finished (or stalled) and nothing more will be submitted. After an
   * interrupt it ends as soon as the submissions in flight are answered: the next run watches the jobs.
   */
  async loop(): Promise<void> {
    const core = this.#core;
    const halt = core.halt.signal;
    for (;;) {
      if (halt.aborted) return;
      if (core.submitDone && core.stopReason === 'interrupted') return;
      if (core.submitDone && this.#onlyStalledLeft() && !this.#waitingForDoubtCallbacks()) return;
      for (const { taskId, at } of this.#due.popDue(core.now())) {
        if (!core.watched.has(taskId) || this.#dueAt.get(taskId) !== at) continue;
        this.#dueAt.delete(taskId);
        void core.track(
          core.pollLimit(() => this.#poll(taskId, 'poll')),
          `watching ${taskId}`,
        );
      }
      const next = this.#due.peekAt();
      const wait = next === undefined ? 1_000 : Math.max(0, next - core.now());
      const wake = new AbortController();
      core.wakeWatcher = () => wake.abort();
      await core.sleep(Math.min(wait, 1_000), AbortSignal.any([wake.signal, halt]));
      core.wakeWatcher = undefined;
    }
  }

  /** See Runner.hint. */
  hint({ taskId, imgUuid, status }: CallbackHint): Promise<boolean> {
    const core = this.#core;
    if (this.#hintsClosed || core.halt.signal.aborted) return Promise.resolve(true);
    const watched = core.watched.get(taskId);
    if (!watched) {
      // Still being submitted: the callback outran the submission answer. Looked at once it is recorded.
      if (core.claimed.has(taskId)) {
        // Kept even for pending/processing: if the answer turns out lost, this job id recovers the task.
        if (imgUuid !== undefined || status === undefined || !ON_THE_WAY.has(status.toLowerCase()))
          this.#hintedEarly.set(taskId, imgUuid ?? this.#hintedEarly.get(taskId));
        return Promise.resolve(false);
      }
      // A task whose submission answer was lost: the callback may prove the job exists.
      if (imgUuid !== undefined) return this.#adoptFromDoubt(taskId, imgUuid);
      return Promise.resolve(true);
    }
    if (this.#fetcher.isDownloading(taskId)) return Promise.resolve(true);
    if (imgUuid !== undefined && imgUuid !== watched.task.imgUuid) {
      core.log.warn({ task: taskId, claimed: imgUuid }, 'callback names another job; ignored');
      return Promise.resolve(true);
    }
    // pending / processing: recording it would cost a request per job and change nothing we act on;
    // the fallback poll records it. An unreadable or unknown status is looked at, as an end might be.
    if (status !== undefined && ON_THE_WAY.has(status.toLowerCase())) return Promise.resolve(true);
    return this.confirm(taskId).then(
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
    const core = this.#core;
    const { store, client, keyFingerprint } = core.deps;
    const { runId } = core.opts;
    const task = store.tasks.getTask(runId, taskId);
    if (task?.state !== 'in_doubt' || this.#adopting.has(taskId)) return true;
    const entry = findEntry(task.model);
    if (!entry) return true;
    this.#adopting.add(taskId);
    try {
      const outcome = await core.pollLimit(() => client.getJob(imgUuid));
      if (outcome.type !== 'ok') return outcome.type !== 'retryable';
      if (outcome.value.img_uuid !== imgUuid) return true;
      const listPrice = task.estimate.max;
      const adopted = await core.writes.write(() =>
        store.submissions.adoptInDoubt(runId, taskId, {
          imgUuid,
          cost: undefined,
          listPrice,
          keyFingerprint,
        }),
      );
      if (!adopted) return true;
      core.counters.recovered++;
      core.emit({ event: 'recovered', task: taskId, img_uuid: imgUuid });
      core.log.warn(
        { task: taskId, img_uuid: imgUuid },
        'recovered from doubt: a callback proved the job exists',
      );
      const fresh = store.tasks.getTask(runId, taskId);
      if (!fresh) return true;
      this.watch(fresh, 1, true, entry);
      const watched = core.watched.get(taskId);
      if (watched) await this.#onJobRecord(watched, outcome.value, 'callback');
      return true;
    } finally {
      this.#adopting.delete(taskId);
    }
  }

  /** One confirming poll per task at a time; hints arriving before it starts share it. */
  confirm(taskId: string): Promise<string | undefined> {
    const core = this.#core;
    const queued = this.#confirming.get(taskId);
    if (queued && !queued.started) return queued.status;
    // The callback's poll replaces the scheduled one; the poll schedules the next look itself.
    this.#dueAt.delete(taskId);
    const entry: { started: boolean; status: Promise<string | undefined> } = {
      started: false,
      status: Promise.resolve(undefined),
    };
    entry.status = core.track(
      core.pollLimit(() => {
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
    const core = this.#core;
    const now = core.now();
    if (watched.stalled) return now + core.policy.stalledPollMs;
    // A job whose submission time is unknown is looked at as one within its expected time. The submission
    // time comes from the store's clock; one ahead of ours must not hold the first look back.
    const submitted = watched.task.submittedAt?.getTime();
    const elapsed = submitted === undefined ? watched.expected.lowMs : Math.max(0, now - submitted);
    return now + nextLookDelay(core.opts.pollProfiles[watched.entry.kind], watched.expected, elapsed);
  }

  #warnOnce(key: string, fields: Record<string, unknown>, message: string): void {
    if (this.#warnedOnce.has(key)) return;
    this.#warnedOnce.add(key);
    this.#core.log.warn(fields, message);
  }

  /** Looks at one job; resolves to the status the API gave, if it answered. */
  async #poll(taskId: string, source: Source): Promise<string | undefined> {
    const core = this.#core;
    const watched = core.watched.get(taskId);
    if (!watched || core.halt.signal.aborted) return undefined;
    const imgUuid = watched.task.imgUuid;
    if (!imgUuid) {
      this.unwatch(taskId);
      return undefined;
    }
    core.counters.polls++;
    const outcome = await core.deps.client.getJob(imgUuid);
    watched.polls++;
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
        await this.#onJobRecord(watched, outcome.value, source);
        return outcome.value.status;
      }
      case 'unauthorized':
        core.haltNow('unauthorized', UNAUTHORIZED_MESSAGE);
        return undefined;
      case 'not-found':
      case 'rejected': {
        // Right after a submission the service may not know the job yet: waited on for a window of time.
        if (withinNotFoundWindow(core, watched)) break;
        const message = `the API does not know job ${imgUuid} (${outcome.message}); it stays ${watched.task.state} for a later run`;
        await core.writes.write(() => core.deps.store.tasks.setTaskError(core.opts.runId, taskId, message));
        core.leftUnfinished.set(taskId, message);
        core.log.error({ task: taskId, img_uuid: imgUuid }, 'job unknown to the API; stopped watching it');
        this.unwatch(taskId);
        return undefined;
      }
      case 'retryable':
        if (outcome.unreadable) {
          core.counters.unreadable++;
          this.#warnOnce(
            `${taskId}:unreadable`,
            { task: taskId, reason: outcome.reason, request_id: outcome.requestId },
            'the job record could not be read; will look again',
          );
        } else {
          core.log.debug({ task: taskId, reason: outcome.reason }, 'poll failed; will look again');
        }
        if (outcome.retryAfterMs !== undefined) at = core.now() + outcome.retryAfterMs;
        break;
    }
    this.#lookAgain(taskId, Math.max(this.#nextPollAt(watched), at ?? 0));
    return undefined;
  }

  /**
   * The look whose record ends the watch schedules no other, so it is counted here: the task's poll
   * count then matches its job record (the view shows both).
   */
  #countLastLook(taskId: string): void {
    const core = this.#core;
    core.writes
      .write(() => core.deps.store.tasks.notePolled(core.opts.runId, taskId, new Date(core.now())))
      .catch((error: unknown) =>
        core.log.debug({ task: taskId, err: error }, 'poll bookkeeping not recorded'),
      );
  }

  /**
   * Schedules the next look; the poll bookkeeping is for people reading the state, it rides along.
   * `counted`: the look that led here was counted already (with the task's move), only its next is set.
   */
  #lookAgain(taskId: string, at: number, counted = false): void {
    const core = this.#core;
    const { store } = core.deps;
    const { runId } = core.opts;
    core.writes
      .write(() =>
        counted
          ? store.tasks.setNextPoll(runId, taskId, new Date(at))
          : store.tasks.notePolled(runId, taskId, new Date(at)),
      )
      .catch((error: unknown) =>
        core.log.debug({ task: taskId, err: error }, 'poll bookkeeping not recorded'),
      );
    this.#schedule(taskId, at);
  }

  /** A job record from a poll or a confirmed callback: record the status, then act on it. */
  async #onJobRecord(watched: Watched, record: JobRecord, source: Source): Promise<void> {
    const core = this.#core;
    const taskId = watched.task.taskId;
    const status = record.status;
    const phase = jobPhase(status);
    // The look is counted with the move when the task moves (one write of its row), due again now: a look
    // that ends the watch schedules no other, and one that does not sets its next below.
    const result = await core.writes.write(() =>
      core.deps.store.jobs.recordJobStatus(
        watched.task.imgUuid ?? '',
        status,
        record,
        source,
        new Date(core.now()),
      ),
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
    this.#learn(watched, record, phase === 'success', result.moved);
    const state = result.to ?? core.deps.store.tasks.getTask(core.opts.runId, taskId)?.state;
    if (state === 'failed') {
      if (!result.looked) this.#countLastLook(taskId);
      core.log.warn({ task: taskId, refunded: result.refunded }, 'job failed (refunded)');
      await this.#retryFailed(watched, result.refunded);
      core.progress();
      return;
    }
    const fetchable = state === 'downloading' || state === 'unfetched';
    if (phase === 'success' && fetchable && hasResults(record)) {
      if (!result.looked) this.#countLastLook(taskId);
      if (result.moved) core.arrivals[source]++;
      this.#fetcher.start(watched, record);
      core.progress();
      return;
    }
    if (state === 'done' || state === 'lost' || state === 'rejected' || state === 'in_doubt') {
      if (!result.looked) this.#countLastLook(taskId);
      this.unwatch(taskId);
      return;
    }
    if (phase === 'success' && fetchable) {
      // Success with no result list yet: a grace period, then it is paid but unfetched (resumable).
      watched.emptySuccessSince ??= core.now();
      if (core.now() - watched.emptySuccessSince >= core.policy.successGraceMs) {
        const reason = `the service said ${status} but gave no result list for ${Math.round(core.policy.successGraceMs / 1000)} s; the job is charged, not refunded: run again to fetch it`;
        if (state === 'unfetched') this.unwatch(taskId);
        else await this.#fetcher.unfetched(watched, reason, false);
        return;
      }
    } else if (phase !== 'success' && !watched.stalled && this.#pastDeadline(watched)) {
      await this.#stall(watched);
    }
    if (result.moved) core.progress();
    const next = this.#nextPollAt(watched);
    this.#lookAgain(taskId, phase === 'success' ? Math.min(next, core.now() + 1_000) : next, result.looked);
  }

  /** A job seen finished for the first time teaches how long its model takes; one not finished, when it was not. */
  #learn(watched: Watched, record: JobRecord, succeeded: boolean, firstSeen: boolean): void {
    const core = this.#core;
    const now = core.now();
    const submitted = watched.task.submittedAt?.getTime();
    if (!succeeded) {
      watched.lastLookAt = now;
      return;
    }
    if (!firstSeen || submitted === undefined) return;
    // A job of an earlier process, found finished at the first look, says nothing of how long it took: it
    // may have ended minutes before. Only a job seen unfinished, or watched from before its expected
    // shortest time, gives a duration (else one resume would teach that images take an hour).
    const watchedEarly = watched.watchedAt - submitted <= watched.expected.lowMs;
    if (watched.lastLookAt === undefined && !watchedEarly) return;
    const notBefore = Math.max(0, (watched.lastLookAt ?? submitted) - submitted);
    const ms = observedJobMs(notBefore, now - submitted, record.start_time, record.end_time);
    core.durations.observe(watched.entry, watched.body, ms);
  }

  #pastDeadline(watched: Watched): boolean {
    const since = watched.task.submittedAt?.getTime();
    if (since === undefined) return false;
    return this.#core.now() - since > this.#core.policy.jobDeadlineMs[watched.entry.kind];
  }

  /** Past its deadline: the slot goes back to the batch; the job is still watched, slowly. */
  async #stall(watched: Watched): Promise<void> {
    const core = this.#core;
    const taskId = watched.task.taskId;
    const minutes = Math.round(core.policy.jobDeadlineMs[watched.entry.kind] / 60_000);
    const reason = `no result ${minutes} min after submission; still watched, and a later run keeps watching it`;
    const moved = await core.writes
      .write(() => core.deps.store.tasks.moveTask(core.opts.runId, taskId, 'stalled', reason))
      .then(
        () => true,
        () => false,
      );
    if (!moved) return;
    watched.stalled = true;
    watched.task = { ...watched.task, state: 'stalled' };
    core.emit({ event: 'stalled', task: taskId, reason });
    core.leftUnfinished.set(taskId, reason);
    core.log.warn({ task: taskId, img_uuid: watched.task.imgUuid }, 'job stalled past its deadline');
    core.giveBackSlot(watched);
    core.progress();
  }

  /**
   * A failed job was refunded (recorded with its status). With `retries` left, the task goes back to
   * pending as a new attempt: the budget counts at most one unrefunded attempt per task.
   */
  async #retryFailed(watched: Watched, refunded: number | null): Promise<void> {
    const core = this.#core;
    const { store } = core.deps;
    const { runId } = core.opts;
    const taskId = watched.task.taskId;
    const allowed = core.retriesOf(watched.task);
    const charged = store.submissions.chargedAttempts(runId, taskId);
    let retrying = false;
    if (allowed > 0 && charged <= allowed && !core.stopSubmitting.signal.aborted) {
      const requeued = await core.writes.write(() => store.tasks.requeueTasks(runId, [taskId], ['failed']));
      retrying = requeued.length === 1;
      if (retrying) {
        core.counters.retried++;
        core.log.info(
          { task: taskId, attempt: charged + 1, of: allowed + 1 },
          'job failed; submitting it again',
        );
      }
    }
    core.emit({ event: 'failed', task: taskId, refunded, retrying });
    this.unwatch(taskId);
  }
}
