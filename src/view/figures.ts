// The costly figures of one run (the cost table's rows per model and state, the finished series, the
// spend series), kept up to date in short reads so that a run of a million tasks never holds the
// server's event loop (every request and event waits at most one chunk, a few tens of ms) nor keeps a
// read snapshot open for long (the runner's WAL can always be checkpointed). The ledger only grows and
// is read from the last row seen; finishes are read from the last finish seen (with an overlap for
// commits that land out of order, and a full pass now and then for tasks whose finish was undone); the
// rows per model and state are a pass over the run's rows in rowid ranges, at most every 20× its cost
// (5 % of a core at most: the runner shares the machine).

import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { ModelStateRow, Store } from '../store/index.js';

type ViewReadStore = Store['viewReads'];

import { SpendSeries } from './series.js';

/** Rows read in one statement: 2–8 ms on this machine when it is quiet, the most a request waits. */
export const CHUNK_ROWS = 5_000;
/** At most this many tasks: figures are brought up to date within the request that asks (tests, small runs). */
export const SYNC_TASKS = 20_000;
/** Finishes re-read before the newest seen, for commits that land out of order. */
const OVERLAP_MS = 5_000;
/** A full pass over the finishes at most this often while the run changes (a retry undoes finishes). */
const FULL_FINISHED_MS = 60_000;
/** The pass over the rows per model and state runs no more often than this many times its own cost. */
const MODEL_COST_FACTOR = 20;
const MIN_GAP_MS = 150;

export class RunFigures {
  readonly spend = new SpendSeries();
  /** Rows per model and state; undefined until the first pass ends. */
  models: ModelStateRow[] | undefined;
  /** Finishes per second (`2026-01-05T09:00:00` → n); undefined until the first pass ends. */
  finished: Map<string, number> | undefined;
  /** The change key (the run's counts and the newest ledger id) the figures were last brought up to. */
  #key = '';
  #running: Promise<void> | undefined;
  #stopped = false;
  #modelsAt = -Infinity;
  #modelsCost = 0;
  #modelsKey = '';
  #fullAt = -Infinity;
  /** The run's finished tasks (by its counts) when the finishes were last read: fewer now → read all. */
  #finishedCount = 0;
  /** The newest finish time read so far ('' before any). */
  #latest = '';

  constructor(
    readonly reads: ViewReadStore,
    readonly runId: string,
    /** Told after a background pass changed the figures (the change feed nudges the pages). */
    readonly onFresh: () => void,
    /** Told when a background pass failed (the figures stay as they were; the next look tries again). */
    readonly onError: (error: unknown) => void,
  ) {}

  /** No more reads (the store is about to close): a pass in flight ends at its next step. */
  stop(): void {
    this.#stopped = true;
  }

  get ready(): boolean {
    return this.models !== undefined && this.finished !== undefined;
  }

  /** Behind the run's change key (and not already catching up). */
  behind(key: string): boolean {
    return key !== this.#key;
  }

  /**
   * Brings the figures up to `key`: within this call for a small run, else in the background (the
   * caller shows the figures it has). `countsKey` is the run's counts by state: the rows per model and
   * state move only when it moves.
   */
  want(key: string, countsKey: string, tasks: number, finished: number): void {
    if (key === this.#key && this.ready) return;
    // Fewer finished than at the last read: finishes were undone (a retry), so all are read again.
    if (finished < this.#finishedCount) this.#fullAt = -Infinity;
    this.#finishedCount = finished;
    if (tasks <= SYNC_TASKS && this.#running === undefined) {
      const pass = this.#pass(countsKey, true);
      while (!pass.next().done);
      this.#key = key;
      return;
    }
    if (this.#running !== undefined || this.#stopped) return;
    this.#running = this.#background(key, countsKey)
      .catch((error: unknown) => this.onError(error))
      .finally(() => {
        this.#running = undefined;
      });
  }

  /** Resolves when a background pass in flight ends (tests and the bench). */
  async settled(): Promise<void> {
    while (this.#running !== undefined) await this.#running;
  }

  async #background(key: string, countsKey: string): Promise<void> {
    const pass = this.#pass(countsKey, false);
    let step = pass.next();
    while (!step.done) {
      await yieldToLoop();
      if (this.#stopped) return;
      step = pass.next();
    }
    // Rows per model and state held back by their throttle: still behind, asked again by the next look.
    if (step.value) {
      this.#key = key;
      this.onFresh();
    }
  }

  /**
   * One pass; yields between statements, returns whether every figure is up to date (false when the
   * rows per model and state wait for their throttle). `all`: the throttles are ignored (a small run).
   */
  *#pass(countsKey: string, all: boolean): Generator<void, boolean> {
    // The rows per model first: the run's estimate and worst case come from them.
    let complete = true;
    if (this.models === undefined || countsKey !== this.#modelsKey) {
      const gap = Math.max(MIN_GAP_MS, MODEL_COST_FACTOR * this.#modelsCost);
      if (this.models === undefined || all || performance.now() - this.#modelsAt >= gap) {
        yield* this.#readModels();
        this.#modelsKey = countsKey;
      } else complete = false;
    }
    yield* this.#readFinished(all);
    yield* this.#readSpend();
    return complete;
  }

  *#readSpend(): Generator<void> {
    const upTo = this.reads.maxLedgerId();
    while (this.spend.lastId < upTo) {
      const to = Math.min(upTo, this.spend.lastId + CHUNK_ROWS);
      this.spend.add(this.reads.spendBetween(this.runId, this.spend.lastId, to));
      this.spend.through(to);
      if (this.spend.lastId < upTo) yield;
    }
  }

  *#readFinished(all: boolean): Generator<void> {
    const now = performance.now();
    const full = this.finished === undefined || all || now - this.#fullAt >= FULL_FINISHED_MS;
    const buckets = full ? new Map<string, number>() : new Map(this.finished);
    let cursor: [string, string] = ['', ''];
    if (full) {
      this.#fullAt = now;
      this.#latest = '';
    } else {
      // Back by the overlap: those seconds are counted again from the rows.
      const from = overlapStart(this.#latest);
      for (const second of buckets.keys()) if (second >= from) buckets.delete(second);
      cursor = [from, ''];
    }
    for (;;) {
      const rows = this.reads.finishedAfter(this.runId, cursor[0], cursor[1], CHUNK_ROWS);
      for (const [at] of rows) {
        const second = at.slice(0, 19);
        buckets.set(second, (buckets.get(second) ?? 0) + 1);
      }
      const last = rows.at(-1);
      if (last !== undefined) cursor = last;
      if (rows.length < CHUNK_ROWS) break;
      yield;
    }
    if (cursor[0] > this.#latest) this.#latest = cursor[0];
    this.finished = buckets;
  }

  *#readModels(): Generator<void> {
    let cost = 0;
    const sums = new Map<string, ModelStateRow>();
    const bounds = this.reads.taskRowids(this.runId);
    for (let lo = bounds?.lo ?? 1; bounds !== undefined && lo <= bounds.hi; lo += CHUNK_ROWS) {
      const t = performance.now();
      for (const r of this.reads.modelStatesIn(this.runId, lo, Math.min(bounds.hi, lo + CHUNK_ROWS - 1))) {
        const k = `${r.model}\u0000${r.state}`;
        const s = sums.get(k);
        if (s === undefined) sums.set(k, { ...r });
        else {
          s.tasks += r.tasks;
          s.estimated += r.estimated;
          s.estimatedMax += r.estimatedMax;
        }
      }
      cost += performance.now() - t;
      if (lo + CHUNK_ROWS <= bounds.hi) yield;
    }
    this.models = [...sums.values()];
    this.#modelsCost = cost;
    this.#modelsAt = performance.now();
  }

  /** Finishes per second, oldest first (what finishedSeries takes). */
  finishedBuckets(): Array<{ second: string; n: number }> {
    return [...(this.finished ?? new Map<string, number>()).entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([second, n]) => ({ second, n }));
  }
}

/** The store's second (`2026-01-05T09:00:00`) OVERLAP_MS before the finish time `at`, or '' without one. */
function overlapStart(at: string): string {
  const t = Date.parse(at.endsWith('Z') ? at : `${at}Z`);
  return Number.isNaN(t) ? '' : new Date(t - OVERLAP_MS).toISOString().slice(0, 19);
}
