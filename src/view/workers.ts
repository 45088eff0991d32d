// The workers of a run as the page shows them (its workers panel): every process that drove the run, from
// the store's workers table, with whether it is lost decided by the store (workerIsLost), as `status`
// and the workers' own sweep decide it. Answered by `GET /api/runs/:run/workers` and pushed as the
// `workers` event when one of them moves.

import type { Store, WorkerRecord } from '../store/index.js';

/** working: beats its heartbeat; stopped: left on its own; lost: died or stopped beating. */
export type WorkerState = 'working' | 'stopped' | 'lost';

export interface WorkerJson {
  id: string;
  host: string;
  pid: number;
  state: WorkerState;
  started_at: string;
  heartbeat_at: string;
  expires_at: string;
  stopped_at: string | null;
  lost_at: string | null;
  in_flight: number;
  submitted: number;
}

function stateOf(w: WorkerRecord): WorkerState {
  if (w.lost) return 'lost';
  return w.stoppedAt === undefined ? 'working' : 'stopped';
}

export function workerJson(w: WorkerRecord): WorkerJson {
  return {
    id: w.workerId,
    host: w.host,
    pid: w.pid,
    state: stateOf(w),
    started_at: w.startedAt.toISOString(),
    heartbeat_at: w.heartbeatAt.toISOString(),
    expires_at: w.expiresAt.toISOString(),
    stopped_at: w.stoppedAt?.toISOString() ?? null,
    lost_at: w.lostAt?.toISOString() ?? null,
    // A worker that is not working holds nothing, whatever its last heartbeat counted.
    in_flight: stateOf(w) === 'working' ? w.inFlight : 0,
    submitted: w.submitted,
  };
}

/** The run's workers, the first started first, and the server's time they were read at. */
export function runWorkers(store: Store, runId: string, now: Date): { now: string; workers: WorkerJson[] } {
  return { now: now.toISOString(), workers: store.workers.list(runId).map(workerJson) };
}

/**
 * When the run's workers would next change without anything written: the earliest expiry of a working
 * one (it turns lost then). Infinity when none works.
 */
export function nextExpiry(workers: readonly WorkerJson[]): number {
  let next = Number.POSITIVE_INFINITY;
  for (const w of workers) {
    if (w.state === 'working') next = Math.min(next, Date.parse(w.expires_at));
  }
  return next;
}
