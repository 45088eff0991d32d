// Shapes of what the Media Generation API sends back. The real service has been seen sending numbers
// as strings, `msg: null`, statuses outside the spec and fields of surprising types, so parsing is
// tolerant everywhere: a field of the wrong type becomes undefined instead of failing the answer.
// Strictness is kept only where money depends on it: the `img_uuid` that identifies a paid task.
import { z } from 'zod';

const DECIMAL = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)$/;

/** A trimmed decimal string becomes the number it spells; anything else is left for `z.number()` to judge. */
function toNumber(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const trimmed = value.trim();
  return DECIMAL.test(trimmed) ? Number(trimmed) : value;
}

/** A finite number, also when sent as a numeric string (`"1.63"`, `" 42 "`). */
export const looseNumber = z.preprocess(toNumber, z.number());

/** `schema`, or undefined when the field is missing or of another type: one odd field never fails a record. */
function tolerant<T extends z.ZodType>(schema: T) {
  return schema.optional().catch(undefined);
}

const optionalNumber = tolerant(looseNumber);
const optionalString = tolerant(z.string());
/** Ids are strings, but a JSON number is an id too (`audio_id: 17`). */
const looseId = z.union([z.string(), z.number().finite().transform(String)]);

/** Nothing that could break a log line or a URL query: no control, format or unassigned characters. */
const PRINTABLE = /^[^\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}]+$/u;
export const MAX_IMG_UUID_LENGTH = 200;

/** A task identifier the client can store, print and poll with; a numeric one is stringified. */
export const imgUuidSchema = looseId.pipe(
  z
    .string()
    .min(1)
    .max(MAX_IMG_UUID_LENGTH)
    .regex(PRINTABLE, 'must be printable characters')
    .refine((s) => s.trim() !== '', 'must not be blank'),
);

/** A request id for log lines: short, printable, or nothing. */
export const requestIdSchema = tolerant(looseId.pipe(z.string().min(1).max(200).regex(PRINTABLE)));

/**
 * Every response body: `{code, msg, data?}`. An object with an integer `code` (a numeric string
 * counts) is well-formed; `msg` missing, null or of another type reads as ''. Unknown fields pass.
 */
export const envelopeSchema = z.looseObject({
  code: looseNumber.pipe(z.number().int()),
  msg: z
    .string()
    .nullish()
    .catch(undefined)
    .transform((m) => m ?? ''),
  data: z.unknown().optional(),
  request_id: requestIdSchema,
});
export type Envelope = z.infer<typeof envelopeSchema>;

/**
 * `data` of an accepted generation POST. Only `img_uuid` is required: an accepted task without a
 * readable `cost` was still charged, and rejecting it would lose the paid result. A negative cost
 * is no charge anyone can book, so it reads as unknown too.
 */
export const submissionSchema = z.looseObject({
  img_uuid: imgUuidSchema,
  cost: tolerant(looseNumber.pipe(z.number().nonnegative())),
  request_id: requestIdSchema,
});
export type Submission = z.infer<typeof submissionSchema>;

/** `link_expired_at`: an ISO 8601 string (notes.md), an epoch number, or that number as a string. */
const expirySchema = tolerant(z.union([looseNumber, z.string()]));

/**
 * One element of a job record's `json` array. `value` is a URL, or for an oc-maker `json` item the
 * character sheet (an object). A missing `type` reads as ''.
 */
export const resultItemSchema = z.looseObject({
  type: z.string().catch(''),
  value: tolerant(z.union([z.string(), z.record(z.string(), z.unknown())])),
  audio_id: tolerant(looseId),
  title: optionalString,
  audio_duration: optionalNumber,
  style: optionalString,
  lyrics: optionalString,
  link_expired_at: expirySchema,
  duration: optionalNumber,
});
export type ResultItem = z.infer<typeof resultItemSchema>;

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The `json` field as a list of items. A bare string element is taken as the URL of an untyped item
 * (a paid file is never dropped for its wrapping); elements that are neither are left out. A single
 * item object not wrapped in an array is read as a list of one; anything else reads as absent.
 */
function toItems(value: unknown): unknown {
  if (value === null || value === undefined) return value;
  const list = Array.isArray(value) ? value : isPlainObject(value) && 'value' in value ? [value] : undefined;
  if (list === undefined) return undefined;
  return list.flatMap((item) =>
    typeof item === 'string' ? [{ type: '', value: item }] : isPlainObject(item) ? [item] : [],
  );
}

/**
 * `data` of GET /api/v1/jobs/detail and the body of callbacks. Usable when it has an `img_uuid` and
 * a string `status`; every other field is optional. Statuses are any string: read them with
 * `jobPhase`.
 */
export const jobRecordSchema = z.looseObject({
  img_uuid: imgUuidSchema,
  status: z.string(),
  type: optionalString,
  job_type: optionalString,
  model_id: tolerant(looseId),
  start_time: optionalString,
  end_time: optionalString,
  json: z.preprocess(toItems, z.array(resultItemSchema).nullish()).catch(undefined),
  link_expired_at: expirySchema,
  duration: optionalNumber,
  request_id: requestIdSchema,
});
export type JobRecord = z.infer<typeof jobRecordSchema>;

/** `data` of GET /api/v1/user/tokens. Costs can be fractional (1.63 tokens), so the balance is any number. */
export const balanceSchema = z.looseObject({
  count: looseNumber,
  request_id: requestIdSchema,
});
export type Balance = z.infer<typeof balanceSchema>;

// The status vocabulary has its own pure module so the store can read it without the wire schemas.
export { isDocumentedJobStatus, type JobPhase, jobPhase } from './job-status.js';
