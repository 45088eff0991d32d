// Job status events, from polls and callbacks alike: each recorded once, tasks moved forward only,
// and a failed job's refund written to the ledger once.

import { scrub } from '../util/secrets.js';
import { type Db, readSoon } from './db.js';
import { withoutSignedQueries } from './redact.js';
import type { TaskRow } from './task-rows.js';
import { toIso } from './time.js';
import {
  isDocumentedJobStatus,
  jobPhase,
  nextStateOnJobStatus,
  statesMovingTo,
  taskStateForJobStatus,
} from './transitions.js';
import type { Clock, EventSource, JobStatusResult, TaskState } from './types.js';

interface JobEventRow {
  img_uuid: string;
  status: string;
  at: string;
  source: EventSource;
  record: string | null;
}

export interface JobEvent {
  imgUuid: string;
  status: string;
  at: Date;
  source: EventSource;
  /** The job record as received, with the signatures of its links removed. */
  record: unknown;
}

const JOB_FAILED = 'the job failed; the API refunds its tokens';

export class JobStore {
  readonly #now: Clock;
  readonly #insertEvent;
  readonly #selectTask;
  readonly #moveTask;
  readonly #eventStatuses;
  readonly #insertRefund;
  readonly #setTaskRefunded;
  readonly #selectEvents;
  readonly #record;

  constructor(db: Db, now: Clock) {
    this.#now = now;
    this.#insertEvent = db.prepare<{
      imgUuid: string;
      status: string;
      now: string;
      source: EventSource;
      record: string | null;
    }>(
      `INSERT INTO job_events (img_uuid, status, at, source, record) VALUES (:imgUuid, :status, :now, :source, :record)
       ON CONFLICT (img_uuid, status) DO NOTHING`,
    );
    this.#selectTask = db.prepare<[string], Pick<TaskRow, 'run_id' | 'task_id' | 'state'>>(
      'SELECT run_id, task_id, state FROM tasks WHERE img_uuid = ?',
    );
    this.#moveTask = db.prepare<{
      imgUuid: string;
      /** The states it may move from, as a JSON list (statesMovingTo). */
      from: string;
      to: TaskState;
      status: string;
      source: EventSource;
      duration: number | null;
      finishedAt: string | null;
      error: string | null;
      now: string;
      look: number;
      next: string | null;
    }>(
      // A look at the job that brought the news is counted here, as notePolled would (one write of the row).
      `UPDATE tasks SET state = :to, job_status = :status, source = :source,
         job_duration = coalesce(:duration, job_duration), finished_at = coalesce(:finishedAt, finished_at),
         error = coalesce(:error, error), updated_at = :now,
         last_polled_at = CASE WHEN :look = 1 THEN :now ELSE last_polled_at END,
         poll_count = poll_count + :look,
         next_poll_at = CASE WHEN :look = 1 THEN :next ELSE next_poll_at END
       WHERE img_uuid = :imgUuid AND state IN (SELECT value FROM json_each(:from))`,
    );
    this.#eventStatuses = db
      .prepare<[string], string>('SELECT status FROM job_events WHERE img_uuid = ?')
      .pluck();
    // The refund mirrors the charge (same key, period, run and task), so a period's net spend counts it.
    this.#insertRefund = db.prepare<{ imgUuid: string; now: string }, { tokens: number }>(
      `INSERT INTO ledger (key_fingerprint, period, run_id, task_id, img_uuid, kind, tokens, at)
       SELECT key_fingerprint, period, run_id, task_id, img_uuid, 'refund', tokens, :now
       FROM ledger WHERE img_uuid = :imgUuid AND kind = 'charge'
       ON CONFLICT (img_uuid, kind) DO NOTHING
       RETURNING tokens`,
    );
    this.#setTaskRefunded = db.prepare<[number, string, string]>(
      'UPDATE tasks SET refunded = ?, updated_at = ? WHERE img_uuid = ?',
    );
    this.#selectEvents = db.prepare<[string], JobEventRow>(
      'SELECT * FROM job_events WHERE img_uuid = ? ORDER BY at, rowid',
    );
    this.#record = db.transaction(
      (
        imgUuid: string,
        status: string,
        record: unknown,
        source: EventSource,
        nextLook: Date | undefined,
      ): JobStatusResult => this.#recordInTransaction(imgUuid, status, record, source, nextLook),
    );
  }

  /**
   * Records that the job `imgUuid` has `status` (as confirmed by jobs/detail, whatever brought the
   * news). Safe to call any number of times, in any order. `nextLook`: the news came from a look at the
   * job; when the task moves, that look is counted with the move (as notePolled would, the next one due
   * at `nextLook`) and the result says `looked`.
   */
  recordJobStatus(
    imgUuid: string,
    status: string,
    record: unknown,
    source: EventSource,
    nextLook?: Date,
  ): JobStatusResult {
    return this.#record.immediate(imgUuid, status, record, source, nextLook);
  }

  #recordInTransaction(
    imgUuid: string,
    status: string,
    record: unknown,
    source: EventSource,
    nextLook: Date | undefined,
  ): JobStatusResult {
    const now = toIso(this.#now());
    const stored = record === undefined ? null : scrub(JSON.stringify(withoutSignedQueries(record)));
    const inserted = this.#insertEvent.run({ imgUuid, status, now, source, record: stored });
    const knownStatus = isDocumentedJobStatus(status);
    const phase = jobPhase(status);
    // The task as it was before the move below (sent first, so read first), read when asked: after the
    // commit, from the commit's round trip on PostgreSQL.
    const rowSoon = readSoon(this.#selectTask, imgUuid);
    // Success moves the task to downloading even before the result list appears: the runner waits a grace
    // period for the list there, and only the files decide what follows. The move is made only from a
    // state the status may move it from, decided by the UPDATE itself: another worker recording the same
    // job's news at the same moment moved it first, and this one says it did not move.
    const target = taskStateForJobStatus(status);
    const move =
      target === undefined
        ? undefined
        : this.#moveTask.run({
            imgUuid,
            from: JSON.stringify(statesMovingTo(target)),
            to: target,
            status,
            source,
            duration: durationOf(record),
            finishedAt: target === 'failed' ? now : null,
            error: target === 'failed' ? JOB_FAILED : null,
            now,
            look: nextLook === undefined ? 0 : 1,
            next: nextLook === undefined ? null : toIso(nextLook),
          });
    let refunded: number | null = null;
    // A job that was seen succeeding is not refunded by a later contradicting report.
    if (phase === 'failed' && !this.#eventStatuses.all(imgUuid).some((s) => jobPhase(s) === 'success')) {
      const refund = this.#insertRefund.get({ imgUuid, now });
      if (refund !== undefined) {
        refunded = refund.tokens;
        this.#setTaskRefunded.run(refund.tokens, now, imgUuid);
      }
    }
    const from = () => rowSoon()?.state ?? null;
    // Read when asked: after the commit, the answers came with the commit's round trip on PostgreSQL.
    return {
      get task() {
        const row = rowSoon();
        return row === undefined ? null : { runId: row.run_id, taskId: row.task_id };
      },
      get newEvent() {
        return inserted.changes === 1;
      },
      knownStatus,
      get from() {
        return from();
      },
      get to() {
        const was = from();
        return was === null ? null : nextStateOnJobStatus(was, status);
      },
      get moved() {
        return move?.changes === 1;
      },
      get looked() {
        return move?.changes === 1 && nextLook !== undefined;
      },
      refunded,
    };
  }

  /** Every status recorded for a job, oldest first. */
  jobEvents(imgUuid: string): JobEvent[] {
    return this.#selectEvents.all(imgUuid).map((row) => ({
      imgUuid: row.img_uuid,
      status: row.status,
      at: new Date(row.at),
      source: row.source,
      record: row.record === null ? null : (JSON.parse(row.record) as unknown),
    }));
  }
}

function durationOf(record: unknown): number | null {
  if (record === null || typeof record !== 'object') return null;
  const duration = (record as { duration?: unknown }).duration;
  return typeof duration === 'number' && Number.isFinite(duration) ? duration : null;
}
