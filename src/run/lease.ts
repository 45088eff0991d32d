// Who holds a run: a lease row in the state database, named after the run, renewed while it goes.

import { hostname } from 'node:os';
import type { RunRecord, RunState, Store } from '../store/index.js';

/** The lease a run's driver holds. */
export function runLeaseName(runId: string): string {
  return `run:${runId}`;
}

/**
 * True only when the holder is a process of this machine that no longer exists. A holder elsewhere,
 * or a pid that is alive (even if reused by another program), keeps its lease until it expires.
 */
export function holderIsDead(holder: string): boolean {
  const m = /^(\d+)@(.*)#[^#]*$/.exec(holder);
  if (!m || m[2] !== hostname()) return false;
  const pid = Number(m[1]);
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/**
 * The state to show for a run: one recorded as `running` whose lease nobody alive holds (kill -9, a
 * crash, a power loss) is `interrupted`, which is what the next `run` will treat it as.
 */
export function shownRunState(store: Store, run: RunRecord, now: Date = new Date()): RunState {
  if (run.state !== 'running') return run.state;
  const lease = store.leases.getLease(runLeaseName(run.id));
  if (lease === undefined || lease.expiresAt.getTime() <= now.getTime() || holderIsDead(lease.holder)) {
    return 'interrupted';
  }
  return 'running';
}
