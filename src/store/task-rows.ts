// The tasks table's row shape and its mapping to TaskRecord, shared by the modules that read tasks.

import type { Estimate } from '../catalog/types.js';
import { StoreError } from './db.js';
import { fromIsoOrNull } from './time.js';
import { statesBefore } from './transitions.js';
import type { EventSource, TaskRecord, TaskState } from './types.js';

export interface TaskRow {
  run_id: string;
  task_id: string;
  seq: number;
  model: string;
  endpoint: string;
  body: string;
  body_hash: string;
  est_tokens: number;
  est_min: number;
  est_max: number;
  est_basis: string;
  est_assumed: number;
  state: TaskState;
  img_uuid: string | null;
  cost: number | null;
  refunded: number | null;
  error: string | null;
  submitted_at: string | null;
  finished_at: string | null;
  job_status: string | null;
  job_duration: number | null;
  last_polled_at: string | null;
  next_poll_at: string | null;
  poll_count: number;
  source: EventSource | null;
  updated_at: string;
  retries: number;
  cost_assumed: number;
  recovered: number;
  file_name: string | null;
  expected_ms: number;
  planned_body: string | null;
  planned_estimate: string | null;
  review: number;
  verdict: 'approved' | 'rejected' | null;
  attempt: number;
  version: number;
}

export function toTask(row: TaskRow): TaskRecord {
  return {
    runId: row.run_id,
    taskId: row.task_id,
    seq: row.seq,
    model: row.model,
    endpoint: row.endpoint,
    wireBody: row.body,
    bodyHash: row.body_hash,
    estimate: {
      tokens: row.est_tokens,
      min: row.est_min,
      max: row.est_max,
      basis: row.est_basis,
      assumedPrice: row.est_assumed === 1,
    },
    state: row.state,
    imgUuid: row.img_uuid,
    cost: row.cost,
    refunded: row.refunded,
    error: row.error,
    submittedAt: fromIsoOrNull(row.submitted_at),
    finishedAt: fromIsoOrNull(row.finished_at),
    jobStatus: row.job_status,
    jobDuration: row.job_duration,
    lastPolledAt: fromIsoOrNull(row.last_polled_at),
    nextPollAt: fromIsoOrNull(row.next_poll_at),
    pollCount: row.poll_count,
    source: row.source,
    retries: row.retries,
    costAssumed: row.cost_assumed === 1,
    recovered: row.recovered === 1,
    fileName: row.file_name,
    expectedMs: row.expected_ms,
    plannedBody: row.planned_body,
    plannedEstimate: row.planned_estimate === null ? null : (JSON.parse(row.planned_estimate) as Estimate),
    review: row.review === 1,
    verdict: row.verdict,
    attempt: row.attempt,
    version: row.version,
  };
}

/** JSON list of the states from which `to` may be entered, bound into `state IN (SELECT value FROM json_each(…))`. */
export function fromStatesJson(to: TaskState): string {
  return JSON.stringify(statesBefore(to));
}

/** The error for a state change the life cycle refuses (or a task that does not exist). */
export function refusedMove(
  current: TaskState | undefined,
  runId: string,
  taskId: string,
  to: TaskState,
): StoreError {
  if (current === undefined)
    return new StoreError(`run ${runId}: task ${taskId}: not found in the state database`);
  return new StoreError(
    `run ${runId}: task ${taskId}: cannot move from ${current} to ${to}: this is a bug in mediabatch, please report it`,
  );
}
