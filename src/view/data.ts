// What the view's JSON API answers, built from the read-only store. Cheap figures (counts, runs) are
// read on every request; the costly ones at a million tasks (per-model table, finished series) are
// cached and recomputed when the database moved, at most every few times their own cost, so that a
// large run is never read over and over while it changes.

import { inDoubtAdvice, unfinishedAdvice } from '../run/advice.js';
import { shownRunState } from '../run/lease.js';
import { runLocation } from '../run/output.js';
import {
  emptyTaskCounts,
  type ModelStateRow,
  NOT_ON_DISK,
  type RunRecord,
  type Store,
  TASK_STATES,
  type TaskState,
  UNFINISHED,
} from '../store/index.js';
import { roundTokens } from '../util/money.js';
import { type FinishedSeries, finishedSeries, type ModelSpend, SpendSeries } from './series.js';

/** The version of every JSON answer (`v`); it moves when a field changes meaning or goes away. */
export const VIEW_API_VERSION = 1;

/**
 * A value recomputed when the database moved: at once when it is cheap (< CHEAP_MS), otherwise no
 * sooner than 8× its last cost. A throttled value is stale until asked again: the change feed nudges
 * the pages (staleRuns) so that the last change of a run always reaches them.
 */
class Cached<T> {
  #value: T | undefined;
  #version = -1;
  #at = 0;
  #took = 0;
  constructor(readonly compute: () => T) {}
  #ready(): boolean {
    return this.#took < CHEAP_MS || performance.now() - this.#at >= Math.max(150, 8 * this.#took);
  }
  get(version: number): T {
    if (this.#value === undefined || (version !== this.#version && this.#ready())) {
      const start = performance.now();
      this.#value = this.compute();
      this.#took = performance.now() - start;
      this.#at = performance.now();
      this.#version = version;
    }
    return this.#value;
  }
  /** Computed before, behind `version`, and allowed to be computed again now. */
  staleAndReady(version: number): boolean {
    return this.#value !== undefined && version !== this.#version && this.#ready();
  }
}

const CHEAP_MS = 20;

interface RunCache {
  spend: SpendSeries;
  models: Cached<ModelStateRow[]>;
  finished: Cached<FinishedSeries>;
}

export class ViewData {
  readonly #store: Store;
  readonly #cwd: string;
  readonly #now: () => Date;
  readonly #runs = new Map<string, RunCache>();
  /** Moves with every commit of another connection (PRAGMA data_version). */
  #version = 0;

  constructor(store: Store, opts: { cwd: string; now?: () => Date }) {
    this.#store = store;
    this.#cwd = opts.cwd;
    this.#now = opts.now ?? (() => new Date());
  }

  get store(): Store {
    return this.#store;
  }

  /** Called by the change poller with the latest data version. */
  setVersion(version: number): void {
    this.#version = version;
  }

  /** Runs whose cached figures are behind the database and may be recomputed now. */
  staleRuns(): string[] {
    const stale: string[] = [];
    for (const [id, c] of this.#runs) {
      if ([c.models, c.finished].some((x) => x.staleAndReady(this.#version))) stale.push(id);
    }
    return stale;
  }

  /** `<output>/<run>` on disk, or `s3://…/<run>`. */
  runFolder(run: RunRecord): string {
    const settings = run.settings as { output?: unknown } | null;
    const output = typeof settings?.output === 'string' ? settings.output : `${this.#cwd}/out`;
    return runLocation(output, run.id);
  }

  runs(): unknown[] {
    return this.#store.listRuns().map((run) => this.runHead(run));
  }

  /** One line of the runs list (and the head of a run's page). */
  runHead(recorded: RunRecord): Record<string, unknown> {
    const now = this.#now();
    const state = shownRunState(this.#store, recorded, now);
    const counts = this.#store.countTasksByState(recorded.id);
    const spent = this.#spend(recorded.id);
    const last = spent.points().at(-1);
    const plan = planOf(this.#cache(recorded.id).models.get(this.#version));
    const running = state === 'running' && recorded.startedAt !== null;
    const settings = recorded.settings as { budget?: unknown } | null;
    const total = TASK_STATES.reduce((n, s) => n + counts[s], 0);
    const unfinished = UNFINISHED.reduce((n, s) => n + counts[s], 0);
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
      active_ms: recorded.activeMs + (running ? now.getTime() - (recorded.startedAt?.getTime() ?? 0) : 0),
      tasks: total,
      finished: total - unfinished,
      by_state: counts,
      estimated: roundTokens(plan.estimated),
      worst_case: roundTokens(plan.max),
      budget: typeof settings?.budget === 'number' ? settings.budget : null,
      charged: last?.[1] ?? 0,
      refunded: last?.[2] ?? 0,
      net: last?.[3] ?? 0,
      folder: this.runFolder(recorded),
    };
  }

  /** Everything the run page shows. */
  runDetail(run: RunRecord): Record<string, unknown> {
    const head = this.runHead(run);
    const counts = head['by_state'] as Record<TaskState, number>;
    const cache = this.#cache(run.id);
    const unfinished = UNFINISHED.reduce((n, s) => n + counts[s], 0);
    const finished = cache.finished.get(this.#version);
    const doubt = this.#store.viewReads.inDoubtFigures(run.id);
    const paid = this.#store.notOnDiskByState(run.id);
    const manifest = run.manifestPath;
    return {
      v: VIEW_API_VERSION,
      run: head,
      models: modelsJson(cache.models.get(this.#version), this.#spend(run.id).byModel),
      failures: this.#store.viewReads.failuresByReason(run.id),
      in_doubt: {
        tasks: doubt.tasks,
        advice: doubt.tasks > 0 ? inDoubtAdvice(doubt.tasks, manifest) : null,
        retry_estimate: roundTokens(doubt.tokens),
        retry_max: roundTokens(doubt.max),
      },
      unfinished: {
        tasks: unfinished,
        advice: unfinished > 0 && head['state'] !== 'running' ? unfinishedAdvice(unfinished, manifest) : null,
      },
      paid_not_on_disk: Object.fromEntries(
        NOT_ON_DISK.map((s) => [s, { tasks: paid[s].tasks, tokens: roundTokens(paid[s].tokens) }]),
      ),
      chains: this.#store.viewReads.blockedChains(run.id, 50),
      spend_series: {
        columns: ['time_ms', 'charged', 'refunded', 'net'],
        points: this.#spend(run.id).points(),
        budget: head['budget'],
        worst_case: head['worst_case'],
      },
      finished_series: {
        columns: ['time_ms', 'finished'],
        points: finished.points,
        rate_per_minute: finished.ratePerMinute,
        estimated_end: finished.estimatedEnd,
        unfinished,
      },
    };
  }

  #cache(runId: string): RunCache {
    let cache = this.#runs.get(runId);
    if (cache === undefined) {
      const reads = this.#store.viewReads;
      cache = {
        spend: new SpendSeries(),
        models: new Cached(() => reads.modelStates(runId)),
        finished: new Cached(() => {
          const counts = this.#store.countTasksByState(runId);
          const left = UNFINISHED.reduce((n, s) => n + counts[s], 0);
          return finishedSeries(reads.finishedBuckets(runId), left, this.#now());
        }),
      };
      this.#runs.set(runId, cache);
    }
    return cache;
  }

  /** The spend series, brought up to date with the ledger rows written since the last look. */
  #spend(runId: string): SpendSeries {
    const series = this.#cache(runId).spend;
    series.add(this.#store.viewReads.spendAfter(runId, series.lastId));
    return series;
  }
}

/** The plan's estimate and worst case (every estimate's max), from the per-model rows. */
function planOf(rows: readonly ModelStateRow[]): { estimated: number; max: number } {
  return rows.reduce(
    (sum, r) => ({ estimated: sum.estimated + r.estimated, max: sum.max + r.estimatedMax }),
    { estimated: 0, max: 0 },
  );
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
