// Shapes of what the Media Generation API sends back. Parsing is deliberately tolerant where the
// spec is vague (extra fields pass through, statuses are any string) and strict only where money
// depends on it (a submission result must carry `img_uuid` and `cost`).
import { z } from 'zod';

/** Every response body: `{code, msg, data?}`. `msg` is missing in no documented answer, but an empty 500 body shows it can be empty. */
export const envelopeSchema = z.looseObject({
  code: z.number().int(),
  msg: z.string().optional().default(''),
  data: z.unknown().optional(),
});
export type Envelope = z.infer<typeof envelopeSchema>;

/** `data` of a successful generation POST. */
export const submissionSchema = z.looseObject({
  img_uuid: z.string().min(1),
  cost: z.number().finite().nonnegative(),
});
export type Submission = z.infer<typeof submissionSchema>;

/** One element of a job record's `json` array. For an oc-maker `json` item, `value` is the character sheet. */
export const resultItemSchema = z.looseObject({
  type: z.string(),
  value: z.union([z.string(), z.record(z.string(), z.unknown())]).nullish(),
  audio_id: z.string().nullish(),
  title: z.string().nullish(),
  audio_duration: z.number().nullish(),
  style: z.string().nullish(),
  lyrics: z.string().nullish(),
});
export type ResultItem = z.infer<typeof resultItemSchema>;

/**
 * `data` of GET /api/v1/jobs/detail and the body of callbacks. `status` is any string: the
 * documentation has shown `WAITING` and `completed`, and an unknown status means "not finished yet".
 */
export const jobRecordSchema = z.looseObject({
  img_uuid: z.string().min(1),
  status: z.string(),
  type: z.string().nullish(),
  job_type: z.string().nullish(),
  model_id: z.string().nullish(),
  start_time: z.string().nullish(),
  end_time: z.string().nullish(),
  json: z.array(resultItemSchema).nullish(),
  // notes.md: an ISO 8601 string; a number (epoch) is tolerated because the spec never showed the type.
  link_expired_at: z.union([z.string(), z.number()]).nullish(),
  duration: z.number().nullish(),
});
export type JobRecord = z.infer<typeof jobRecordSchema>;

/** `data` of GET /api/v1/user/tokens. Costs can be fractional (1.63 tokens), so the balance is any number. */
export const balanceSchema = z.looseObject({
  count: z.number().finite(),
});
export type Balance = z.infer<typeof balanceSchema>;

export const KNOWN_JOB_STATUSES = ['pending', 'processing', 'success', 'failed'] as const;
export type KnownJobStatus = (typeof KNOWN_JOB_STATUSES)[number];

export function isKnownJobStatus(status: string): status is KnownJobStatus {
  return (KNOWN_JOB_STATUSES as readonly string[]).includes(status);
}

/** Only `success` and `failed` end a job; anything else, known or not, is waited on. */
export function isFinalJobStatus(status: string): status is 'success' | 'failed' {
  return status === 'success' || status === 'failed';
}
