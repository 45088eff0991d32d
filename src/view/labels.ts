// Each task state in a person's words: `status` prints them and the view's page shows them (served at
// /api/lists), so that a state reads the same everywhere. `awaiting_review` is a task waiting for an
// upstream's review, not a result awaiting a decision (the review's own words say that).

import type { TaskState } from '../store/index.js';

export const STATE_LABELS: Readonly<Record<TaskState, string>> = {
  pending: 'pending',
  awaiting_review: 'awaiting review (of an upstream)',
  submitting: 'submitting',
  in_doubt: 'in doubt',
  submitted: 'submitted',
  running: 'running',
  stalled: 'stalled',
  downloading: 'downloading',
  unfetched: 'unfetched (paid, not on disk)',
  done: 'done',
  failed: 'failed',
  rejected: 'rejected',
  blocked: 'blocked',
  lost: 'lost (paid, result gone)',
  skipped: 'skipped (upstream rejected)',
};
