// The money-critical path: intent before the POST, the answer right after it, each in one transaction.

import { toMicro } from '../util/money.js';
import { scrub } from '../util/secrets.js';
import type { Db } from './db.js';
import { inPipeline, readSoon, runExpectingChange, StoreError } from './db.js';
import type { ReservationStore } from './reservations.js';
import { fromStatesJson, refusedMove } from './task-rows.js';
import { fromIso, fromIsoOrNull, periodOf, toIso } from './time.js';
import type {
  AttemptOutcome,
  AttemptRecord,
  Clock,
  FailedAnswer,
  NotChargedAnswer,
  SubmittedAnswer,
  TaskState,
} from './types.js';

export type SubmitRecorded = { state: 'submitted' } | { state: 'in_doubt'; message: string };

interface AttemptRow {
  run_id: string;
  task_id: string;
  attempt_no: number;
  sent_at: string;
  answered_at: string | null;
  outcome: AttemptOutcome | null;
  http_status: number | null;
  code: number | null;
  message: string | null;
  img_uuid: string | null;
}

type Key = { runId: string; taskId: string };
type AnswerValues = Key & {
  attemptNo: number;
  outcome: AttemptOutcome;
  httpStatus: number | null;
  code: number | null;
  message: string | null;
  imgUuid: string | null;
  now: string;
};

const INTERRUPTED =
  'interrupted after the submission was about to be sent: it may or may not have been charged';

export class SubmissionStore {
  readonly #now: Clock;
  readonly #selectState;
  readonly #lockState;
  readonly #markSubmitting;
  readonly #insertAttempt;
  readonly #recordAnswer;
  readonly #markSubmitted;
  readonly #insertCharge;
  readonly #markNotCharged;
  readonly #markInDoubt;
  readonly #selectSubmitting;
  readonly #closeOpenAttempts;
  readonly #selectAttempts;
  readonly #intent;
  readonly #submitted;
  readonly #notCharged;
  readonly #inDoubt;
  readonly #recover;
  readonly #selectOwner;
  readonly #countCharged;
  readonly #lastInDoubtAttempt;
  readonly #adopt;
  readonly #money: ReservationStore;

  // Long on purpose: every statement is prepared once, here, and named for what it does.
  constructor(db: Db, now: Clock, money: ReservationStore) {
    this.#now = now;
    this.#money = money;
    this.#selectState = db
      .prepare<[string, string], TaskState>('SELECT state FROM tasks WHERE run_id = ? AND task_id = ?')
      .pluck();
    // The same read, locking the task's row on PostgreSQL (overrides.ts) for a transaction that decides on it.
    this.#lockState = db
      .prepare<[string, string], TaskState>(
        'SELECT state AS locked FROM tasks WHERE run_id = ? AND task_id = ?',
      )
      .pluck();
    // A worker of a fleet sends only what it claimed (store.claims): the move is the last word on who sends.
    this.#markSubmitting = db.prepare<Key & { now: string; worker: string | null }>(
      `UPDATE tasks SET state = 'submitting', error = NULL, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state = 'pending'
         AND (CAST(:worker AS TEXT) IS NULL OR claimed_by = :worker)`,
    );
    this.#insertAttempt = db.prepare<Key & { now: string; worker: string | null }, { attempt_no: number }>(
      `INSERT INTO attempts (run_id, task_id, attempt_no, sent_at, worker_id)
       SELECT :runId, :taskId, coalesce(max(attempt_no), 0) + 1, :now, CAST(:worker AS TEXT) FROM attempts
       WHERE run_id = :runId AND task_id = :taskId
       RETURNING attempt_no`,
    );
    // Only an attempt still waiting for its answer takes one: an answer is recorded once.
    this.#recordAnswer = db.prepare<AnswerValues>(
      `UPDATE attempts SET answered_at = :now, outcome = :outcome, http_status = :httpStatus, code = :code,
         message = :message, img_uuid = :imgUuid
       WHERE run_id = :runId AND task_id = :taskId AND attempt_no = :attemptNo
         AND (outcome IS NULL OR outcome = 'in_doubt')`,
    );
    this.#markSubmitted = db.prepare<
      Key & { imgUuid: string; cost: number; assumed: number; recovered: number; now: string; from: string }
    >(
      `UPDATE tasks SET state = 'submitted', img_uuid = :imgUuid, cost = :cost, cost_assumed = :assumed,
         recovered = :recovered, refunded = NULL, error = NULL, submitted_at = :now, next_poll_at = NULL,
         updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state IN (SELECT value FROM json_each(:from))`,
    );
    this.#insertCharge = db.prepare<
      Key & {
        imgUuid: string;
        cost: number;
        assumed: number;
        keyFingerprint: string;
        period: string;
        now: string;
      }
    >(
      `INSERT INTO ledger (key_fingerprint, period, run_id, task_id, img_uuid, kind, tokens, assumed, at, reroll)
       VALUES (:keyFingerprint, :period, :runId, :taskId, :imgUuid, 'charge', :cost, :assumed, :now,
         coalesce((SELECT CASE WHEN attempt > 1 THEN 1 ELSE 0 END FROM tasks WHERE run_id = :runId AND task_id = :taskId), 0))
       ON CONFLICT (img_uuid, kind) DO NOTHING`,
    );
    this.#selectOwner = db.prepare<[string], { run_id: string; task_id: string }>(
      'SELECT run_id, task_id FROM tasks WHERE img_uuid = ?',
    );
    this.#countCharged = db
      .prepare<[string, string], number>(
        `SELECT count(*) FROM attempts WHERE run_id = ? AND task_id = ? AND outcome = 'submitted'`,
      )
      .pluck();
    this.#lastInDoubtAttempt = db
      .prepare<[string, string], number | null>(
        `SELECT max(attempt_no) FROM attempts WHERE run_id = ? AND task_id = ? AND outcome = 'in_doubt'`,
      )
      .pluck();
    this.#markNotCharged = db.prepare<Key & { state: TaskState; error: string; now: string }>(
      `UPDATE tasks SET state = :state, error = :error, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state = 'submitting'`,
    );
    this.#markInDoubt = db.prepare<Key & { error: string; now: string }>(
      `UPDATE tasks SET state = 'in_doubt', error = :error, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state = 'submitting'`,
    );
    // A live worker's submissions are its own to answer: only those nobody alive is sending are cut off.
    this.#selectSubmitting = db
      .prepare<[string], string>(
        `SELECT task_id FROM tasks t WHERE run_id = ? AND state = 'submitting'
           AND (claimed_by IS NULL OR NOT EXISTS (SELECT 1 FROM workers w WHERE w.run_id = t.run_id
             AND w.worker_id = t.claimed_by AND w.lost_at IS NULL AND w.stopped_at IS NULL))
         ORDER BY seq`,
      )
      .pluck();
    this.#closeOpenAttempts = db.prepare<Key & { now: string; message: string }>(
      `UPDATE attempts SET answered_at = :now, outcome = 'in_doubt', message = :message
       WHERE run_id = :runId AND task_id = :taskId AND outcome IS NULL`,
    );
    this.#selectAttempts = db.prepare<[string, string], AttemptRow>(
      'SELECT * FROM attempts WHERE run_id = ? AND task_id = ? ORDER BY attempt_no',
    );

    this.#intent = db.transaction((runId: string, taskId: string, worker: string | null): (() => number) => {
      const now = toIso(this.#now());
      runExpectingChange(this.#markSubmitting, { runId, taskId, now, worker }, () => {
        const state = this.#selectState.get(runId, taskId);
        if (state === 'pending' && worker !== null) {
          throw new StoreError(`run ${runId}: task ${taskId} is not claimed by worker ${worker}`);
        }
        throw refusedMove(state, runId, taskId, 'submitting');
      });
      // The worst case is reserved with the intent, or nothing is recorded (OverBudgetError).
      this.#money.reserveForIntent(runId, taskId, now);
      // Its number is read after the commit (recordSubmitIntentSoon), from the commit's round trip.
      const attempt = readSoon(this.#insertAttempt, { runId, taskId, now, worker });
      return () => {
        const row = attempt();
        if (row === undefined) throw new StoreError(`run ${runId}: task ${taskId}: attempt row not written`);
        return row.attempt_no;
      };
    });
    this.#submitted = db.transaction(
      (runId: string, taskId: string, attemptNo: number, answer: SubmittedAnswer): SubmitRecorded => {
        const at = toIso(this.#now());
        // Two tasks can never share a job: a second task answered with a known img_uuid is in doubt
        // (its own submission may or may not have been charged), never a crash. In a PostgreSQL pipeline
        // the unique index on img_uuid answers instead of the read: the job's UPDATE below fails there,
        // and the transaction runs again without the pipeline, where this read is made.
        const owner = inPipeline(db) ? undefined : this.#otherOwner(runId, taskId, answer.imgUuid);
        if (owner !== undefined) return this.#sharedJob(runId, taskId, attemptNo, answer.imgUuid, owner, at);
        try {
          this.#book(runId, taskId, answer, { from: 'submitted', recovered: 0, at, stateBefore: undefined });
        } catch (error) {
          // Another worker gave the job to its task between the read above and this write, and its commit
          // is what refused the write (PostgreSQL waits for it on the unique index): the owner reads now.
          const late = isUniqueViolation(error) ? this.#otherOwner(runId, taskId, answer.imgUuid) : undefined;
          if (late === undefined) throw error;
          return this.#sharedJob(runId, taskId, attemptNo, answer.imgUuid, late, at);
        }
        this.#recordAnswer.run({
          runId,
          taskId,
          attemptNo,
          outcome: 'submitted',
          httpStatus: 200,
          code: 0,
          message: null,
          imgUuid: answer.imgUuid,
          now: at,
        });
        return { state: 'submitted' };
      },
    );
    this.#adopt = db.transaction((runId: string, taskId: string, answer: SubmittedAnswer): boolean => {
      const at = toIso(this.#now());
      if (this.#lockState.get(runId, taskId) !== 'in_doubt') return false;
      if (this.#selectOwner.get(answer.imgUuid) !== undefined) return false;
      try {
        this.#book(runId, taskId, answer, { from: 'submitted', recovered: 1, at, stateBefore: 'in_doubt' });
      } catch (error) {
        // Another worker gave the job to a task of its own after the read above (see #submitted).
        if (isUniqueViolation(error) && this.#selectOwner.get(answer.imgUuid) !== undefined) return false;
        throw error;
      }
      const attemptNo = this.#lastInDoubtAttempt.get(runId, taskId);
      if (attemptNo !== null && attemptNo !== undefined) {
        this.#recordAnswer.run({
          runId,
          taskId,
          attemptNo,
          outcome: 'submitted',
          httpStatus: null,
          code: null,
          message: `recovered from doubt: a callback named job ${answer.imgUuid} and jobs/detail confirmed it`,
          imgUuid: answer.imgUuid,
          now: at,
        });
      }
      return true;
    });
    this.#notCharged = db.transaction(
      (runId: string, taskId: string, attemptNo: number, answer: NotChargedAnswer) => {
        const now = toIso(this.#now());
        const state: TaskState = answer.outcome === 'rejected' ? 'rejected' : 'pending';
        if (
          this.#markNotCharged.run({ runId, taskId, state, error: scrub(answer.message), now }).changes === 0
        ) {
          throw refusedMove(this.#selectState.get(runId, taskId), runId, taskId, state);
        }
        this.#money.release(runId, taskId, now);
        this.#recordAnswer.run(answerValues(runId, taskId, attemptNo, answer.outcome, answer, now));
      },
    );
    this.#inDoubt = db.transaction(
      (runId: string, taskId: string, attemptNo: number, answer: FailedAnswer) => {
        const now = toIso(this.#now());
        if (this.#markInDoubt.run({ runId, taskId, error: scrub(answer.message), now }).changes === 0) {
          throw refusedMove(this.#selectState.get(runId, taskId), runId, taskId, 'in_doubt');
        }
        this.#money.doubt(runId, taskId);
        this.#recordAnswer.run(answerValues(runId, taskId, attemptNo, 'in_doubt', answer, now));
      },
    );
    this.#recover = db.transaction((runId: string): string[] => {
      const now = toIso(this.#now());
      const taskIds = this.#selectSubmitting.all(runId);
      for (const taskId of taskIds) {
        this.#markInDoubt.run({ runId, taskId, error: INTERRUPTED, now });
        this.#money.doubt(runId, taskId);
        this.#closeOpenAttempts.run({ runId, taskId, now, message: INTERRUPTED });
      }
      return taskIds;
    });
  }

  /**
   * Commits the intent to submit (the task becomes `submitting`, an attempt row is written) and returns
   * the attempt number. Call it, and let it return, before the POST is sent.
   */
  recordSubmitIntent(runId: string, taskId: string, workerId?: string): number {
    return this.recordSubmitIntentSoon(runId, taskId, workerId)();
  }

  /**
   * recordSubmitIntent, whose attempt number is read when the returned function is called: called after
   * the commit, it costs no wait of its own on PostgreSQL.
   */
  recordSubmitIntentSoon(runId: string, taskId: string, workerId?: string): () => number {
    return this.#intent.immediate(runId, taskId, workerId ?? null);
  }

  /**
   * The API accepted the task: its img_uuid, the task's state, the attempt and the ledger charge, at once.
   * An img_uuid another task already has puts this one in doubt instead (the result says so).
   */
  recordSubmitted(runId: string, taskId: string, attemptNo: number, answer: SubmittedAnswer): SubmitRecorded {
    return this.#submitted.immediate(runId, taskId, attemptNo, answer);
  }

  /**
   * A submission whose answer was lost turned out to be accepted (a callback named its job and
   * jobs/detail confirmed it): the task takes the job, its charge is booked (at list price when unknown),
   * and its attempt says it was recovered. False when the task is no longer in doubt or the job is
   * another task's already.
   */
  adoptInDoubt(runId: string, taskId: string, answer: SubmittedAnswer): boolean {
    return this.#adopt.immediate(runId, taskId, answer);
  }

  /** How many jobs were accepted (and charged) for the task so far, across retries. */
  chargedAttempts(runId: string, taskId: string): number {
    return this.#countCharged.get(runId, taskId) ?? 0;
  }

  /** The task that has the job already, when it is not this one. */
  #otherOwner(
    runId: string,
    taskId: string,
    imgUuid: string,
  ): { run_id: string; task_id: string } | undefined {
    const owner = this.#selectOwner.get(imgUuid);
    return owner !== undefined && (owner.run_id !== runId || owner.task_id !== taskId) ? owner : undefined;
  }

  /** A submission answered with another task's job: in doubt, the other task's job and charge untouched. */
  #sharedJob(
    runId: string,
    taskId: string,
    attemptNo: number,
    imgUuid: string,
    owner: { run_id: string; task_id: string },
    at: string,
  ): SubmitRecorded {
    const message = `the API answered with job ${imgUuid}, which task ${owner.task_id} of run ${owner.run_id} already has: this submission may or may not have been charged`;
    if (this.#markInDoubt.run({ runId, taskId, error: message, now: at }).changes === 0) {
      throw refusedMove(this.#selectState.get(runId, taskId), runId, taskId, 'in_doubt');
    }
    this.#recordAnswer.run({
      ...answerValues(runId, taskId, attemptNo, 'in_doubt', { message, httpStatus: 200, code: 0 }, at),
      imgUuid: null,
    });
    this.#money.doubt(runId, taskId);
    return { state: 'in_doubt', message };
  }

  #book(
    runId: string,
    taskId: string,
    answer: SubmittedAnswer,
    how: { from: TaskState; recovered: number; at: string; stateBefore: TaskState | undefined },
  ): void {
    const assumed = answer.cost === undefined ? 1 : 0;
    const cost = answer.cost ?? answer.listPrice;
    if (cost === undefined) {
      throw new StoreError(`run ${runId}: task ${taskId}: a charge with no cost needs the list price`);
    }
    const task = { runId, taskId, imgUuid: answer.imgUuid, cost, assumed, now: how.at };
    const from = how.stateBefore === undefined ? fromStatesJson(how.from) : JSON.stringify([how.stateBefore]);
    runExpectingChange(this.#markSubmitted, { ...task, recovered: how.recovered, from }, () => {
      // Tokens were spent: say which job so the log keeps it even though the row could not take it.
      const state = this.#selectState.get(runId, taskId);
      throw new StoreError(
        `${refusedMove(state, runId, taskId, 'submitted').message} (img_uuid ${answer.imgUuid}, cost ${answer.cost})`,
      );
    });
    this.#insertCharge.run({
      ...task,
      keyFingerprint: answer.keyFingerprint,
      period: periodOf(fromIso(how.at)),
    });
    this.#money.settle(runId, taskId, toMicro(cost), how.at);
  }

  /** An answer known not to have charged: `rejected` ends the task, `not_charged` puts it back to pending. */
  recordNotCharged(runId: string, taskId: string, attemptNo: number, answer: NotChargedAnswer): void {
    this.#notCharged.immediate(runId, taskId, attemptNo, answer);
  }

  /** The request may have been charged but no answer says so: never resubmitted automatically. */
  recordInDoubt(runId: string, taskId: string, attemptNo: number, answer: FailedAnswer): void {
    this.#inDoubt.immediate(runId, taskId, attemptNo, answer);
  }

  /**
   * After a crash, a task left `submitting` may have been sent: it becomes in doubt. Call at the start
   * of a resumed run, holding its lease. Returns the task ids.
   */
  recoverInterruptedSubmissions(runId: string): string[] {
    return this.#recover.immediate(runId);
  }

  attemptsOf(runId: string, taskId: string): AttemptRecord[] {
    return this.#selectAttempts.all(runId, taskId).map((row) => ({
      runId: row.run_id,
      taskId: row.task_id,
      attemptNo: row.attempt_no,
      sentAt: fromIso(row.sent_at),
      answeredAt: fromIsoOrNull(row.answered_at),
      outcome: row.outcome,
      httpStatus: row.http_status,
      code: row.code,
      message: row.message,
      imgUuid: row.img_uuid,
    }));
  }
}

/** A write refused by a unique index (SQLite's code; the PostgreSQL store gives its errors the same). */
function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === 'SQLITE_CONSTRAINT_UNIQUE';
}

function answerValues(
  runId: string,
  taskId: string,
  attemptNo: number,
  outcome: AttemptOutcome,
  answer: FailedAnswer,
  now: string,
): AnswerValues {
  return {
    runId,
    taskId,
    attemptNo,
    outcome,
    httpStatus: answer.httpStatus ?? null,
    code: answer.code ?? null,
    message: scrub(answer.message),
    imgUuid: null,
    now,
  };
}
