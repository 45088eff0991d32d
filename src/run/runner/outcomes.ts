// What the runner does with each submission answer, as one table. Every answer is first committed to the
// store (the money order: intent committed -> POST -> answer committed), then acted on. Answers that prove
// nothing was charged share one shape of data (how the attempt is recorded, whether and how the run stops,
// whether the same request may go again); the two that may have charged (accepted, in doubt) have handlers.

import type { SubmitOutcome } from '../../api/outcome.js';
import type { CatalogEntry } from '../../catalog/types.js';
import type { TaskRecord } from '../../store/index.js';
import { type RunCore, UNAUTHORIZED_MESSAGE } from './core.js';
import type { StopReason } from './types.js';
import type { Watcher } from './watch.js';

type OutcomeType = SubmitOutcome['type'];
type OutcomeOf<K extends OutcomeType> = Extract<SubmitOutcome, { type: K }>;

/** `retry`: the same request may be sent again, the task keeps its slot. `done`: this attempt is over. */
export type AfterAnswer = 'done' | 'retry';

export interface Answer<O extends SubmitOutcome = SubmitOutcome> {
  task: TaskRecord;
  entry: CatalogEntry;
  attemptNo: number;
  outcome: O;
  /** ` (request <id>)` when the service gave one: support asks for it, so stored messages carry it. */
  ref: string;
}

/** What a rule may act on. */
export interface OutcomeParts {
  core: RunCore;
  watcher: Watcher;
  /** A task was accepted: the API is answering, so the give-up streak starts over. */
  accepted(): void;
}

/** An answer that proves nothing was charged: described by data. */
interface NotChargedRule<O extends SubmitOutcome> {
  /** The attempt's row: `rejected` (the request itself is refused) or `not_charged`. */
  recordAs: 'rejected' | 'not_charged';
  message(o: O): string;
  code?: number;
  httpStatus?(o: O): number;
  /** What else the answer teaches (an event, quota figures); after the row is committed. */
  learn?(parts: OutcomeParts, a: Answer<O>): void;
  /** The answer ends the submitting: `stop` lets answers in flight be recorded, `halt` ends all at once. */
  stops?: { how: 'stop' | 'halt'; reason: StopReason; message(o: O): string };
  next: AfterAnswer;
}

/** An answer that may have charged: its own handler, which books the money. */
interface HandledRule<O extends SubmitOutcome> {
  handle(parts: OutcomeParts, a: Answer<O>): Promise<AfterAnswer>;
}

type Rule<O extends SubmitOutcome> = NotChargedRule<O> | HandledRule<O>;

export const OUTCOME_RULES: { readonly [K in OutcomeType]: Rule<OutcomeOf<K>> } = {
  accepted: { handle: recordAccepted },
  'in-doubt': { handle: recordInDoubt },
  rejected: {
    recordAs: 'rejected',
    message: (o) => o.message,
    code: 400,
    httpStatus: (o) => o.httpStatus,
    learn({ core }, { task, outcome }) {
      core.emit({ event: 'rejected', task: task.taskId, message: outcome.message });
      core.log.warn(
        { task: task.taskId, msg: outcome.message, request_id: outcome.requestId },
        'rejected by the API (not charged)',
      );
    },
    next: 'done',
  },
  'insufficient-tokens': {
    recordAs: 'not_charged',
    message: (o) => o.message,
    code: 100,
    stops: {
      how: 'stop',
      reason: 'insufficient-tokens',
      message: () => 'the balance ran out (code 100): top up, then run again to continue',
    },
    next: 'done',
  },
  'quota-exceeded': {
    recordAs: 'not_charged',
    message: (o) => o.message,
    code: 101,
    learn({ core }, { outcome }) {
      if (outcome.used === undefined || outcome.quota === undefined) return;
      core.quota = { used: outcome.used, quota: outcome.quota, period: outcome.period ?? 'monthly' };
      core.deps.store.ledger.recordQuota(core.deps.keyFingerprint, core.quota);
    },
    stops: {
      how: 'stop',
      reason: 'quota-exceeded',
      message: (o) => `the API key's quota is used up (${o.message}): run again in the next period`,
    },
    next: 'done',
  },
  unauthorized: {
    recordAs: 'not_charged',
    message: (o) => o.message,
    httpStatus: () => 401,
    stops: { how: 'halt', reason: 'unauthorized', message: () => UNAUTHORIZED_MESSAGE },
    next: 'done',
  },
  retryable: { recordAs: 'not_charged', message: (o) => o.reason, next: 'retry' },
};

/** Records one answer and acts on it, as the table says. */
export async function recordOutcome(parts: OutcomeParts, answer: Answer): Promise<AfterAnswer> {
  // The table is keyed by the outcome's own type, so the rule found always fits this outcome.
  const rule = OUTCOME_RULES[answer.outcome.type] as Rule<SubmitOutcome>;
  if ('handle' in rule) return rule.handle(parts, answer);
  const { core } = parts;
  const { store } = core.deps;
  const { task, outcome } = answer;
  const httpStatus = rule.httpStatus?.(outcome);
  await core.writes.write(() =>
    store.submissions.recordNotCharged(core.opts.runId, task.taskId, answer.attemptNo, {
      outcome: rule.recordAs,
      message: `${rule.message(outcome)}${answer.ref}`,
      ...(rule.code !== undefined && { code: rule.code }),
      ...(httpStatus !== undefined && { httpStatus }),
    }),
  );
  rule.learn?.(parts, answer);
  if (rule.stops) {
    const stop = rule.stops.how === 'halt' ? core.haltNow : core.requestStop;
    stop.call(core, rule.stops.reason, rule.stops.message(outcome));
  }
  if (rule.next === 'done') core.releaseSlot(task.taskId);
  return rule.next;
}

/** Accepted: the job id and its cost are committed; the job is watched (or, if the store disagrees, in doubt). */
async function recordAccepted(
  { core, watcher, accepted }: OutcomeParts,
  { task, entry, attemptNo, outcome }: Answer<OutcomeOf<'accepted'>>,
): Promise<AfterAnswer> {
  const { store, keyFingerprint } = core.deps;
  const { runId } = core.opts;
  const id = task.taskId;
  const listPrice = task.estimate.max;
  const recorded = await core.writes.write(
    () => {
      const r = store.submissions.recordSubmitted(runId, id, attemptNo, {
        imgUuid: outcome.imgUuid,
        cost: outcome.cost,
        listPrice,
        keyFingerprint,
      });
      return { r, fresh: store.tasks.taskWithChargesSoon(runId, id) };
    },
    { money: true },
  );
  const fresh = recorded.fresh();
  if (recorded.r.state === 'in_doubt') {
    core.emit({ event: 'in_doubt', task: id, reason: recorded.r.message });
    core.log.warn({ task: id, img_uuid: outcome.imgUuid }, recorded.r.message);
    core.releaseSlot(id);
    return 'done';
  }
  accepted();
  core.emit({
    event: 'submitted',
    task: id,
    img_uuid: outcome.imgUuid,
    cost: outcome.cost ?? listPrice,
    cost_assumed: outcome.cost === undefined,
    attempt: fresh?.chargedAttempts ?? 0,
  });
  if (outcome.cost === undefined) {
    core.log.warn(
      { task: id, img_uuid: outcome.imgUuid, listPrice },
      'the API did not state the cost; the list price is booked for budget and reports',
    );
  }
  core.log.info(
    { task: id, img_uuid: outcome.imgUuid, cost: outcome.cost, request_id: outcome.requestId },
    'submitted',
  );
  if (fresh) watcher.watch(fresh.task, 0, true, entry);
  else core.releaseSlot(id);
  // The job may have ended before its submission answer reached us (a fast job, a slow answer).
  watcher.answerRecorded(id);
  return 'done';
}

/** Sent, answer lost: it may have been charged, so its worst case stays booked until a later run knows. */
async function recordInDoubt(
  { core, watcher }: OutcomeParts,
  { task, attemptNo, outcome, ref }: Answer<OutcomeOf<'in-doubt'>>,
): Promise<AfterAnswer> {
  const id = task.taskId;
  await core.writes.write(() =>
    core.deps.store.submissions.recordInDoubt(core.opts.runId, id, attemptNo, {
      message: `${outcome.reason}${ref}`,
    }),
  );
  core.emit({ event: 'in_doubt', task: id, reason: outcome.reason });
  // A callback for this task may have come before its answer was given up on.
  watcher.putInDoubt(id);
  core.log.warn(
    { task: id, reason: outcome.reason, request_id: outcome.requestId },
    'answer lost after sending: task is in doubt',
  );
  core.releaseSlot(id);
  return 'done';
}
