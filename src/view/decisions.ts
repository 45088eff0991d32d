// Decisions from the page (issue 25): the body of POST /api/runs/:run/decisions checked field by field,
// then src/review's decide on a writable store connection opened for this one decision and closed at
// once (the view's own connection stays read-only; WAL lets the run go on meanwhile). The price of a
// re-roll is read on the view's read-only connection.

import { decide, type RerollPrice, rerollPrice, type Verdict } from '../review/index.js';
import { openStore, type Store, VERDICTS } from '../store/index.js';
import { QueryError } from './tasks.js';

export interface DecisionBody {
  taskIds: string[];
  verdict: Verdict;
  note?: string;
  /** Per task, the version the page was shown: a task that moved since is refused with the reason. */
  expectedVersions?: Record<string, number>;
}

const MAX_TASKS = 500;
const MAX_NOTE = 2000;

/** The body as sent by the page or a script; a QueryError (400) names the field that is wrong. */
export function parseDecision(body: unknown): DecisionBody {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new QueryError('body: expected a JSON object {taskIds, verdict, note?, expectedVersions?}');
  }
  const b = body as Record<string, unknown>;
  const ids = b['taskIds'];
  if (!Array.isArray(ids) || ids.length === 0 || ids.length > MAX_TASKS) {
    throw new QueryError(`taskIds: expected a list of 1 to ${MAX_TASKS} task ids`);
  }
  if (!ids.every((id): id is string => typeof id === 'string' && id !== '')) {
    throw new QueryError('taskIds: every task id must be a non-empty string');
  }
  const verdict = b['verdict'];
  if (typeof verdict !== 'string' || !(VERDICTS as readonly string[]).includes(verdict)) {
    throw new QueryError(`verdict: expected one of ${VERDICTS.join(', ')}, got ${JSON.stringify(verdict)}`);
  }
  const out: DecisionBody = { taskIds: [...new Set(ids)], verdict: verdict as Verdict };
  const note = b['note'];
  if (note !== undefined && note !== null && note !== '') {
    if (typeof note !== 'string' || note.length > MAX_NOTE) {
      throw new QueryError(`note: expected text of at most ${MAX_NOTE} characters`);
    }
    out.note = note;
  }
  const versions = b['expectedVersions'];
  if (versions !== undefined && versions !== null) {
    if (typeof versions !== 'object' || Array.isArray(versions)) {
      throw new QueryError('expectedVersions: expected an object {taskId: version}');
    }
    for (const [id, v] of Object.entries(versions)) {
      if (!Number.isInteger(v)) throw new QueryError(`expectedVersions.${id}: expected a whole number`);
    }
    out.expectedVersions = versions as Record<string, number>;
  }
  return out;
}

/** Task ids from `?taskIds=a,b` (commas) for the price. */
export function parseTaskIds(text: string | undefined): string[] {
  const ids = (text ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (ids.length === 0 || ids.length > MAX_TASKS) {
    throw new QueryError(`taskIds: expected 1 to ${MAX_TASKS} task ids, separated by commas`);
  }
  return [...new Set(ids)];
}

/** Task ids the run does not have (a decision names only tasks of the run). */
export function unknownTasks(store: Store, runId: string, ids: readonly string[]): string[] {
  return ids.filter((id) => store.getTask(runId, id) === undefined);
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
