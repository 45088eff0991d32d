// Who holds a run: a lease row in the state database, named after the run, renewed while it goes.

import { holderIsDead, type RunRecord, type RunState, runLeaseName, type Store } from '../store/index.js';

export { holderIsDead, runLeaseName };

/**
 * The state to show for a run: one recorded as `running` whose lease nobody alive holds and that has no
 * live worker (kill -9, a crash, a power loss) is `interrupted`, which is what the next `run` will treat it as.
 */
export function shownRunState(store: Store, run: RunRecord, now: Date = new Date()): RunState {
  if (run.state !== 'running') return run.state;
  // A fleet's run (PostgreSQL) is running while one of its workers is alive.
  if (store.workers.list(run.id).some((w) => w.stoppedAt === undefined && !w.lost)) return 'running';
  const lease = store.leases.getLease(runLeaseName(run.id));
  if (lease === undefined || lease.expiresAt.getTime() <= now.getTime() || holderIsDead(lease.holder)) {
    return 'interrupted';
  }
  return 'running';
}
