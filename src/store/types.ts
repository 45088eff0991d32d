// The records the store hands out. Times are Date objects outside the store and ISO 8601 UTC text inside.

import type { Estimate, ResultItemKind } from '../catalog/types.js';

/** The clock every timestamp comes from, injected so tests are exact. */
export type Clock = () => Date;

export const RUN_STATES = ['running', 'interrupted', 'finished', 'refused'] as const;
export type RunState = (typeof RUN_STATES)[number];

/**
 * Every state a user sees. `awaiting_review` is shown, never stored: a pending task that waits for a
 * person's approval of a reviewed upstream (derived in src/store/shown-state.ts; the table keeps `pending`).
 */
export const TASK_STATES = [
  'pending',
  'awaiting_review',
  'submitting',
  'in_doubt',
  'submitted',
  'running',
  'stalled',
  'downloading',
  'unfetched',
  'done',
  'failed',
  'rejected',
  'blocked',
  'lost',
  'skipped',
] as const;
export type TaskState = (typeof TASK_STATES)[number];

/** The states a row of the tasks table can hold (its CHECK): every shown state but `awaiting_review`. */
/**
 * The kinds of job the ledger charged, each apart (migration 15 keeps a run's money per kind). A re-roll
 * is never a retry.
 */
export const MONEY_KINDS = ['first', 'retry', 'reroll', 'doubt_retry', 'sent_again'] as const;
export type MoneyKind = (typeof MONEY_KINDS)[number];

export const STORED_TASK_STATES: readonly TaskState[] = TASK_STATES.filter((s) => s !== 'awaiting_review');

/** A count of 0 for every task state, in TASK_STATES order: where per-state tallies start. */
export function emptyTaskCounts(): Record<TaskState, number> {
  return Object.fromEntries(TASK_STATES.map((s) => [s, 0])) as Record<TaskState, number>;
}

/** Who told us about a job's status. */
export type EventSource = 'poll' | 'callback';

export interface NewRun {
  id: string;
  manifestPath: string;
  manifestName: string;
  /** The manifest settings (or whatever the runner wants to keep), stored as JSON. */
  settings: unknown;
  /** The per-run secret that callback URLs carry; kept so a restarted run accepts late callbacks. */
  callbackToken?: string;
  /** The API (base URL) and key (fingerprint) the run is started against; it is never resumed against another. */
  api?: { baseUrl: string; keyFingerprint: string };
}

/** What others read back of the settings a run keeps: where its results go, and its budget. */
export interface KeptRunSettings {
  /** The output folder or `s3://…` location, as the run was started with it. */
  output?: string;
  /** A positive budget in tokens. */
  budget?: number;
}

/**
 * The one typed reading of `RunRecord.settings` (JSON kept as the run was started, so any shape an older
 * version wrote): a field of the wrong type reads as absent.
 */
export function keptSettings(run: Pick<RunRecord, 'settings'>): KeptRunSettings {
  const kept = run.settings;
  if (typeof kept !== 'object' || kept === null) return {};
  const { output, budget } = kept as Record<string, unknown>;
  return {
    ...(typeof output === 'string' ? { output } : {}),
    ...(typeof budget === 'number' && Number.isFinite(budget) && budget > 0 ? { budget } : {}),
  };
}

export interface RunRecord {
  id: string;
  manifestPath: string;
  manifestName: string;
  state: RunState;
  exitCode: number | null;
  settings: unknown;
  callbackToken: string | null;
  balanceBefore: number | null;
  balanceAfter: number | null;
  createdAt: Date;
  /** The latest start (a resumed run starts again). */
  startedAt: Date | null;
  /** The latest end; kept while a resumed run is going. */
  finishedAt: Date | null;
  /** The first start: never moves. */
  firstStartedAt: Date | null;
  /** Time spent running, summed over every session that ended. */
  activeMs: number;
  /** The API and key the run belongs to; null for runs from before runs were bound. */
  api: { baseUrl: string; keyFingerprint: string } | null;
  /**
   * The digest of the plan its tasks were last stored from (src/store/plan-digest.ts); null for a run made
   * before runs kept one, or one whose tasks are still being stored (`planTasks` set).
   */
  planDigest: string | null;
  /** How many tasks that plan has, recorded as its storing starts; null for a run made before. */
  planTasks: number | null;
  /**
   * Some tasks of the plan are still to be stored, its digest (the whole plan's) recorded before them: the
   * workers of the run store the rest, one at a time (the storing lease, src/run/storing.ts).
   */
  planStoring: boolean;
  /** Why the run last stopped before its end (the first reason, kept until it starts again or finishes). */
  stop?: RunStop;
}

/** Why a run stopped: the runner's reason (`budget`, `period-budget`, `interrupted`, …) and its one line. */
export interface RunStop {
  reason: string;
  message: string;
  /** When it was recorded; null for a stop nobody recorded (a process killed), said by whoever reads. */
  at: Date | null;
}

/** One task as the runner hands it to the store. */
export interface NewTask {
  taskId: string;
  model: string;
  endpoint: string;
  /** The exact JSON text that will be POSTed; the store hashes it and gives it back verbatim. */
  wireBody: string;
  estimate: Estimate;
  /** How many more times a job the service failed (and refunded) is submitted again; 0 by default. */
  retries?: number;
  /** Its result must be approved before its downstreams are submitted (the manifest's `review`). */
  review?: boolean;
  /** The manifest's `file_name` for the task: its files go to `<run>/<fileName>.<ext>`. */
  fileName?: string;
  /** How long its job is expected to take (ms), for submitting the longest first; 0 when unknown. */
  expectedMs?: number;
  /** The tasks it waits for and takes results from (`after`); name '' for a lone upstream. */
  upstreams?: ReadonlyArray<{ name: string; taskId: string }>;
}

export interface TaskRecord {
  runId: string;
  taskId: string;
  /** Position in the manifest, for reports in the user's order. */
  seq: number;
  /** How long its job is expected to take (ms): the longest go first. */
  expectedMs: number;
  model: string;
  endpoint: string;
  wireBody: string;
  bodyHash: string;
  estimate: Estimate;
  state: TaskState;
  imgUuid: string | null;
  /** Tokens the API said it charged. */
  cost: number | null;
  refunded: number | null;
  error: string | null;
  submittedAt: Date | null;
  finishedAt: Date | null;
  /** The last job status that moved the task, as the API spelled it. */
  jobStatus: string | null;
  /** Seconds, from the job record. */
  jobDuration: number | null;
  lastPolledAt: Date | null;
  nextPollAt: Date | null;
  pollCount: number;
  /** How the status that last moved the task arrived. */
  source: EventSource | null;
  /** Automatic resubmissions allowed after a failed job (the manifest's `retries`). */
  retries: number;
  /** The API did not state the cost of the current job: the list price (`estimate.max`) stands for it. */
  costAssumed: boolean;
  /** The current job was adopted from doubt (a callback proved the lost submission was accepted). */
  recovered: boolean;
  /** Result file name without extension, from the manifest's `file_name`; null for `<task>/1.<ext>`. */
  fileName: string | null;
  /**
   * A chained task whose references were filled in: the request as planned, `{{after…}}` and all (the
   * stored `wireBody` is the filled-in one that is sent). Null otherwise.
   */
  plannedBody: string | null;
  /** The plan's estimate of a filled-in chained task (its `estimate` is then the exact price). */
  plannedEstimate: Estimate | null;
  /** Its result must be approved before its downstreams go on (the manifest's `review`). */
  review: boolean;
  /** The decision on the current result; null while none was taken (or the task is not reviewed). */
  verdict: 'approved' | 'rejected' | null;
  /** 1, then one more after each re-roll the user asked for. */
  attempt: number;
  /** Moves whenever a reviewed task's state, verdict or attempt does: what a decision was taken on. */
  version: number;
}

/** A chained task's upstream, as the store keeps it. */
export interface UpstreamLink {
  /** '' for `after: "<id>"`, else the name in the `after` mapping. */
  name: string;
  upstreamId: string;
}

export interface ChangedTask {
  taskId: string;
  state: TaskState;
  oldHash: string;
  newHash: string;
}

export interface UpsertResult {
  inserted: number;
  unchanged: number;
  /** Never-charged tasks (pending, rejected, blocked) whose body changed: updated in place, now pending. */
  updated: string[];
  /**
   * Tasks already sent (or in doubt) whose body changed. Left as they were, unless `acceptChanges`,
   * in which case they were reset to pending with the new body (their charges stay in the ledger).
   */
  changed: ChangedTask[];
  /** Tasks of the run that the manifest no longer lists; left alone. */
  missing: string[];
}

export type AttemptOutcome = 'submitted' | 'rejected' | 'not_charged' | 'in_doubt';

export interface AttemptRecord {
  runId: string;
  taskId: string;
  attemptNo: number;
  /** Committed just before the POST was sent. */
  sentAt: Date;
  answeredAt: Date | null;
  /** Null while the answer is awaited (or was never recorded: a crash). */
  outcome: AttemptOutcome | null;
  httpStatus: number | null;
  code: number | null;
  message: string | null;
  imgUuid: string | null;
}

export interface SubmittedAnswer {
  imgUuid: string;
  /** Tokens the API said it deducted; undefined when it did not say (the list price is booked, marked assumed). */
  cost: number | undefined;
  /** Booked when `cost` is undefined: the task's list price (its worst case). Required then. */
  listPrice?: number;
  /** From `keyFingerprint(apiKey)`; the key itself never reaches the store. */
  keyFingerprint: string;
}

export interface FailedAnswer {
  httpStatus?: number;
  code?: number;
  message: string;
}

export interface NotChargedAnswer extends FailedAnswer {
  /** `rejected`: the request is wrong (400), the task ends. `not_charged`: try again later, back to pending. */
  outcome: 'rejected' | 'not_charged';
}

export interface JobStatusResult {
  /** The task this job belongs to, if any still does. */
  task: { runId: string; taskId: string } | null;
  /** False when this img_uuid + status was recorded before (a repeated callback or poll). */
  newEvent: boolean;
  /** False for statuses the API does not document (treated as "not finished yet"). */
  knownStatus: boolean;
  from: TaskState | null;
  /** The task's state after the event (unchanged when the event would move it backward). */
  to: TaskState | null;
  moved: boolean;
  /** The look at the job that brought it was counted with the move (its poll count, when, the next one due). */
  looked: boolean;
  /** Tokens refunded by this event, when it recorded the refund. */
  refunded: number | null;
}

export interface NewFile {
  index: number;
  kind: ResultItemKind;
  /** Where the file is on disk. */
  path: string;
  bytes: number;
  sha256: string;
  /** The link it came from; only its host is kept (signed query strings are credentials). */
  url?: string;
}

export interface FileRecord {
  runId: string;
  taskId: string;
  index: number;
  kind: ResultItemKind;
  path: string;
  bytes: number;
  sha256: string;
  sourceHost: string | null;
  completedAt: Date;
}

export interface LedgerSums {
  charged: number;
  refunded: number;
  /** charged − refunded. */
  net: number;
}

export interface PeriodSpend extends LedgerSums {
  keyFingerprint: string;
  /** `YYYY-MM`, UTC. */
  period: string;
}

/** What the ledger holds for one task of a run. */
export interface TaskSpend extends LedgerSums {
  taskId: string;
  /** Jobs charged for the task (more than one after `--retry-in-doubt` or `--accept-changes`). */
  jobs: number;
}

export interface ModelTotals extends LedgerSums {
  model: string;
  tasks: number;
  /** Sum of the best estimates, in tokens (list price). */
  estimated: number;
  estimatedMin: number;
  estimatedMax: number;
}

export interface QuotaRecord {
  keyFingerprint: string;
  used: number;
  quota: number;
  /** As the API named it, e.g. `monthly`. */
  period: string;
  learnedAt: Date;
}

export type LeaseResult =
  | { acquired: true; holder: string; expiresAt: Date }
  | { acquired: false; holder: string; expiresAt: Date };

export interface LeaseRecord {
  name: string;
  holder: string;
  acquiredAt: Date;
  heartbeatAt: Date;
  expiresAt: Date;
}

export interface ScheduleRecord {
  manifestPath: string;
  lastFiredAt: Date | null;
  lastRunId: string | null;
  nextFireAt: Date | null;
  updatedAt: Date;
  /**
   * The claim of the firing at lastFiredAt while its run is not made yet (none once it is made, the slot
   * skipped or the firing ended): its holder (`pid@host#nonce`) renews it; past expiresAt, or with the
   * holder's process gone, another scheduler takes it over.
   */
  claim?: { holder: string; expiresAt: Date };
}
