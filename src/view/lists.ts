// The lists the page and the server share, served at /api/lists so that the page never keeps a copy:
// the task states in the order every surface counts them (awaiting_review included) and their labels, the review
// statuses a card's badge can show, and the orders of the results grid.

import { TASK_STATES, type ViewOrder } from '../store/index.js';
import { VIEW_API_VERSION } from './data.js';
import { STATE_LABELS } from './labels.js';

/** What `review.status` of a task can be (tasks.ts sets it). */
export const REVIEW_STATUSES = ['awaiting', 'waiting', 'approved', 'rejected'] as const;

const ORDERS: readonly ViewOrder[] = ['newest', 'id'];

/** GET /api/lists */
export function viewLists(): Record<string, unknown> {
  return {
    v: VIEW_API_VERSION,
    task_states: TASK_STATES,
    state_labels: STATE_LABELS,
    review_statuses: REVIEW_STATUSES,
    orders: ORDERS,
  };
}
