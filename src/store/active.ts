// How long a run was worked on, over every session: the sessions that ended (`active_ms`, added when a
// session ends), and the one under way, if any. That one counts to now while the run is running; once its
// process (kill -9, a crash) or every worker of the fleet is gone, it counts to the last sign of work
// (the latest heartbeat of the session's workers, or of its lease), never to now, and never to zero.

import type { LeaseStore } from './leases.js';
import type { RunRecord, RunState } from './types.js';
import type { WorkerStore } from './workers.js';

/** The lease a run's driver holds (the run layer takes and renews it). */
export function runLeaseName(runId: string): string {
  return `run:${runId}`;
}

/**
 * The last sign of work on this run: the latest heartbeat (or leaving) of any of its workers, or of its
 * lease. Signs from before the session under way started are older than its start and count nothing.
 */
export function lastSignOfWork(
  parts: { workers: WorkerStore; leases: LeaseStore },
  runId: string,
): Date | undefined {
  let last = Number.NEGATIVE_INFINITY;
  for (const w of parts.workers.list(runId)) {
    last = Math.max(last, w.heartbeatAt.getTime(), w.stoppedAt?.getTime() ?? last);
  }
  const lease = parts.leases.getLease(runLeaseName(runId));
  if (lease !== undefined) last = Math.max(last, lease.heartbeatAt.getTime());
  return Number.isFinite(last) ? new Date(last) : undefined;
}

/**
 * The run's active time in ms. `recorded` is the run as stored; `shown` its state as a person sees it
 * (`interrupted` for a run recorded as running whose process or workers are all gone).
 */
export function activeMsOf(
  parts: { workers: WorkerStore; leases: LeaseStore },
  recorded: RunRecord,
  shown: RunState,
  now: Date,
): number {
  const started = recorded.startedAt;
  if (recorded.state !== 'running' || started === null) return recorded.activeMs;
  const until = shown === 'running' ? now : lastSignOfWork(parts, recorded.id);
  return recorded.activeMs + Math.max(0, (until?.getTime() ?? started.getTime()) - started.getTime());
}
