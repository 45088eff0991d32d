// The API's job-status vocabulary. Pure and dependency-free so that the store (which turns statuses
// into task states) and the client (which parses them off the wire) read statuses the same way.

/** Where a job stands, whatever word the service used for it. */
export type JobPhase = 'success' | 'failed' | 'waiting';

const SUCCESS_WORDS = new Set(['success', 'completed', 'succeeded', 'done', 'finished']);
const FAILURE_WORDS = new Set(['failed', 'failure', 'error', 'cancelled', 'canceled']);

/**
 * The one reading of a job status. The documentation itself has said `completed` for `success` and
 * `WAITING` for a queued job; any word not known to end a job means "not finished yet", never an end.
 */
export function jobPhase(status: string): JobPhase {
  const word = status.trim().toLowerCase();
  if (SUCCESS_WORDS.has(word)) return 'success';
  if (FAILURE_WORDS.has(word)) return 'failed';
  return 'waiting';
}

/** The spec's four job statuses, in the order a job goes through them. */
export const DOCUMENTED_JOB_STATUSES = ['pending', 'processing', 'success', 'failed'] as const;
export type DocumentedJobStatus = (typeof DOCUMENTED_JOB_STATUSES)[number];

/** Exactly one of the spec's four statuses; anything else deserves one log line. */
export function isDocumentedJobStatus(status: string): status is DocumentedJobStatus {
  return (DOCUMENTED_JOB_STATUSES as readonly string[]).includes(status);
}
