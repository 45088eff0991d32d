// Group commit: the store writes asked for in one turn of the event loop are committed together, in one
// transaction (one fsync), and each caller resumes only after that commit. With many tasks in flight this
// turns dozens of fsyncs into one, without weakening any ordering: a submission still waits for its
// committed intent, and an answer is durable before anything acts on it.
//
// One batch is committing at a time: writes asked for while a batch's COMMIT is unanswered (on PostgreSQL
// this process goes on meanwhile) wait for that answer here, asynchronously, and go together in the next
// batch. Batches in a row would each pay their BEGIN, COMMIT, money read and the server's WAL flush; one
// at a time, a worker of 5,000 tasks commits about a quarter as often, at the same rate, with less CPU a
// task in the worker and the server (docs/benchmarks.md, "The worker's CPU per task").

import type { Store } from '../store/index.js';

interface Queued {
  write: () => unknown;
  /** It takes the run's money lock (a reservation, a charge): sent after the batch's other writes. */
  money: boolean;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

export class WriteQueue {
  readonly #store: Store;
  readonly #alongside: (() => () => void) | undefined;
  #queued: Queued[] = [];
  #scheduled = false;
  /** A batch is committing: the next one starts once it is answered. */
  #committing = false;

  /**
   * `alongside`: a read made in each batch's transaction after its writes (the run's money, RunMoney's
   * readWithBatch), whose returned function is called once the batch committed, before its callers resume.
   */
  constructor(store: Store, alongside?: () => () => void) {
    this.#store = store;
    this.#alongside = alongside;
  }

  /**
   * `money`: the write takes the run's money lock (an intent's reservation, a charge). On PostgreSQL the
   * lock is held from that write to the batch's commit, and other workers' money writes wait for it: a
   * batch sends its money writes after its other writes, so that it holds the lock for those alone.
   */
  write<T>(write: () => T, o: { money?: boolean } = {}): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#queued.push({
        write,
        money: o.money === true,
        resolve: resolve as (value: unknown) => void,
        reject,
      });
      this.#schedule();
    });
  }

  /** The next batch, after this turn of the event loop (the writes it asks for go together). */
  #schedule(): void {
    if (this.#scheduled || this.#committing || this.#queued.length === 0) return;
    this.#scheduled = true;
    setImmediate(() => void this.#flush());
  }

  async #flush(): Promise<void> {
    this.#scheduled = false;
    // Writes of one batch are of different tasks, each awaited by its own caller: their order within the
    // batch changes no outcome, only how long the batch holds the money lock.
    const queued = [...this.#queued.filter((q) => !q.money), ...this.#queued.filter((q) => q.money)];
    this.#queued = [];
    let results: Awaited<ReturnType<Store['batchLater']>>;
    this.#committing = true;
    try {
      // Each caller resumes after the commit; on PostgreSQL this process goes on meanwhile.
      const writes = queued.map((q) => q.write);
      if (this.#alongside) writes.push(this.#alongside);
      results = await this.#store.batchLater(writes);
    } catch (error) {
      // The commit itself failed (disk full, database closed): nothing of this batch is recorded.
      for (const q of queued) q.reject(error);
      return;
    } finally {
      this.#committing = false;
      this.#schedule();
    }
    const read = this.#alongside ? results.pop() : undefined;
    if (read?.ok) (read.value as () => void)();
    results.forEach((result, i) => {
      const q = queued[i];
      if (!q) return;
      if (result.ok) q.resolve(result.value);
      else q.reject(result.error);
    });
  }
}
