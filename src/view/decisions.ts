// Decisions from the page: the body of POST /api/runs/:run/decisions (checked by its schema, schemas.ts),
// then src/review's decide on a writable store connection opened for this one decision and closed at
// once (the view's own connection stays read-only; WAL lets the run go on meanwhile). The price of a
// re-roll is read on the view's read-only connection.

import { decide, type RerollPrice, rerollPrice } from '../review/index.js';
import { openStore, type Store } from '../store/index.js';
import type { DecisionBody } from './schemas.js';

/** Task ids the run does not have (a decision names only tasks of the run). */
export function unknownTasks(store: Store, runId: string, ids: readonly string[]): string[] {
  return ids.filter((id) => store.tasks.getTask(runId, id) === undefined);
}

export function priceOf(store: Store, runId: string, ids: readonly string[]): RerollPrice {
  return rerollPrice(store, runId, ids);
}

/** One decision on its own short-lived writable connection; the price check of a re-roll is inside decide. */
export async function decideOnce(stateFile: string, runId: string, body: DecisionBody) {
  const store = openStore(stateFile);
  try {
    return await decide(store, runId, body.taskIds, body.verdict, {
      ...(body.note !== undefined && { note: body.note }),
      ...(body.expectedVersions !== undefined && { expectedVersion: body.expectedVersions }),
    });
  } finally {
    store.close();
  }
}
