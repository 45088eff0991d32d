// A new run of many tasks starts submitting before all of them are stored (the first submission
// of a fresh 1,000,000-task run within seconds, not after every row is in SQLite). The session stores the
// first rows; the rest go in here, a chunk per transaction between turns of the event loop, while the
// runner submits what is stored. Each chunk is committed like any other write: a kill -9 leaves a run
// whose stored tasks are resumed and whose missing ones the next run stores (its upsert adds them).

import { setImmediate as nextTurn } from 'node:timers/promises';
import type { NewTask, Store } from '../store/index.js';
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
}

/** Rows per chunk: about 20 ms of SQLite on the machines we measured, so polls and submits keep flowing. */
export const STORE_CHUNK = 2_000;

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
        if (this.#stopped) break;
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
        // (storing takes a fifth of it); a runner that waits for rows gets them at full speed.
        if (!waited) await sleep(4 * (performance.now() - started));
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
