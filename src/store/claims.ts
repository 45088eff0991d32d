// Who works on which task when several workers share a run (a PostgreSQL state): a pending task is
// claimed by one worker (`tasks.claimed_by`), which alone may move it to `submitting`; the job it sent
// stays its own to watch. A worker found lost gives its claims back in the same transaction that
// declares it lost: unsent tasks to the queue, tasks whose POST may have gone in doubt, jobs to the
// worker that swept. A worker that leaves gives back what it still holds (HELD_STATES); a finished task
// keeps the name of the worker that did it, and should it come back to the queue (a re-roll, a retry) a
// worker that left or was lost holds it no more: any worker claims it.

import type { TaskOrder } from '../manifest/types.js';
import type { Db } from './db.js';
import type { SubmissionStore } from './submissions.js';
import { type TaskRow, toTask } from './task-rows.js';
import type { TaskRecord, TaskState } from './types.js';
import type { WorkerStore } from './workers.js';

/** States of a task whose job exists: watched, or its results fetched, by the worker that holds it. */
export const JOB_STATES: readonly TaskState[] = [
  'submitted',
  'running',
  'stalled',
  'downloading',
  'unfetched',
];
const JOB_STATES_SQL = JOB_STATES.map((s) => `'${s}'`).join(', ');

/**
 * States in which a task's claim means its worker holds it: claimed to send, being sent, or its job watched
 * and fetched. Leaving and sweeping touch only these rows, however many tasks the worker finished (on
 * PostgreSQL the partial index `tasks_held` of migration 27 finds them).
 */
export const HELD_STATES: readonly TaskState[] = ['pending', 'submitting', ...JOB_STATES];
const HELD_STATES_SQL = HELD_STATES.map((s) => `'${s}'`).join(', ');

export interface SweepResult {
  /** Workers declared lost by this sweep. */
  lost: string[];
  /** Their unsent tasks, back in the queue. */
  requeued: string[];
  /** Their submissions that may have been sent: in doubt now, never sent again. */
  inDoubt: string[];
  /** Jobs nobody alive watches (a lost worker's, or left by a stop): the sweeper's to watch now. */
  adopted: TaskRecord[];
}

export interface LeaveResult {
  /** No other live worker is on the run: the leaving one closes it. */
  last: boolean;
  /** Live workers still on the run. */
  others: number;
}

/** Whether the run's `waits = 0` and order read the same on both statements (longest first or manifest). */
const ORDER_SQL: Record<TaskOrder, string> = {
  longest: 'ORDER BY expected_ms DESC, seq',
  manifest: 'ORDER BY seq',
};

type ClaimValues = {
  runId: string;
  worker: string;
  only: string | null;
  skip: string | null;
  limit: number;
};

function prepareClaim(db: Db, order: TaskOrder) {
  return db.prepare<ClaimValues, TaskRow>(
    `UPDATE tasks SET claimed_by = :worker
     WHERE rowid IN (SELECT rowid FROM tasks WHERE run_id = :runId AND state = 'pending' AND waits = 0
       AND (claimed_by IS NULL OR claimed_by = :worker OR claimed_by IN (SELECT worker_id FROM workers
         WHERE run_id = :runId AND (stopped_at IS NOT NULL OR lost_at IS NOT NULL)))
       AND (:only IS NULL OR task_id IN (SELECT value FROM json_each(:only)))
       AND (:skip IS NULL OR task_id NOT IN (SELECT value FROM json_each(:skip)))
       ${ORDER_SQL[order]} LIMIT :limit)
     RETURNING *`,
  );
}

export class ClaimStore {
  readonly #claim: Record<TaskOrder, ReturnType<typeof prepareClaim>>;
  readonly #requeueOf;
  readonly #adoptJobs;
  readonly #releaseOf;
  readonly #giveUp;
  readonly #lockRun;
  readonly #sweep;
  readonly #leave;
  readonly #heldByOthers;
  readonly #jobsElsewhere;

  constructor(db: Db, workers: WorkerStore, submissions: SubmissionStore) {
    // On PostgreSQL this is `… FOR UPDATE SKIP LOCKED` (overrides.ts): two workers claiming at once take
    // different rows, neither waits. The condition on claimed_by is the last word either way.
    this.#claim = { longest: prepareClaim(db, 'longest'), manifest: prepareClaim(db, 'manifest') };
    this.#requeueOf = db
      .prepare<[string, string], string>(
        `UPDATE tasks SET claimed_by = NULL WHERE run_id = ? AND claimed_by = ? AND state = 'pending'
         RETURNING task_id`,
      )
      .pluck();
    this.#adoptJobs = db.prepare<{ runId: string; worker: string }, TaskRow>(
      `UPDATE tasks SET claimed_by = :worker
       WHERE run_id = :runId AND state IN (${JOB_STATES_SQL})
         AND (claimed_by IS NULL OR claimed_by IN (SELECT worker_id FROM workers
           WHERE run_id = :runId AND (lost_at IS NOT NULL OR stopped_at IS NOT NULL)))
       RETURNING *`,
    );
    this.#releaseOf = db.prepare<[string, string]>(
      `UPDATE tasks SET claimed_by = NULL WHERE run_id = ? AND claimed_by = ? AND state IN (${HELD_STATES_SQL})`,
    );
    this.#giveUp = db.prepare<[string, string, string]>(
      `UPDATE tasks SET claimed_by = NULL
       WHERE run_id = ? AND claimed_by = ? AND state = 'pending' AND task_id IN (SELECT value FROM json_each(?))`,
    );
    // Serialises the leaving of a run's workers on PostgreSQL (overrides.ts: SELECT … FOR UPDATE), so
    // exactly one finds itself the last; SQLite's one writer does that alone.
    this.#lockRun = db.prepare<[string], string>('SELECT id FROM runs WHERE id = ?').pluck();
    this.#heldByOthers = db
      .prepare<[string, string], number>(
        `SELECT count(*) FROM tasks WHERE run_id = ? AND claimed_by IS NOT NULL AND claimed_by <> ?
           AND state IN (${HELD_STATES_SQL})`,
      )
      .pluck();
    // Jobs of the run this worker does not hold: another worker's (alive, or not yet found lost), or
    // nobody's (left by a worker that stopped, for the next sweep to adopt).
    this.#jobsElsewhere = db
      .prepare<[string, string], string>(
        `SELECT task_id FROM tasks WHERE run_id = ? AND state IN (${JOB_STATES_SQL})
           AND (claimed_by IS NULL OR claimed_by <> ?)`,
      )
      .pluck();

    this.#sweep = db.transaction((runId: string, me: string): SweepResult => {
      const result: SweepResult = { lost: [], requeued: [], inDoubt: [], adopted: [] };
      for (const w of workers.list(runId)) {
        if (w.workerId === me || w.stoppedAt !== undefined || w.lostAt !== undefined || !w.lost) continue;
        if (!workers.markLost(runId, w.workerId)) continue;
        result.lost.push(w.workerId);
        result.requeued.push(...this.#requeueOf.all(runId, w.workerId));
      }
      // Submissions nobody alive is sending (the lost ones' above, or a crash's before): in doubt.
      result.inDoubt = submissions.recoverInterruptedSubmissions(runId);
      result.adopted = this.#adoptJobs.all({ runId, worker: me }).map(toTask);
      for (const lost of result.lost) this.#releaseOf.run(runId, lost);
      return result;
    });
    this.#leave = db.transaction((runId: string, me: string): LeaveResult => {
      this.#lockRun.get(runId);
      this.#releaseOf.run(runId, me);
      workers.leave(runId, me);
      const others = workers
        .list(runId)
        .filter((w) => w.workerId !== me && w.stoppedAt === undefined && !w.lost).length;
      return { last: others === 0, others };
    });
  }

  /**
   * Claims up to `limit` pending tasks that are ready (nothing they wait for unfinished) for `worker`:
   * unclaimed ones, or its own again (a re-roll, a retry it left), but none of `skip` (those it gave up
   * on stay free for the others). Returns them in the order asked.
   */
  claimPending(
    runId: string,
    worker: string,
    limit: number,
    only?: readonly string[],
    order: TaskOrder = 'longest',
    skip: ReadonlySet<string> = new Set(),
  ): TaskRecord[] {
    const values = {
      runId,
      worker,
      only: only === undefined ? null : JSON.stringify(only),
      skip: skip.size === 0 ? null : JSON.stringify([...skip]),
      limit,
    };
    const tasks = this.#claim[order].all(values).map(toTask);
    return order === 'manifest'
      ? tasks.sort((a, b) => a.seq - b.seq)
      : tasks.sort((a, b) => b.expectedMs - a.expectedMs || a.seq - b.seq);
  }

  /**
   * The worker will not send these pending tasks (their worst case does not fit what the budget leaves):
   * they go back to the queue, so no worker waits for a claim nobody will act on.
   */
  giveUp(runId: string, worker: string, taskIds: readonly string[]): void {
    if (taskIds.length > 0) this.#giveUp.run(runId, worker, JSON.stringify(taskIds));
  }

  /** Declares lost the workers found so (expired, or dead on this host) and takes their work back. */
  sweep(runId: string, me: string): SweepResult {
    return this.#sweep.immediate(runId, me);
  }

  /** Tasks other workers hold that may still end in something (sent, being sent, or claimed to send). */
  heldByOthers(runId: string, me: string): number {
    return this.#heldByOthers.get(runId, me) ?? 0;
  }

  /**
   * Jobs of the run another worker holds, or that wait to be adopted: their results may still be fetched
   * (an unfetched one again), so a downstream of theirs is not this worker's to block.
   */
  jobsElsewhere(runId: string, me: string): Set<string> {
    return new Set(this.#jobsElsewhere.all(runId, me));
  }

  /**
   * The worker leaves the run, giving back what it still holds (its finished tasks keep its name); says
   * whether it was the last one on it. Costs what it holds, not what it did.
   */
  leave(runId: string, me: string): LeaveResult {
    return this.#leave.immediate(runId, me);
  }
}
