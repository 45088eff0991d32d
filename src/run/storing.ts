// A new run of many tasks starts submitting before all of them are stored (the first submission
// of a fresh 1,000,000-task run within seconds, not after every row is in SQLite). The session stores the
// first rows; the rest go in here, a chunk per transaction between turns of the event loop, while the
// runner submits what is stored. Each chunk is committed like any other write: a kill -9 leaves a run
// whose stored tasks are resumed and whose missing ones the next run stores (its upsert adds them).

import { setImmediate as nextTurn } from 'node:timers/promises';
import { holderIsDead, type NewTask, type Store } from '../store/index.js';
import { sleep } from '../util/sleep.js';

/** What the runner needs of tasks still being stored. */
export interface IncomingTasks {
  /** No more rows will come: all are stored, or storing stopped (the next run stores the rest). */
  readonly ended: boolean;
  /** Tasks of the plan not stored (yet). */
  readonly unstored: number;
  /** The longest expected job (ms) among the rows not stored yet; 0 once none is left. */
  longestUnstoredMs(): number;
  /** Resolves when the next chunk is stored, or storing ends. */
  next(): Promise<void>;
  /** Stores no more (a stop): what is stored stays, the rest is stored by the next run. */
  stop(): void;
  /** Settles when storing ends; rejects with the store's error (a full state disk). */
  readonly finished: Promise<void>;
}

export interface BackgroundStoringOptions {
  store: Store;
  runId: string;
  /** The rows after those already stored, in the plan's order. */
  rows: Iterator<NewTask>;
  stored: number;
  total: number;
  /** The longest expected job among the rows from a position on (RunPlan.longestFrom). */
  longestFrom: (position: number) => number;
  /** Called once when storing ends, whatever the reason: the plan's tasks may go. */
  release: () => void;
  /** Rows per transaction: small enough that submitting goes on between them. */
  chunk?: number;
  /** Called once every row is stored (not after a stop or a failure). */
  allStored?: () => void;
  /** Asked before each chunk: false stops storing (the storing lease went to another worker). */
  mayGoOn?: () => boolean;
}

/** Rows per chunk: about 20 ms of SQLite on the machines we measured, so polls and submits keep flowing. */
export const STORE_CHUNK = 2_000;

/** Rows of a plan skipped between two turns of the event loop by a worker taking storing over. */
const SKIP_SLICE = 5_000;

/** The longest pause between two chunks when nobody waits for them. */
const MAX_STORING_PAUSE_MS = 1_000;

export class BackgroundStoring implements IncomingTasks {
  readonly #o: BackgroundStoringOptions;
  #stored: number;
  #ended = false;
  #stopped = false;
  #waiters: Array<() => void> = [];
  readonly finished: Promise<void>;

  constructor(o: BackgroundStoringOptions) {
    this.#o = o;
    this.#stored = o.stored;
    this.finished = this.#loop();
    // The runner guards `finished`; until it does, a rejection must not count as unhandled.
    this.finished.catch(() => {});
  }

  get ended(): boolean {
    return this.#ended;
  }

  get unstored(): number {
    return this.#o.total - this.#stored;
  }

  longestUnstoredMs(): number {
    return this.#ended ? 0 : this.#o.longestFrom(this.#stored);
  }

  next(): Promise<void> {
    if (this.#ended) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  stop(): void {
    this.#stopped = true;
  }

  async #loop(): Promise<void> {
    const size = this.#o.chunk ?? STORE_CHUNK;
    let all = false;
    try {
      while (!this.#stopped) {
        await nextTurn();
        if (this.#stopped || this.#o.mayGoOn?.() === false) break;
        const chunk: NewTask[] = [];
        for (let r = this.#o.rows.next(); !r.done; r = this.#o.rows.next()) {
          chunk.push(r.value);
          if (chunk.length === size) break;
        }
        if (chunk.length === 0) {
          all = true;
          break;
        }
        const started = performance.now();
        this.#o.store.tasks.upsertTasks(this.#o.runId, chunk, { allNew: true });
        this.#stored += chunk.length;
        const waited = this.#waiters.length > 0;
        this.#wake();
        // Nobody waits for these rows: the runner has stored ones to submit, so it keeps most of the thread
        // (storing takes a fifth of it); a runner that waits for rows gets them at full speed. At most a
        // second: a chunk that took long because the process stood still (a pause, a stopped machine)
        // must not stop storing for four times as long.
        if (!waited) await sleep(Math.min(MAX_STORING_PAUSE_MS, 4 * (performance.now() - started)));
      }
      if (all) this.#o.allStored?.();
    } finally {
      this.#ended = true;
      this.#o.release();
      this.#wake();
    }
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }
}

/** The lease of whoever stores the rest of a run's plan (one worker of a fleet at a time). */
export function storingLeaseName(runId: string): string {
  return `run:${runId}:storing`;
}

/** The tasks of a run's plan not stored yet: none unless a plan is still being stored in the background. */
export function unstoredOf(store: Store, runId: string): number {
  const run = store.runs.getRun(runId);
  if (!run?.planStoring || run.planTasks === null) return 0;
  return Math.max(0, run.planTasks - storedOf(store, runId));
}

/** The run's tasks stored: those of a plan stored in order, a chunk per transaction, are its first ones. */
export function storedOf(store: Store, runId: string): number {
  return Object.values(store.tasks.countTasksByState(runId)).reduce((n, c) => n + c, 0);
}

export interface SharedStoringOptions {
  store: Store;
  runId: string;
  /** This worker (its lease holder's name). */
  holder: string;
  ttlMs: number;
  /** The plan's tasks; its digest is the run's (compared when this worker opened or joined the run). */
  total: number;
  /** The plan's rows from the first, in its order: a worker taking over storing skips those stored. */
  rows: () => Iterator<NewTask>;
  longestFrom?: (position: number) => number;
  /** How often a worker that does not store looks at what is stored, and whether the storer is gone. */
  pollMs: number;
  /** Called once storing ends here: the plan's tasks may go. */
  release: () => void;
  chunk?: number;
  /** The worker that opened the run holds the storing lease and stored the first `stored` rows of `rows`. */
  storing?: { rows: Iterator<NewTask>; stored: number };
}

/**
 * A fleet's run whose plan is still being stored (PostgreSQL): the plan's digest and count were recorded
 * before its first task, so workers join at once, and every worker of the run holds one of these. The one
 * holding the storing lease stores the rest, a chunk at a time (renewing the lease before each); the others
 * follow what is stored, and take the lease over when its holder is gone (kill -9: its process is dead,
 * or its lease ran out; a stop gives it back), skip the rows stored and store on. The last one out of a run
 * whose plan is not whole leaves it interrupted, its missing tasks counted pending (`unstoredOf`).
 */
export class SharedStoring implements IncomingTasks {
  readonly #o: SharedStoringOptions;
  readonly #lease: string;
  #stored = 0;
  #inner: BackgroundStoring | undefined;
  #ended = false;
  #stopped = false;
  #holding = false;
  #waiters: Array<() => void> = [];
  #nap: (() => void) | undefined;
  readonly finished: Promise<void>;

  constructor(o: SharedStoringOptions) {
    this.#o = o;
    this.#lease = storingLeaseName(o.runId);
    this.#holding = o.storing !== undefined;
    this.#stored = o.storing?.stored ?? storedOf(o.store, o.runId);
    this.finished = this.#loop();
    this.finished.catch(() => {});
  }

  get ended(): boolean {
    return this.#ended;
  }

  get unstored(): number {
    return this.#inner && !this.#inner.ended ? this.#inner.unstored : this.#o.total - this.#stored;
  }

  longestUnstoredMs(): number {
    return this.#ended ? 0 : (this.#o.longestFrom?.(this.#o.total - this.unstored) ?? 0);
  }

  next(): Promise<void> {
    if (this.#ended) return Promise.resolve();
    if (this.#inner && !this.#inner.ended) return this.#inner.next();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  stop(): void {
    this.#stopped = true;
    this.#inner?.stop();
    this.#nap?.();
    // Given back now (no chunk is being stored between two turns): the process may end right after.
    this.#giveBack();
  }

  async #loop(): Promise<void> {
    try {
      let rows = this.#o.storing?.rows;
      while (!this.#stopped) {
        if (rows && (await this.#storeFrom(rows))) return;
        rows = undefined;
        if (this.#stopped || this.#look()) return;
        rows = this.#takeOver() ? await this.#afterStored() : undefined;
        if (rows === undefined) await this.#sleep(this.#o.pollMs);
      }
    } finally {
      this.#giveBack();
      this.#ended = true;
      this.#o.release();
      this.#wake();
    }
  }

  /** Stores the rows after those stored, holding the lease; true once every one is stored. */
  async #storeFrom(rows: Iterator<NewTask>): Promise<boolean> {
    const { store, runId, holder, ttlMs } = this.#o;
    let all = false;
    this.#inner = new BackgroundStoring({
      store,
      runId,
      rows,
      stored: this.#stored,
      total: this.#o.total,
      longestFrom: this.#o.longestFrom ?? (() => 0),
      release: () => {},
      ...(this.#o.chunk !== undefined ? { chunk: this.#o.chunk } : {}),
      allStored: () => {
        all = true;
      },
      mayGoOn: () => (this.#holding = store.leases.renewLease(this.#lease, holder, ttlMs)),
    });
    this.#wake();
    try {
      await this.#inner.finished;
    } finally {
      this.#stored = this.#o.total - this.#inner.unstored;
      this.#inner = undefined;
    }
    if (all) store.runs.planStored(runId);
    return all;
  }

  /** What the others stored: true once the plan is whole (or the run gone). */
  #look(): boolean {
    const { store, runId } = this.#o;
    if (store.runs.getRun(runId)?.planStoring !== true) {
      // Whole: stored by another worker (or by the one that opened the run again after every worker left).
      this.#stored = this.#o.total;
      return true;
    }
    const stored = storedOf(store, runId);
    if (stored !== this.#stored) {
      this.#stored = stored;
      this.#wake();
    }
    return false;
  }

  /** Takes the storing lease when nobody alive holds it and some of the plan is still to store. */
  #takeOver(): boolean {
    const { store, holder, ttlMs } = this.#o;
    // Read first: a worker of a large fleet writes the lease's row only when its holder is gone.
    const held = store.leases.getLease(this.#lease);
    if (held && held.expiresAt.getTime() > Date.now() && !holderIsDead(held.holder)) return false;
    let lease = store.leases.acquireLease(this.#lease, holder, ttlMs);
    if (!lease.acquired && holderIsDead(lease.holder)) {
      store.leases.releaseLease(this.#lease, lease.holder);
      lease = store.leases.acquireLease(this.#lease, holder, ttlMs);
    }
    if (!lease.acquired) return false;
    this.#holding = true;
    // The lease is this worker's: nobody else stores, so what is stored is the plan's first rows now.
    return !this.#look();
  }

  /**
   * The plan's rows after those stored, the stored ones made again and skipped a slice per turn of the event
   * loop (hundreds of thousands take seconds): the worker's runner goes on meanwhile. Undefined once stopped.
   */
  async #afterStored(): Promise<Iterator<NewTask> | undefined> {
    const rows = this.#o.rows();
    for (let skipped = 0; skipped < this.#stored; skipped++) {
      if (rows.next().done === true) break;
      if (skipped % SKIP_SLICE === SKIP_SLICE - 1) {
        await nextTurn();
        if (this.#stopped) return undefined;
      }
    }
    return rows;
  }

  #giveBack(): void {
    if (this.#holding) this.#o.store.leases.releaseLease(this.#lease, this.#o.holder);
    this.#holding = false;
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.#nap = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }
}
