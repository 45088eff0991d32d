// The money-critical path: intent before the POST, the answer right after it, each in one transaction.

import type { Db } from './db.js';
import { StoreError } from './db.js';
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

  constructor(db: Db, now: Clock) {
    this.#now = now;
    this.#selectState = db
      .prepare<[string, string], TaskState>('SELECT state FROM tasks WHERE run_id = ? AND task_id = ?')
      .pluck();
    this.#markSubmitting = db.prepare<Key & { now: string }>(
      `UPDATE tasks SET state = 'submitting', error = NULL, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state = 'pending'`,
    );
    this.#insertAttempt = db.prepare<Key & { now: string }, { attempt_no: number }>(
      `INSERT INTO attempts (run_id, task_id, attempt_no, sent_at)
       SELECT :runId, :taskId, coalesce(max(attempt_no), 0) + 1, :now FROM attempts
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
    this.#markSubmitted = db.prepare<Key & { imgUuid: string; cost: number; now: string; from: string }>(
      `UPDATE tasks SET state = 'submitted', img_uuid = :imgUuid, cost = :cost, refunded = NULL, error = NULL,
         submitted_at = :now, next_poll_at = NULL, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state IN (SELECT value FROM json_each(:from))`,
    );
    this.#insertCharge = db.prepare<
      Key & { imgUuid: string; cost: number; keyFingerprint: string; period: string; now: string }
    >(
      `INSERT INTO ledger (key_fingerprint, period, run_id, task_id, img_uuid, kind, tokens, at)
       VALUES (:keyFingerprint, :period, :runId, :taskId, :imgUuid, 'charge', :cost, :now)
       ON CONFLICT (img_uuid, kind) DO NOTHING`,
    );
    this.#markNotCharged = db.prepare<Key & { state: TaskState; error: string; now: string }>(
      `UPDATE tasks SET state = :state, error = :error, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state = 'submitting'`,
    );
    this.#markInDoubt = db.prepare<Key & { error: string; now: string }>(
      `UPDATE tasks SET state = 'in_doubt', error = :error, updated_at = :now
       WHERE run_id = :runId AND task_id = :taskId AND state = 'submitting'`,
    );
    this.#selectSubmitting = db
      .prepare<[string], string>(
        `SELECT task_id FROM tasks WHERE run_id = ? AND state = 'submitting' ORDER BY seq`,
      )
      .pluck();
    this.#closeOpenAttempts = db.prepare<Key & { now: string; message: string }>(
      `UPDATE attempts SET answered_at = :now, outcome = 'in_doubt', message = :message
       WHERE run_id = :runId AND task_id = :taskId AND outcome IS NULL`,
    );
    this.#selectAttempts = db.prepare<[string, string], AttemptRow>(
      'SELECT * FROM attempts WHERE run_id = ? AND task_id = ? ORDER BY attempt_no',
    );

    this.#intent = db.transaction((runId: string, taskId: string): number => {
      const now = toIso(this.#now());
      if (this.#markSubmitting.run({ runId, taskId, now }).changes === 0) {
        throw refusedMove(this.#selectState.get(runId, taskId), runId, taskId, 'submitting');
      }
      const attempt = this.#insertAttempt.get({ runId, taskId, now });
      if (attempt === undefined)
        throw new StoreError(`run ${runId}: task ${taskId}: attempt row not written`);
      return attempt.attempt_no;
    });
    this.#submitted = db.transaction(
      (runId: string, taskId: string, attemptNo: number, answer: SubmittedAnswer) => {
        const now = this.#now();
        const at = toIso(now);
        const task = { runId, taskId, imgUuid: answer.imgUuid, cost: answer.cost, now: at };
        if (this.#markSubmitted.run({ ...task, from: fromStatesJson('submitted') }).changes === 0) {
          // Tokens were spent: say which job so the log keeps it even though the row could not take it.
          const state = this.#selectState.get(runId, taskId);
          throw new StoreError(
            `${refusedMove(state, runId, taskId, 'submitted').message} (img_uuid ${answer.imgUuid}, cost ${answer.cost})`,
          );
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
        this.#insertCharge.run({ ...task, keyFingerprint: answer.keyFingerprint, period: periodOf(now) });
      },
    );
    this.#notCharged = db.transaction(
      (runId: string, taskId: string, attemptNo: number, answer: NotChargedAnswer) => {
        const now = toIso(this.#now());
        const state: TaskState = answer.outcome === 'rejected' ? 'rejected' : 'pending';
        if (this.#markNotCharged.run({ runId, taskId, state, error: answer.message, now }).changes === 0) {
          throw refusedMove(this.#selectState.get(runId, taskId), runId, taskId, state);
        }
        this.#recordAnswer.run(answerValues(runId, taskId, attemptNo, answer.outcome, answer, now));
      },
    );
    this.#inDoubt = db.transaction(
      (runId: string, taskId: string, attemptNo: number, answer: FailedAnswer) => {
        const now = toIso(this.#now());
        if (this.#markInDoubt.run({ runId, taskId, error: answer.message, now }).changes === 0) {
          throw refusedMove(this.#selectState.get(runId, taskId), runId, taskId, 'in_doubt');
        }
        this.#recordAnswer.run(answerValues(runId, taskId, attemptNo, 'in_doubt', answer, now));
      },
    );
    this.#recover = db.transaction((runId: string): string[] => {
      const now = toIso(this.#now());
      const taskIds = this.#selectSubmitting.all(runId);
      for (const taskId of taskIds) {
        this.#markInDoubt.run({ runId, taskId, error: INTERRUPTED, now });
        this.#closeOpenAttempts.run({ runId, taskId, now, message: INTERRUPTED });
      }
      return taskIds;
    });
  }

  /**
   * Commits the intent to submit (the task becomes `submitting`, an attempt row is written) and returns
   * the attempt number. Call it, and let it return, before the POST is sent.
   */
  recordSubmitIntent(runId: string, taskId: string): number {
    return this.#intent.immediate(runId, taskId);
  }

  /** The API accepted the task: its img_uuid, the task's state, the attempt and the ledger charge, at once. */
  recordSubmitted(runId: string, taskId: string, attemptNo: number, answer: SubmittedAnswer): void {
    this.#submitted.immediate(runId, taskId, attemptNo, answer);
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
    message: answer.message,
    imgUuid: null,
    now,
  };
}
