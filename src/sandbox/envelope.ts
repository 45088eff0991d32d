// The response envelope of every endpoint: `{ code, msg, data? }`.
import type { Envelope as WireEnvelope } from '../api/schemas.js';
import type { RequestIssue } from '../catalog/types.js';

/** The envelope as the client reads it, without the fields only the quirks add. */
export type Envelope = Pick<WireEnvelope, 'code' | 'msg' | 'data'>;

export function success(data: unknown): Envelope {
  return { code: 0, msg: 'Success', data };
}

export function failure(code: number, msg: string): Envelope {
  return { code, msg };
}

/** One message naming every broken rule: `duration: must be 5 or 10, got 7; prompt: required`. */
export function issuesMessage(issues: readonly RequestIssue[]): string {
  return issues.map((issue) => (issue.path ? `${issue.path}: ${issue.message}` : issue.message)).join('; ');
}
