// Submitting pending tasks: a bounded number in flight (slots), never past the budget (a task's worst
// case is counted from before its POST until its answer is committed), retries with backoff that a
// throttled answer does not use up, and a stop when several tasks in a row could not be submitted at all.

import type { SubmitOutcome } from '../../api/outcome.js';
import { findEntry } from '../../catalog/index.js';
import type { CatalogEntry, RequestBody } from '../../catalog/types.js';
import { OverBudgetError } from '../../money/index.js';
import { finishEarlierResult } from '../../review/index.js';
import type { TaskRecord } from '../../store/index.js';
import { fromMicro, tokensOf, toMicro } from '../../util/money.js';
import type { RunCore } from './core.js';
import { type OutcomeParts, recordOutcome } from './outcomes.js';
import { PutOff } from './put-off.js';
import { type Prepared, prepareChained } from './upstream.js';
import type { Watcher } from './watch.js';

/** How often a run waiting for people looks for their decisions. */
const REVIEW_POLL_MS = 1_000;

export class Submitter {
  readonly #core: RunCore;
  readonly #parts: OutcomeParts;
  /** Pending tasks this process will not send (the budget, or put off to the end): left for a later run. */
  readonly #skipped = new Set<string>();
  /** Tasks put off for a passing reason (an upstream's record not had, the API failing): tried again. */
  readonly #putOff: PutOff;
  /** When the last batch of pending tasks was asked for (#nextBatch). */
  #lookedAt = 0;
  /** Tasks left pending because their worst case exceeds what is left of the budget. */
  readonly #overBudget: TaskRecord[] = [];
  /** Tasks that were pending and got their first submission in this process (for --limit). */
  readonly #startedIds = new Set<string>();
  #giveUpStreak = 0;

  constructor(core: RunCore, watcher: Watcher) {
    this.#core = core;
    // Equal jitter: the pause grows with each round whatever the draw, and tasks put off together spread.
    this.#putOff = new PutOff(core.now, (round) => {
      const ceiling = Math.min(core.opts.retryCapMs, core.opts.retryBaseMs * 2 ** (round + 1));
      return ceiling / 2 + core.backoff(round + 1) / 2;
    });
    this.#parts = {
      core,
      watcher,
      accepted: () => {
        this.#giveUpStreak = 0;
        core.counters.accepted++;
      },
    };
  }

  /** A watched job that may still fail and come back for another attempt keeps the submitter alive. */
  #mayComeBack(): boolean {
    for (const w of this.#core.watched.values()) if (this.#core.retriesOf(w.task) > 0) return true;
    return false;
  }

  async loop(): Promise<void> {
    const core = this.#core;
    const { store } = core.deps;
    const { runId, concurrency } = core.opts;
    const submissions = new Set<Promise<unknown>>();
    const stopWatchingDecisions = this.#watchDecisions();
    outer: while (!core.stopSubmitting.signal.aborted) {
      const batch = this.#nextBatch();
      if (batch.length === 0) {
        if (await this.#idle(submissions)) continue;
        break;
      }
      tasks: for (const task of batch) {
        while (core.money.slots >= concurrency && !core.stopSubmitting.signal.aborted)
          await core.waitForWake();
        if (core.stopSubmitting.signal.aborted) break outer;
        // A chained task still to be filled in meets the budget with its exact price, once its upstream's
        // result is measured (#roomForExact): the plan's range up to a model's maximum would keep out an
        // avatar of a 5 s speech whenever 60 s would not fit.
        const pricedLater = core.chained && task.wireBody.includes('{{after');
        let admission = this.#admit(task, pricedLater);
        while (admission === 'later') {
          if (!(await this.#pollOthers())) break outer;
          admission = this.#admit(task, pricedLater);
        }
        if (admission === 'stop') break outer;
        if (admission === 'skip') continue;
        for (let room = pricedLater ? 'go' : this.#room(task); room !== 'go'; room = this.#room(task)) {
          if (room === 'stop') break outer;
          if (room === 'skip') continue tasks;
          // Answers in flight will turn worst cases into real costs; look again after one arrives (another
          // worker's answer wakes nobody here: looked for every poll).
          if (room === 'poll') {
            if (!(await this.#pollOthers())) break outer;
          } else await core.waitForWake();
          if (core.stopSubmitting.signal.aborted) break outer;
        }
        const entry = findEntry(task.model);
        if (!entry) {
          store.tasks.markBlocked(
            runId,
            task.taskId,
            `unknown model ${task.model}: this mediabatch does not know it`,
          );
          continue;
        }
        core.claimed.add(task.taskId);
        core.money.takeSlot();
        if (task.state === 'pending') this.#startedIds.add(task.taskId);
        const p = core.track(this.#submitTask(task, entry), `submitting ${task.taskId}`);
        submissions.add(p);
        void p.finally(() => submissions.delete(p));
      }
    }
    stopWatchingDecisions();
    // Every submission in flight gets its answer recorded, whatever stopped the loop.
    await Promise.allSettled([...submissions]);
    this.#stopIfOverBudget();
  }

  /** The next pending tasks to look at, neither claimed nor skipped; longest first over tasks still to come. */
  #nextBatch() {
    const core = this.#core;
    this.#lookedAt = core.now();
    const { incoming, fleet, runId } = core.opts;
    const { store } = core.deps;
    // A worker of a fleet claims what it takes, about as many as it has free slots: the rest of the queue
    // stays for the others. Its own claims come back too (retries it left, re-rolls), filtered below.
    const batch = (
      fleet
        ? store.claims.claimPending(
            runId,
            fleet.workerId,
            Math.max(1, core.opts.concurrency - core.money.slots) + core.claimed.size,
            core.opts.only,
            core.opts.order,
            this.#putOff.size === 0 ? this.#skipped : this.#notNow(),
          )
        : store.tasks.nextPending(
            runId,
            core.opts.concurrency * 2 + core.claimed.size + this.#skipped.size + this.#putOff.size,
            core.opts.only,
            core.opts.order,
          )
    ).filter(
      (t) => !core.claimed.has(t.taskId) && !this.#skipped.has(t.taskId) && !this.#putOff.isResting(t.taskId),
    );
    for (const t of batch) this.#putOff.take(t.taskId);
    if (incoming && !incoming.ended && core.opts.order !== 'manifest') {
      // Longest first over every task, not only the stored ones: a longer one still to come goes first.
      const longestToCome = incoming.longestUnstoredMs();
      return batch.filter((t) => t.expectedMs >= longestToCome);
    }
    return batch;
  }

  /** What a worker of a fleet does not claim now: the tasks it skips, and those put off and resting. */
  #notNow(): Set<string> {
    return new Set([...this.#skipped, ...this.#putOff.resting()]);
  }

  /** Tasks left out for the budget stop the run with one line saying what they need. */
  #stopIfOverBudget(): void {
    const core = this.#core;
    if (this.#overBudget.length === 0) return;
    const need = this.#overBudget.reduce((n, t) => n + toMicro(t.estimate.max), 0);
    // The run's budget, or the period's of a fired run when that one leaves less.
    const limit = core.money.tightest() ?? {
      name: `the budget of ${tokensOf(core.opts.budget ?? 0)}`,
      setting: 'budget',
      leftMicro: 0,
      room: 'nothing left',
    };
    core.requestStop(
      limit.setting === 'budget_per_period' ? 'period-budget' : 'budget',
      `${this.#overBudget.length} task(s) did not fit under ${limit.name} (${limit.room}; they need up to ${tokensOf(fromMicro(need))}): raise ${limit.setting} and run again to continue`,
    );
  }

  /** Nothing to submit now: waits for what may bring more (true), or says the loop is over (false). */
  async #idle(submissions: ReadonlySet<Promise<unknown>>): Promise<boolean> {
    const core = this.#core;
    const { incoming } = core.opts;
    if (incoming && !incoming.ended) {
      await incoming.next();
      return true;
    }
    // A put-off task whose pause was over when the batch was asked for, and not in it, is no longer
    // pending: nothing to wait for. One whose pause ended since is due now, and is looked for again.
    this.#putOff.dropDue(this.#lookedAt);
    const due = this.#wakeWhenDue();
    try {
      if (submissions.size > 0) {
        // Tasks waiting to retry are still claimed; wait for one to settle before looking again.
        await Promise.race([Promise.race(submissions), due.promise]);
        return true;
      }
      if ((core.chained && this.#waitForUpstreams()) || (this.#mayComeBack() && !core.halt.signal.aborted)) {
        await core.waitForWake();
        return true;
      }
      // Nothing else is going on: a task put off with rounds left is what the run waits for.
      if (this.#putOff.hasRoundsLeft() && !core.stopSubmitting.signal.aborted) {
        await due.promise;
        return true;
      }
    } finally {
      due.cancel();
    }
    this.#leavePutOff();
    // `--wait-for-review`: results still to be decided may send downstreams or re-rolls on.
    if (this.#awaitsDecision()) {
      await this.#waitForDecision();
      return true;
    }
    return this.#waitForOthers();
  }

  /**
   * Wakes the loop when the first put-off task is due again (the submit loop, or a wait for a slot or an
   * upstream); `promise` resolves then, or once submitting stops, or on `cancel`.
   */
  #wakeWhenDue(): { promise: Promise<void>; cancel(): void } {
    const core = this.#core;
    const dueIn = this.#putOff.dueIn();
    if (dueIn === undefined) return { promise: new Promise<void>(() => {}), cancel: () => {} };
    const ended = new AbortController();
    const stop = () => ended.abort();
    core.stopSubmitting.signal.addEventListener('abort', stop, { once: true });
    const promise = core.sleep(dueIn, ended.signal).then(() => {
      if (!ended.signal.aborted) core.wakeSubmitter();
    });
    return {
      promise,
      cancel: () => {
        core.stopSubmitting.signal.removeEventListener('abort', stop);
        ended.abort();
      },
    };
  }

  /**
   * Nothing else is left and the tasks put off have had their rounds: they stay pending for a later run,
   * each with why (the run's last line says it), and a worker of a fleet gives their claims back.
   */
  #leavePutOff(): void {
    const core = this.#core;
    const left = this.#putOff.giveUpAll();
    if (left.length === 0) return;
    for (const { taskId, reason } of left) {
      this.#skipped.add(taskId);
      core.leftUnfinished.set(taskId, reason);
      core.log.warn({ task: taskId, reason }, 'left pending for a later run');
    }
    const { fleet, runId } = core.opts;
    if (fleet)
      core.deps.store.claims.giveUp(
        runId,
        fleet.workerId,
        left.map((t) => t.taskId),
      );
  }

  /**
   * A worker of a fleet with nothing of its own stays while other workers hold work: their tasks may
   * make downstreams ready, fail back into the queue, or come to it when they are found lost.
   */
  async #waitForOthers(): Promise<boolean> {
    const core = this.#core;
    const { fleet, runId } = core.opts;
    if (!fleet || core.stopSubmitting.signal.aborted) return false;
    if (core.sweepOthers?.() === true) return true;
    const { claims } = core.deps.store;
    if (claims.heldByOthers(runId, fleet.workerId) === 0) {
      // A task another worker gave back after this worker's last claim and before that count is held by
      // nobody now: claimed once more before leaving, or this worker would leave it unseen (and its stop
      // line would count fewer tasks than the run leaves pending).
      if (this.#nextBatch().length > 0) return true;
      if (claims.heldByOthers(runId, fleet.workerId) === 0) return false;
    }
    await core.sleep(fleet.idlePollMs, core.stopSubmitting.signal);
    return true;
  }

  #awaitsDecision(): boolean {
    const core = this.#core;
    if (core.opts.waitForReview !== true || core.stopSubmitting.signal.aborted) return false;
    return core.deps.store.reviews.countAwaiting(core.opts.runId) > 0;
  }

  /** Until someone decides anything (the store's decision mark moves), or the run is stopped. */
  async #waitForDecision(): Promise<void> {
    const core = this.#core;
    const { store } = core.deps;
    const mark = store.reviews.decisionMark();
    // Said at once, not throttled: the last frame before the wait must not show tasks in flight.
    core.progress(true, store.reviews.countAwaiting(core.opts.runId));
    while (store.reviews.decisionMark() === mark && !core.stopSubmitting.signal.aborted) {
      await core.sleep(core.opts.reviewPollMs ?? REVIEW_POLL_MS, core.stopSubmitting.signal);
    }
  }

  /**
   * While the loop waits for slots or upstreams, a decision taken elsewhere (`mediabatch review`, the view)
   * wakes it: an approval makes a downstream ready, a re-roll makes a done task pending. One look at the
   * decisions table's last id per tick. Returns the function that stops it.
   */
  #watchDecisions(): () => void {
    const core = this.#core;
    const { store } = core.deps;
    if (!store.reviews.hasReviewed(core.opts.runId)) return () => {};
    let mark = store.reviews.decisionMark();
    const timer = setInterval(() => {
      let now = mark;
      try {
        now = store.isOpen ? store.reviews.decisionMark() : mark;
      } catch {
        // Only a hint to wake up: thrown in a timer it would end the process (a database gone for a
        // moment); the submitter's own next statement meets the same error where it is handled.
        return;
      }
      if (now === mark) return;
      mark = now;
      core.wakeSubmitter();
    }, core.opts.reviewPollMs ?? REVIEW_POLL_MS);
    timer.unref();
    return () => clearInterval(timer);
  }

  /**
   * Nothing is ready to submit: blocks the chained tasks whose upstream gives them nothing (failed,
   * rejected, in doubt, result not on disk) and says whether some still wait for a job this process is
   * producing or fetching (a stalled one is not waited for: the next run watches it).
   */
  #waitForUpstreams(): boolean {
    const core = this.#core;
    const { store } = core.deps;
    const { runId } = core.opts;
    if (core.stopSubmitting.signal.aborted) return false;
    const working = (taskId: string) =>
      core.claimed.has(taskId) && core.watched.get(taskId)?.stalled !== true;
    // In a fleet, another worker's job (or one waiting to be adopted) may still give its result: only its
    // holder, or the last worker out, says its downstreams are blocked.
    const { fleet } = core.opts;
    const elsewhere = fleet ? store.claims.jobsElsewhere(runId, fleet.workerId) : new Set<string>();
    const blocked = store.chains.blockDownstreams(runId, (id) => core.claimed.has(id) || elsewhere.has(id));
    core.blocked(blocked);
    return store.chains.waitingOnActive(runId).some((w) => working(w.upstreamId));
  }

  /** --limit, then whether the task's worst case fits what is left of the budget even with nothing in flight. */
  #admit(task: TaskRecord, pricedLater: boolean): 'go' | 'skip' | 'later' | 'stop' {
    const core = this.#core;
    const started = this.#startedIds.size;
    if (core.opts.limit !== undefined && started >= core.opts.limit) {
      core.requestStop(
        'limit',
        `submitted ${started} task(s) as --limit asked; the rest stays pending: run again without --limit to continue`,
      );
      return 'stop';
    }
    // Fits what fits: a task whose worst case exceeds what is left even with nothing in flight is left
    // pending, and cheaper ones go on.
    // A task priced once filled in is still kept out when even the plan's least price would not fit: its
    // upstream's record is not fetched, nor its media measured, for nothing.
    const worst = pricedLater ? task.estimate.min : task.estimate.max;
    if (!core.money.fits(this.#need(task, worst), true)) {
      if (this.#othersMayGiveRoom()) return 'later';
      this.#giveUp(task);
      return 'skip';
    }
    return 'go';
  }

  /**
   * In a fleet, other workers' submissions in flight hold their worst cases: their answers may leave room
   * for a task that does not fit now, as this process's own answers would.
   */
  #othersMayGiveRoom(): boolean {
    const core = this.#core;
    return core.opts.fleet !== undefined && core.money.othersInFlightMicro() > 0;
  }

  /** Waits one poll for other workers' answers and reads the money again; false once submitting stops. */
  async #pollOthers(): Promise<boolean> {
    const core = this.#core;
    await core.sleep(core.opts.fleet?.idlePollMs ?? 0, core.stopSubmitting.signal);
    core.money.changed();
    return !core.stopSubmitting.signal.aborted;
  }

  /**
   * A task whose worst case the budget cannot cover is left pending for a later run, and its claim given
   * back: a worker that will not send it must not keep the others waiting for it.
   */
  #giveUp(task: TaskRecord): void {
    const core = this.#core;
    this.#overBudget.push(task);
    this.#skipped.add(task.taskId);
    const { fleet, runId } = core.opts;
    if (fleet) core.deps.store.claims.giveUp(runId, fleet.workerId, [task.taskId]);
  }

  /**
   * Whether the task fits beside the worst cases in flight; `wait` for this process's answers, `poll` for
   * other workers', `skip` when other workers took the room since it was admitted, `stop` if none are in
   * flight.
   */
  #room(task: TaskRecord): 'go' | 'wait' | 'poll' | 'skip' | 'stop' {
    const core = this.#core;
    const need = this.#need(task, task.estimate.max);
    if (core.money.fits(need)) return 'go';
    if (core.money.inFlightMaxMicro > 0) return 'wait';
    if (this.#othersMayGiveRoom()) return 'poll';
    if (core.opts.fleet && !core.money.fits(need, true)) {
      this.#giveUp(task);
      return 'skip';
    }
    core.requestStop(
      'budget',
      `the budget of ${tokensOf(core.opts.budget ?? 0)} cannot cover the next task (${task.taskId}, up to ${tokensOf(task.estimate.max)}): raise budget and run again to continue`,
    );
    return 'stop';
  }

  /** Whether a filled-in task's exact price fits under the budget now (waiting for answers in flight). */
  async #roomForExact(task: TaskRecord): Promise<boolean> {
    const core = this.#core;
    const max = this.#need(task, task.estimate.max);
    while (!core.money.fits(max)) {
      const alone = core.money.fits(max, true);
      if (!alone && !this.#othersMayGiveRoom()) {
        this.#giveUp(task);
        return false;
      }
      if (alone && core.money.inFlightMaxMicro > 0) await core.waitForWake();
      else if (!(await this.#pollOthers())) return false;
      if (core.stopSubmitting.signal.aborted) return false;
    }
    return true;
  }

  /**
   * Long on purpose: one task's submissions until one is answered for good; the money order is one piece:
   * intent committed with its worst case reserved, POST, answer committed (the reservation settled), then retry or not.
   */
  async #submitTask(planned: TaskRecord, entry: CatalogEntry): Promise<void> {
    const core = this.#core;
    const { client } = core.deps;
    const task = core.chained ? await this.#fillIn(planned, entry) : planned;
    if (task === undefined) return;
    // A filled-in task is admitted with its exact price: the budget is a hard cap even when the
    // upstream's result makes the task dearer than the plan thought.
    if (task !== planned) {
      if (!(await this.#roomForExact(task))) {
        core.releaseSlot(task.taskId);
        core.progress();
        return;
      }
    }
    // A re-roll's earlier result is kept (attempt-<n>/) before the new one can overwrite it; usually done
    // when it was asked for, here after a process that died in between.
    if (task.review && task.attempt > 1) await this.#keepEarlier(task);
    const body = JSON.parse(task.wireBody) as RequestBody;
    // The per-task callback URL carries the run's token; it is added when sending, so the stored request
    // (and its hash) stays the same whatever receiver a resumed run uses.
    const callbackUrl = core.opts.callbackUrlFor?.(task.taskId);
    if (callbackUrl) body['custom_callback_url'] = callbackUrl;
    const taskMax = toMicro(task.estimate.max);
    // Counted from here, before the intent is committed, so the tasks looked at meanwhile see it.
    core.money.reserving(taskMax);
    // Where this task's worst case is counted: on its way to the intent, reserved in the store, or not.
    let counted: 'pending' | 'held' | undefined = 'pending';
    let throttled = 0;
    try {
      for (let attempt = 0; ; ) {
        // The intent is committed before a byte is sent: a crash from here on leaves the task in doubt.
        // Links to local inputs are signed before the intent (signing is local and cannot half-submit)
        // and anew for each attempt, so a resumed or retried task never sends an expired one.
        const sent = core.opts.inputLinks ? await core.opts.inputLinks(body) : body;
        const attemptNo = await this.#intent(task, taskMax);
        counted = attemptNo === undefined ? undefined : 'held';
        if (attemptNo === undefined) return;
        const outcome = await client.submit(entry.endpoint, sent);
        const ref = outcome.requestId ? ` (request ${outcome.requestId})` : '';
        const after = await recordOutcome(this.#parts, { task, entry, attemptNo, outcome, ref });
        // Only now is the real cost (or its absence) recorded: until then the worst case stays counted.
        counted = undefined;
        core.money.answered(taskMax);
        // A worst case became a real cost: a task waiting for room under the budget may fit now.
        core.wakeSubmitter();
        if (after === 'done') return;
        // A 429 proves nothing was charged and says nothing about the task: it spends no retry.
        const isThrottle = outcome.type === 'retryable' && outcome.throttled === true;
        if (isThrottle) throttled++;
        else attempt++;
        const exhausted = attempt > core.opts.submitRetries || throttled > core.policy.maxThrottledPerTask;
        if (exhausted || core.stopSubmitting.signal.aborted) {
          if (exhausted) this.#gaveUp(task, outcome, attempt + throttled);
          core.releaseSlot(task.taskId);
          return;
        }
        const retryAfter = outcome.type === 'retryable' ? outcome.retryAfterMs : undefined;
        const delay = retryAfter ?? core.backoff(Math.max(0, attempt - 1));
        core.log.info(
          { task: task.taskId, attempt: attempt + throttled, delayMs: delay, throttled: isThrottle },
          'submission not accepted; retrying',
        );
        await core.sleep(delay, core.stopSubmitting.signal);
        if (core.stopSubmitting.signal.aborted) {
          core.releaseSlot(task.taskId);
          return;
        }
        core.money.reserving(taskMax);
        counted = 'pending';
      }
    } catch (error) {
      // An error after the intent (a store failure, a bug) must not free the task for a second POST in
      // this process; the intent row makes it in doubt for the next run.
      core.log.error({ task: task.taskId, err: error }, 'submission failed unexpectedly');
      if (counted === 'pending') core.money.refused(taskMax);
      if (counted === 'held') core.money.answered(taskMax);
      core.requestStop('internal', core.stopLine(error, `error while submitting ${task.taskId}`));
      core.releaseSlot(task.taskId);
    } finally {
      core.progress();
    }
  }

  /**
   * The intent committed with its worst case reserved in the store: the attempt number, or undefined when
   * the store refused it for the budget (another spender took the room first). The task stays pending:
   * looked at again once answers in flight settle, or left out for the budget when none are.
   */
  async #intent(task: TaskRecord, taskMax: number): Promise<number | undefined> {
    const core = this.#core;
    const { store } = core.deps;
    try {
      const attemptNo = (
        await core.writes.write(
          () =>
            store.submissions.recordSubmitIntentSoon(core.opts.runId, task.taskId, core.opts.fleet?.workerId),
          { money: true },
        )
      )();
      core.money.reserved(taskMax);
      return attemptNo;
    } catch (error) {
      if (!(error instanceof OverBudgetError)) throw error;
      core.money.refused(taskMax);
      core.log.info({ task: task.taskId, reason: error.message }, 'not sent: the budget is spoken for');
      // Another worker's answers may still give room back: the task stays this worker's to look at again.
      if (core.money.inFlightMaxMicro === 0 && !this.#othersMayGiveRoom()) this.#giveUp(task);
      core.releaseSlot(task.taskId);
      return undefined;
    }
  }

  /** A task's worst case less what it holds already (a re-roll reserves when it is asked for). */
  #need(task: TaskRecord, worst: number): number {
    const held = task.review && task.attempt > 1 ? this.#core.money.heldFor(task.taskId) : 0;
    return Math.max(0, toMicro(worst) - held);
  }

  /**
   * A chained task's references filled in from its upstreams' results, priced exactly, stored: the task
   * to send. Undefined when it is not sent now (rejected without a POST, or left pending for later).
   */
  async #fillIn(task: TaskRecord, entry: CatalogEntry): Promise<TaskRecord | undefined> {
    const core = this.#core;
    const { store } = core.deps;
    const { runId } = core.opts;
    let prepared: Prepared;
    try {
      prepared = await prepareChained(core, task, entry);
    } catch (error) {
      core.releaseSlot(task.taskId);
      throw error;
    }
    if (prepared.type === 'ready') return prepared.task;
    if (prepared.type === 'rejected') {
      await core.writes.write(() => store.chains.rejectUnsent(runId, task.taskId, prepared.reason));
      core.emit({ event: 'rejected', task: task.taskId, message: prepared.reason });
      core.log.warn({ task: task.taskId, reason: prepared.reason }, 'chained task not sent');
    } else {
      const reason = `not submitted yet: ${prepared.reason}`;
      this.#putOff.add(task.taskId, reason);
      await core.writes.write(() => store.tasks.setTaskError(runId, task.taskId, reason));
    }
    core.releaseSlot(task.taskId);
    core.progress();
    return undefined;
  }

  async #keepEarlier(task: TaskRecord): Promise<void> {
    const { store } = this.#core.deps;
    const run = store.runs.getRun(this.#core.opts.runId);
    if (run !== undefined) await finishEarlierResult(store, run, task.taskId, this.#core.opts.bucket);
  }

  #gaveUp(task: TaskRecord, outcome: SubmitOutcome, attempts: number): void {
    const core = this.#core;
    const reason = outcome.type === 'retryable' ? outcome.reason : outcome.type;
    const error = `not submitted after ${attempts} attempts: ${reason}`;
    // The API failing is a passing reason: the task is tried again later in the run.
    this.#putOff.add(task.taskId, error);
    core.deps.store.tasks.setTaskError(core.opts.runId, task.taskId, error);
    this.#giveUpStreak++;
    if (this.#giveUpStreak >= core.opts.giveUpAfterTasks) {
      core.requestStop(
        'unreachable',
        `the API keeps failing (${reason}); nothing was charged for those tasks: run again later`,
      );
    }
  }
}
