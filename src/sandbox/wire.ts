// What the wire shows of a job and of an envelope under the quirks in force. The jobs themselves
// keep the spec's statuses and shapes, so /_sandbox/state and the money never depend on a quirk.
import type { FileStore } from './files.js';
import { type SandboxJob, toRecord } from './jobs.js';
import { type Quirk, stringNumbers, successBeforeJsonMs } from './quirks.js';

export interface WireContext {
  quirks: ReadonlySet<Quirk>;
  files: FileStore;
  speed: () => number;
  /** A new `request_id` for each envelope. */
  requestId: () => string;
}

/** The job record of jobs/detail and callbacks, as the service would write it at `nowMs`. */
export function presentRecord(job: SandboxJob, nowMs: number, ctx: WireContext): Record<string, unknown> {
  const { quirks } = ctx;
  const canonical = toRecord(job);
  const record: Record<string, unknown> = { ...canonical };
  let items: Array<Record<string, unknown>> | null = canonical.json?.map((item) => ({ ...item })) ?? null;
  if (
    items !== null &&
    quirks.has('success-before-json') &&
    nowMs < job.endAt + successBeforeJsonMs(ctx.speed(), job.seed)
  ) {
    items = null;
    delete record.link_expired_at;
    delete record.duration;
  }
  if (items !== null) {
    items.forEach((item, index) => {
      const token = job.fileTokens[index];
      if (quirks.has('link-403') && token)
        item.value = `${String(item.value)}?sig=${ctx.files.signature(token)}`;
      // The spec's item types are image, audio and json: the service calls a video an image.
      if (quirks.has('wrong-extension') && item.type === 'video') item.type = 'image';
      if (quirks.has('per-item-expiry')) {
        if (record.link_expired_at !== undefined) item.link_expired_at = record.link_expired_at;
        if (record.duration !== undefined) item.duration = record.duration;
      }
    });
    if (quirks.has('per-item-expiry')) {
      delete record.link_expired_at;
      delete record.duration;
    }
  }
  record.json = items;
  if (quirks.has('waiting') && canonical.status === 'pending') record.status = 'WAITING';
  if (quirks.has('completed') && canonical.status === 'success') record.status = 'completed';
  return record;
}

/** An envelope (`{code, msg, data?}`) as the service sends it: numbers as strings, a request id. */
export function presentEnvelope(envelope: object, ctx: WireContext): Record<string, unknown> {
  let out: Record<string, unknown> = { ...envelope };
  if (ctx.quirks.has('string-numbers')) {
    const success = out.code === 0;
    out = stringNumbers(out) as Record<string, unknown>;
    if (success) out.msg = null;
  }
  if (ctx.quirks.has('request-id')) out.request_id = ctx.requestId();
  return out;
}
