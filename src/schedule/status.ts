// What `status` shows of `mediabatch schedule`: every manifest a scheduler has watched, with its
// next firing and how its last run went.

import type { RunState, Store } from '../store/index.js';
import { scheduleLeaseName } from './scheduler.js';

export interface ScheduledManifest {
  manifestPath: string;
  /** Null when no firing is planned (never the case while a scheduler runs). */
  nextFireAt: Date | null;
  lastFiredAt: Date | null;
  lastRunId: string | null;
  lastRunState: RunState | null;
  /** A scheduler is running one of its firings right now. */
  firing: boolean;
  /** The next firing is in the past: no scheduler is watching this manifest any more. */
  overdue: boolean;
}

/** For `status`: the scheduled manifests, in path order. */
export function scheduledManifests(store: Store, now: Date): ScheduledManifest[] {
  return store.schedules.listSchedules().map((s) => {
    const lease = store.leases.getLease(scheduleLeaseName(s.manifestPath));
    const lastRun = s.lastRunId === null ? undefined : store.runs.getRun(s.lastRunId);
    return {
      manifestPath: s.manifestPath,
      nextFireAt: s.nextFireAt,
      lastFiredAt: s.lastFiredAt,
      lastRunId: s.lastRunId,
      lastRunState: lastRun?.state ?? null,
      firing: lease !== undefined && lease.expiresAt.getTime() > now.getTime(),
      // A minute of slack: the scheduler records the next firing just after the one that came due.
      overdue: s.nextFireAt !== null && s.nextFireAt.getTime() < now.getTime() - 60_000,
    };
  });
}
