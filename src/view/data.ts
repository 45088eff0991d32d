// What the view's JSON API answers, built from the read-only store. Cheap figures (counts, runs) are
// read on every request; the costly ones at a million tasks (per-model table, finished series) are
// cached and recomputed when the database moved, at most every few times their own cost, so that a
// large run is never read over and over while it changes.

import { describeRun, invocationCommand, type RunAccount } from '../account/index.js';
import { invocationOf, type RunInvocation } from '../results/invocation.js';
import { runLocation } from '../results/output.js';
import { inDoubtAdvice, tasksToContinue, unfinishedAdvice } from '../run/advice.js';
import { shownRunState } from '../run/lease.js';
import { upstreamLine } from '../run/run-status.js';
import {
  activeMsOf,
  emptyTaskCounts,
  FAILURE_STATES,
  type FailureGroup,
  keptSettings,
  type ModelStateRow,
  NOT_ON_DISK,
  type RunRecord,
  type Store,
  TASK_STATES,
  type TaskState,
  UNFINISHED,
} from '../store/index.js';
import { fromMicro, roundTokens } from '../util/money.js';
import { RunFigures } from './figures.js';
import { scrubbed } from './scrubbed.js';
import { finishedSeries, type ModelSpend } from './series.js';

/** The version of every JSON answer (`v`); it moves when a field changes meaning or goes away. */
export const VIEW_API_VERSION = 1;

interface RunCache {
  figures: RunFigures;
  /** The failures grouped by reason (a pass over every failed task), and the counts they were read at. */
  failures?: { key: string; groups: FailureGroup[] };
}

export class ViewData {
  readonly #store: Store;
  readonly #cwd: string;
  /** The state file and account settings as the view was given them: the commands it shows carry them. */
  readonly #reach: { state: string; config?: string };
  readonly #now: () => Date;
  readonly #onError: (message: string) => void;
  readonly #runs = new Map<string, RunCache>();
  /** Told when a run's costly figures were brought up to date in the background. */
  onFresh: (runId: string) => void = () => undefined;

  constructor(
    store: Store,
    opts: {
      cwd: string;
      /** `--state` as given (default: the store's file). */
      stateFile?: string;
      /** `--config` as given. */
      configFile?: string;
      now?: () => Date;
      onError?: (message: string) => void;
    },
  ) {
    this.#store = store;
    this.#onError = opts.onError ?? (() => undefined);
    this.#cwd = opts.cwd;
    this.#reach = {
      state: opts.stateFile ?? store.file,
      ...(opts.configFile !== undefined ? { config: opts.configFile } : {}),
    };
    this.#now = opts.now ?? (() => new Date());
  }

  get store(): Store {
    return this.#store;
  }

  /**
   * Called by the change poller: the figures of every run a page asked for are brought up to date
   * (in the background for a large run), so that the last change of a run always reaches the pages.
   */
  keepUp(): void {
    for (const runId of this.#runs.keys()) this.#figures(runId, this.#store.tasks.countTasksByState(runId));
  }

  /** Stops the background reads (before the store closes); resolves when none is in flight. */
  async stop(): Promise<void> {
    for (const c of this.#runs.values()) c.figures.stop();
    await this.settled();
  }

  /** Resolves when no background pass is in flight (tests and the bench). */
  async settled(): Promise<void> {
    for (const c of this.#runs.values()) await c.figures.settled();
  }

  /** `<output>/<run>` on disk, or `s3://…/<run>`. */
  runFolder(run: RunRecord): string {
    const output = keptSettings(run).output ?? `${this.#cwd}/out`;
    return runLocation(output, run.id);
  }

  /**
   * The budget the run works under now: the store's, which holds every spend of it to that figure (a resumed
   * run's manifest may have raised it), else the one it was started with (a run that never got to spend).
   */
  #budgetOf(run: RunRecord): number | null {
    const held = this.#store.reservations.figures(run.id).budget;
    return held === undefined ? (keptSettings(run).budget ?? null) : fromMicro(held);
  }

  runs(): unknown[] {
    return this.#store.runs.listRuns().map((run) => this.runHead(run));
  }

  /**
   * One line of the runs list, the head of a run's page and of its live events: its counts and money
   * are the run's one account (a few rows at any size), the same numbers as on its page.
   */
  runHead(recorded: RunRecord, given?: RunAccount): Record<string, unknown> {
    const now = this.#now();
    const account = given ?? this.#accountOf(recorded);
    const state = account.run.state;
    // The run's costly figures (series, cost table) are asked to catch up; the head states none of them.
    this.#figures(recorded.id, account.by_state);
    return {
      id: recorded.id,
      name: recorded.manifestName,
      manifest: recorded.manifestPath,
      state,
      exit_code: recorded.exitCode,
      created_at: recorded.createdAt.toISOString(),
      started_at: (recorded.firstStartedAt ?? recorded.startedAt)?.toISOString() ?? null,
      last_started_at: recorded.startedAt?.toISOString() ?? null,
      finished_at: recorded.finishedAt?.toISOString() ?? null,
      active_ms: activeMsOf(this.#store, recorded, state, now),
      budget: this.#budgetOf(recorded),
      folder: this.runFolder(recorded),
      ...headOfAccount(account),
    };
  }

  /** The run's one account, its commands built from how this view reaches the run. */
  #accountOf(run: RunRecord): RunAccount {
    const inv = invocationOf(run, { cwd: this.#cwd, ...this.#reach });
    return describeRun(this.#store, run.id, {
      shownState: (r) => shownRunState(this.#store, r, this.#now()),
      command: invocationCommand(inv),
    });
  }

  /** Everything the run page shows. */
  runDetail(run: RunRecord): Record<string, unknown> {
    // The counts and money of the page are the run's one account, of one moment; the series and the
    // cost table (read in the background at a million tasks) are drawn beside it.
    const inv = invocationOf(run, { cwd: this.#cwd, ...this.#reach });
    const account = this.#accountOf(run);
    const head = this.runHead(run, account);
    const counts = account.by_state;
    const figures = this.#cache(run.id).figures;
    const unfinished = account.unfinished;
    const finished = finishedSeries(figures.finishedBuckets(), unfinished, this.#now());
    const doubt = this.#store.viewReads.inDoubtFigures(run.id);
    const paid = account.paid_without_result;
    return {
      account,
      v: VIEW_API_VERSION,
      // False while a large run's cost table and series are first read (in the background): they are
      // empty or behind, and a `run` event follows when they are in.
      figures_ready: figures.ready,
      run: head,
      models: modelsJson(figures.models ?? [], figures.spend.byModel),
      failures: this.#failures(run.id, counts),
      in_doubt: {
        tasks: account.in_doubt.tasks,
        advice: account.in_doubt.tasks > 0 ? inDoubtAdvice(account.in_doubt.tasks, inv) : null,
        retry_estimate: roundTokens(doubt.tokens),
        retry_max: roundTokens(doubt.max),
      },
      unfinished: {
        tasks: unfinished,
        advice: this.#continueAdvice(counts, head['state'], inv),
      },
      paid_not_on_disk: Object.fromEntries(
        NOT_ON_DISK.map((s) => [s, { tasks: paid[s].tasks, tokens: roundTokens(paid[s].tokens) }]),
      ),
      chains: this.#chains(run.id),
      spend_series: {
        columns: ['time_ms', 'charged', 'refunded', 'net'],
        points: figures.spend.points(),
        budget: head['budget'],
        worst_case: head['worst_case'],
      },
      finished_series: {
        columns: ['time_ms', 'finished'],
        points: finished.points,
        rate_per_minute: finished.ratePerMinute,
        // Only a run that goes on has an end to come: a stopped one's rate says when it would have ended.
        estimated_end: head['state'] === 'running' ? finished.estimatedEnd : null,
        unfinished,
      },
    };
  }

  /** `status`'s line for the tasks `run` continues, when the run is not going. */
  #continueAdvice(counts: Record<TaskState, number>, state: unknown, inv: RunInvocation): string | null {
    const goesOn = tasksToContinue(counts);
    return goesOn > 0 && state !== 'running' ? unfinishedAdvice(goesOn, inv) : null;
  }

  /**
   * The first 50 chained tasks that wait, each upstream said as `status` says it (with where a reviewed
   * one's result stands: the clip waits for a person's approval, not for a job).
   */
  #chains(runId: string): unknown[] {
    return this.#store.viewReads.blockedChains(runId, 50).map((c) => ({
      task: c.task,
      state: this.#store.reviews.shownStateOf(runId, c.task) ?? c.state,
      after: c.after.map((u) => upstreamLine(this.#store, runId, u.name, u.task)),
    }));
  }

  #cache(runId: string): RunCache {
    let cache = this.#runs.get(runId);
    if (cache === undefined) {
      const figures = new RunFigures(
        this.#store.viewReads,
        runId,
        () => this.onFresh(runId),
        (error) => this.#onError(error instanceof Error ? (error.stack ?? error.message) : String(error)),
      );
      cache = { figures };
      this.#runs.set(runId, cache);
    }
    return cache;
  }

  /** The failures by reason, read again only when the count of a failure state moved. */
  #failures(runId: string, counts: Record<TaskState, number>): FailureGroup[] {
    const cache = this.#cache(runId);
    const key = JSON.stringify(FAILURE_STATES.map((s) => counts[s]));
    if (cache.failures?.key !== key) {
      // A reason is an error message: scrubbed like the task's own error.
      cache.failures = { key, groups: scrubbed(this.#store.viewReads.failuresByReason(runId)) };
    }
    return cache.failures.groups;
  }

  /** The run's costly figures, asked to catch up with its counts and ledger (cheap signals). */
  #figures(runId: string, counts: Record<TaskState, number>): RunFigures {
    const figures = this.#cache(runId).figures;
    const countsKey = JSON.stringify(counts);
    const key = `${countsKey}|${this.#store.viewReads.maxLedgerId()}`;
    if (figures.behind(key) || !figures.ready) {
      const tasks = TASK_STATES.reduce((n, s) => n + counts[s], 0);
      figures.want(key, countsKey, tasks, tasks - UNFINISHED.reduce((n, s) => n + counts[s], 0));
    }
    return figures;
  }
}

/** The run head's counts and money as the account states them. */
function headOfAccount(account: RunAccount): Record<string, unknown> {
  return {
    state: account.run.state,
    stopped: account.run.stopped ?? null,
    tasks: account.tasks,
    finished: account.finished,
    by_state: account.by_state,
    estimated: account.estimate.tokens,
    worst_case: account.estimate.max,
    charged: account.money.charged,
    refunded: account.money.refunded,
    net: account.money.net,
  };
}

/** The cost table: per model, its tasks by state and estimates, and what the ledger says it cost. */
function modelsJson(rows: readonly ModelStateRow[], spend: ReadonlyMap<string, ModelSpend>): unknown[] {
  const byModel = new Map<string, { byState: Record<TaskState, number>; estimated: number; max: number }>();
  for (const r of rows) {
    const m = byModel.get(r.model) ?? { byState: emptyTaskCounts(), estimated: 0, max: 0 };
    m.byState[r.state] += r.tasks;
    m.estimated += r.estimated;
    m.max += r.estimatedMax;
    byModel.set(r.model, m);
  }
  return [...byModel.entries()]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([model, m]) => {
      const s = spend.get(model) ?? { charged: 0, refunded: 0, jobs: 0 };
      return {
        model,
        tasks: TASK_STATES.reduce((n, st) => n + m.byState[st], 0),
        done: m.byState.done,
        by_state: m.byState,
        estimated: roundTokens(m.estimated),
        estimated_max: roundTokens(m.max),
        charged: roundTokens(s.charged),
        refunded: roundTokens(s.refunded),
        net: roundTokens(s.charged - s.refunded),
        jobs: s.jobs,
      };
    });
}
