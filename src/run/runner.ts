// Drives one run: submits pending tasks with a bounded number in flight, watches their jobs, downloads
// results, and records every step in the store before acting on it. The order per task is the money
// guarantee: intent committed -> POST -> img_uuid and cost committed. Anything that interrupts it leaves
// a row that says what may have happened, and a resumed run reads those rows, never its memory.
//
// This file is the coordinator. The parts live in ./runner/: core.ts (shared state: slots, money, stop and
// halt, writes, events), submit.ts (slots and budget), outcomes.ts (each submission answer, as a table),
// watch.ts (polls, callbacks, deadlines, adoption from doubt), fetch.ts (results, files, job.json).

import type { TaskRecord } from '../store/index.js';
import { UNFINISHED } from '../store/transitions.js';
import { RunCore } from './runner/core.js';
import { Fetcher } from './runner/fetch.js';
import { Submitter } from './runner/submit.js';
import type { CallbackHint, RunnerDeps, RunnerOptions, RunResult } from './runner/types.js';
import { Watcher } from './runner/watch.js';

export {
  type CallbackHint,
  DEFAULT_WATCH_POLICY,
  type FleetWorker,
  type MediaKind,
  RUNNER_POLICY_KEYS,
  type RunnerDeps,
  type RunnerOptions,
  type RunnerPolicy,
  type RunProgress,
  type RunResult,
  type StopReason,
  type WatchPolicy,
} from './runner/types.js';

/** A worker beats at least this often: its row's figures (in flight, sent) are what `status` and the view show. */
const BEAT_MAX_MS = 5_000;

export class Runner {
  readonly #core: RunCore;
  readonly #watcher: Watcher;
  readonly #submitter: Submitter;

  constructor(deps: RunnerDeps, opts: RunnerOptions) {
    const core = new RunCore(deps, opts);
    this.#core = core;
    // The fetcher ends a task's watch when its results are settled; the watcher exists by then.
    const fetcher = new Fetcher(core, (taskId) => this.#watcher.unwatch(taskId));
    this.#watcher = new Watcher(core, fetcher);
    this.#submitter = new Submitter(core, this.#watcher);
    const onStop = () =>
      core.requestStop('interrupted', 'interrupted: stopped submitting; run again to continue');
    if (opts.stop.aborted) onStop();
    else opts.stop.addEventListener('abort', onStop, { once: true });
    const onHalt = () =>
      core.haltNow('interrupted', 'interrupted twice: stopped at once; run again to continue');
    if (opts.halt?.aborted) onHalt();
    else opts.halt?.addEventListener('abort', onHalt, { once: true });
  }

  /** Another process took the run's lease: stop touching it. */
  leaseLost(): void {
    this.#core.haltNow('lease-lost', 'another mediabatch process took over this run; this one stopped');
  }

  /**
   * A callback said this job changed. The body is not trusted: the job is looked at now through
   * jobs/detail, and only what that answer says is recorded. Resolves to whether the claim is settled
   * (true: repeats of it can be dropped; false: it was not borne out yet, so a repeat must be heard).
   */
  hint(hint: CallbackHint): Promise<boolean> {
    return this.#watcher.hint(hint);
  }

  async run(): Promise<RunResult> {
    const core = this.#core;
    const { store } = core.deps;
    const { runId } = core.opts;
    core.sweepOthers = () => this.#sweep();
    this.#resume();
    core.progress();
    // A new run's later tasks are stored while it runs; a stop stores no more (the next run stores them).
    const { incoming } = core.opts;
    if (incoming) {
      if (core.stopSubmitting.signal.aborted) incoming.stop();
      else core.stopSubmitting.signal.addEventListener('abort', () => incoming.stop(), { once: true });
    }
    const storing = incoming ? core.guard(incoming.finished, 'storing the tasks') : undefined;

    const beating = this.#beat();
    const watcher = core.guard(this.#watcher.loop(), 'watching jobs');
    await core.guard(this.#submitter.loop(), 'submitting');
    core.submitDone = true;
    core.wakeWatcher?.();
    // Interrupted: the answers in flight are recorded (the submit loop waited for them); jobs are left
    // for the next run to watch. Otherwise wait until every watched job has finished or stalled.
    await watcher;
    this.#watcher.closeHints();
    await storing;
    await core.settle();
    beating.stop();
    // Downstreams of upstreams that ended badly are said to be blocked, not left pending without a word
    // (in a fleet, by the last worker out: another's upstream may still be fetched again).
    if (core.chained && !core.halt.signal.aborted && !core.opts.fleet)
      core.blocked(store.chains.blockDownstreams(runId));
    core.progress(true);
    if (core.stopReason) {
      core.emit({ event: 'stopped', reason: core.stopReason, message: core.stopMessage ?? core.stopReason });
    }
    return {
      ...(core.stopReason ? { stopReason: core.stopReason } : {}),
      ...(core.stopMessage ? { stopMessage: core.stopMessage } : {}),
      ...(core.quota ? { quota: core.quota } : {}),
      ...whyUnfinished(core),
      counts: withUnstored(store.tasks.countTasksByState(runId), incoming?.unstored ?? 0),
      awaitingReview: store.reviews.countAwaiting(runId),
      polls: core.counters.polls,
      arrivals: { ...core.arrivals },
      unreadableAnswers: core.counters.unreadable,
      recoveredFromDoubt: core.counters.recovered,
      retriedFailures: core.counters.retried,
    };
  }

  /** What an earlier process left: its money, its interrupted submissions, and the jobs still to watch. */
  #resume(): void {
    const core = this.#core;
    const { store } = core.deps;
    const { runId, fleet } = core.opts;
    if (fleet) {
      // Only what nobody alive holds is this worker's to take over (the sweep decides).
      core.money.start();
      this.#sweep();
      return;
    }
    for (const taskId of store.submissions.recoverInterruptedSubmissions(runId)) {
      core.log.warn(
        { task: taskId },
        'submission was interrupted before its answer was recorded: task is in doubt',
      );
    }
    // The money is the store's (what earlier processes charged, what is in doubt or reserved by others).
    core.money.start();
    this.#watchLeft([
      ...store.tasks.tasksByState(runId, ['unfetched', 'downloading']),
      ...store.tasks.tasksByState(runId, ['submitted', 'running', 'stalled']),
    ]);
  }

  /** Jobs another process left: paid results not on disk first, the rest watched again (stalled ones slowly). */
  #watchLeft(tasks: readonly TaskRecord[]): void {
    const fetchFirst = (t: TaskRecord) => t.state === 'unfetched' || t.state === 'downloading';
    for (const task of tasks.filter(fetchFirst)) this.#watcher.watch(task, 0, false);
    for (const task of tasks.filter((t) => !fetchFirst(t))) {
      this.#watcher.watch(task, 0, task.state === 'submitted' || task.state === 'running');
    }
  }

  /** Declares lost the workers found dead, and takes over what they left (their jobs, their queue). */
  #sweep(): boolean {
    const core = this.#core;
    const { fleet, runId } = core.opts;
    if (!fleet) return false;
    const swept = core.deps.store.claims.sweep(runId, fleet.workerId);
    for (const lost of swept.lost) {
      core.log.warn({ worker: lost }, 'a worker of this run is lost: its work is taken back');
    }
    for (const taskId of swept.inDoubt) {
      core.log.warn(
        { task: taskId },
        'a lost worker may have sent this task: it is in doubt, never sent again',
      );
    }
    this.#watchLeft(swept.adopted);
    const took = swept.requeued.length > 0 || swept.adopted.length > 0;
    if (took) {
      core.wakeSubmitter();
      core.wakeWatcher?.();
    }
    return took;
  }

  /**
   * A worker of a fleet beats (its row stays alive; a refused beat means it was declared lost: it stops
   * at once) and, while it still submits, sweeps the others; four times per time-to-live, or every 5 s.
   */
  #beat(): { stop(): void } {
    const core = this.#core;
    const { fleet, runId } = core.opts;
    if (!fleet) return { stop: () => {} };
    const beat = (): boolean => {
      const counts = { inFlight: core.claimed.size, submitted: core.counters.accepted };
      return core.deps.store.workers.heartbeat(runId, fleet.workerId, counts, fleet.ttlMs);
    };
    const timer = setInterval(
      () => {
        try {
          if (!beat()) {
            this.leaseLost();
            return;
          }
          // Once it stops submitting it takes nothing more over: its watch is ending.
          if (!core.submitDone) this.#sweep();
        } catch (error) {
          // The state is unreachable for a moment (a restart, a network cut): the next beat tries again.
          core.log.warn({ err: error }, 'heartbeat failed; trying again');
        }
      },
      Math.min(fleet.ttlMs / 4, BEAT_MAX_MS),
    );
    timer.unref();
    return {
      stop: () => {
        clearInterval(timer);
        // Its last figures stay on its row (`status`, the view) after it leaves.
        if (!core.halt.signal.aborted) beat();
      },
    };
  }
}

/**
 * Why tasks this process left are unfinished: the first of them still unfinished, and whether there are
 * more. A few reads at most (the store's counts say how many are unfinished).
 */
function whyUnfinished(core: RunCore): { unfinishedWhy?: string } {
  const { store } = core.deps;
  let looked = 0;
  for (const [taskId, reason] of core.leftUnfinished) {
    if (++looked > 100) break;
    const state = store.tasks.getTask(core.opts.runId, taskId)?.state;
    if (state === undefined || !UNFINISHED.includes(state)) continue;
    const more = core.leftUnfinished.size > looked ? '; and others' : '';
    return { unfinishedWhy: `${taskId}: ${reason}${more}` };
  }
  return {};
}

/** Tasks a stop left unstored are pending too: the next run stores and submits them. */
function withUnstored(counts: RunResult['counts'], unstored: number): RunResult['counts'] {
  counts.pending += unstored;
  return counts;
}
