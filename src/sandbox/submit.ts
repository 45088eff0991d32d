// Acceptance of one generation request, in the service's order: parse, rules, measure the input
// media, rules on the measured lengths, price, balance, quota, charge, job. Nothing is charged
// unless every step passes.
import { randomUUID } from 'node:crypto';
import type { Submission } from '../api/schemas.js';
import { expectedJobSeconds } from '../catalog/durations.js';
import { isLocalFile } from '../catalog/fields.js';
import { fromWireBody } from '../catalog/index.js';
import type {
  CatalogEntry,
  Endpoint,
  MediaDurations,
  PriceTable,
  RequestBody,
  RequestIssue,
} from '../catalog/types.js';
import type { Prober } from '../media/types.js';
import { roundTokens } from '../util/money.js';
import type { Account } from './account.js';
import { type Envelope, failure, issuesMessage, success } from './envelope.js';
import type { Jobs, SandboxJob } from './jobs.js';
import type { SandboxSettings } from './options.js';
import { createRandom, type Random } from './random.js';
import { plannedFailure } from './results.js';
import { planTiming } from './timing.js';

export interface SubmitContext {
  random: Random;
  account: Account;
  jobs: Jobs;
  settings: SandboxSettings;
  prices: PriceTable;
  prober: Prober;
  now: () => number;
  /** Job ids from the system's entropy instead of the seed, so runs never reuse an id. */
  uniqueIds: boolean;
}

export type SubmitOutcome =
  | { kind: 'answer'; status: number; body: Envelope }
  | { kind: 'drop' }
  /** What a gateway in front of the service sends when the backend did not answer in time: not the envelope. */
  | { kind: 'gateway-error'; status: number; text: string };

const answer = (status: number, body: Envelope): SubmitOutcome => ({ kind: 'answer', status, body });
const rejected = (issues: readonly RequestIssue[]): SubmitOutcome =>
  answer(400, failure(400, issuesMessage(issues)));

/**
 * The outcome of one submission; at once when the request has no input media to measure (most requests),
 * so the usual submission costs no promise.
 */
export function submit(
  ctx: SubmitContext,
  endpoint: Endpoint,
  wire: unknown,
): SubmitOutcome | Promise<SubmitOutcome> {
  // Drawn for every submission, whatever happens next, so one seed always gives one sequence.
  if (ctx.random.next() < ctx.settings.errorRate) return answer(500, failure(500, ''));

  const parsed = fromWireBody(endpoint, wire);
  if (!parsed.ok) return rejected(parsed.issues);
  const { entry } = parsed;
  const checked = entry.check(parsed.input);
  if (!checked.ok) return rejected(checked.issues);
  const body = checked.body;
  const localPaths = localPathIssues(body);
  if (localPaths.length > 0) return rejected(localPaths);

  const request: Checked = { entry, body, callbackUrl: parsed.callbackUrl, wire };
  const fields = fieldsToMeasure(entry, body);
  if (fields.length === 0) return accept(ctx, request, { media: {}, issues: [] });
  return measureMedia(fields, body, ctx.prober).then((measured) => accept(ctx, request, measured));
}

interface Checked {
  entry: CatalogEntry;
  body: RequestBody;
  callbackUrl: string | undefined;
  wire: unknown;
}

/**
 * The rest of acceptance once the input media are measured. Nothing here awaits: the balance read and
 * the charge must not interleave with another request.
 */
function accept(
  ctx: SubmitContext,
  { entry, body, callbackUrl, wire }: Checked,
  measured: { media: MediaDurations; issues: RequestIssue[] },
): SubmitOutcome {
  if (measured.issues.length > 0) return rejected(measured.issues);
  if (entry.model === 'song-replace-section' && typeof body.task_id === 'string') {
    const song = earlierSong(ctx, body.task_id, body.audio_id);
    if (typeof song !== 'number') return rejected([song]);
    // The catalog reads an earlier song's length from media.audio_id for the 50% rule.
    measured.media.audio_id = song;
  }
  const mediaIssues = entry.checkMedia(body, measured.media);
  if (mediaIssues.length > 0) return rejected(mediaIssues);

  const listPrice = entry.estimate(body, measured.media, ctx.prices).tokens;
  const cost = roundTokens(listPrice * (1 - ctx.settings.discount));
  const now = ctx.now();
  const refusal = ctx.account.refusal(cost, now);
  if (refusal) return answer(200, failure(refusal.code, refusal.msg));

  const job = createJob(ctx, {
    entry,
    body,
    media: measured.media,
    listPrice,
    cost,
    now,
    callbackUrl,
    request: wire,
  });
  ctx.jobs.add(job);

  const chargeThenError = ctx.random.next() < ctx.settings.chargeThenErrorRate;
  const dropConnection = ctx.random.next() < 0.5;
  if (chargeThenError) {
    job.answer = dropConnection ? 'connection-dropped' : 'error-502';
    // The spec's own 500 envelope says the service failed *before* charging, and clients rightly retry it;
    // a charge whose answer is lost looks like a dropped connection or a gateway's page instead.
    if (dropConnection) return { kind: 'drop' };
    return {
      kind: 'gateway-error',
      status: 502,
      text: '<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>\n',
    };
  }
  return answer(200, success({ img_uuid: job.id, cost } satisfies Submission));
}

/**
 * The catalog lets a manifest write `file:path` where a URL goes (the client uploads it and sends a link);
 * the service takes only links, so a `file:` value that reached the wire is refused like any non-URL,
 * before anything is charged: a client that forgot to replace one fails its tests here.
 */
function localPathIssues(body: RequestBody): RequestIssue[] {
  const issues: RequestIssue[] = [];
  for (const [field, value] of Object.entries(body)) {
    const items: Array<[string, unknown]> = Array.isArray(value)
      ? value.map((item: unknown, i): [string, unknown] => [`${field}.${i}`, item])
      : [[field, value]];
    for (const [path, item] of items) {
      if (isLocalFile(item))
        issues.push({ path, message: `must be an http(s) URL, got ${JSON.stringify(item)}` });
    }
  }
  return issues;
}

interface Accepted {
  entry: CatalogEntry;
  body: RequestBody;
  media: MediaDurations;
  listPrice: number;
  cost: number;
  now: number;
  callbackUrl: string | undefined;
  request: unknown;
}

function createJob(ctx: SubmitContext, accepted: Accepted): SandboxJob {
  const { entry, body, cost, now } = accepted;
  const seed = ctx.random.seed();
  // Drawn even when unused, so that random ids leave every other choice where the seed puts it.
  const seededId = ctx.random.uuid();
  const id = ctx.uniqueIds ? randomUUID() : seededId;
  const failRoll = ctx.random.next();
  const month = ctx.account.charge(cost, now);
  const timing = planTiming(
    expectedJobSeconds(entry, body),
    now,
    ctx.settings.speed,
    createRandom(seed ^ 0x5bd1e995),
  );
  const failure =
    plannedFailure(entry, body) ??
    (failRoll < ctx.settings.failRate ? 'the sandbox failed it (fail rate)' : null);
  return {
    id,
    entry,
    body,
    media: accepted.media,
    listPrice: accepted.listPrice,
    cost,
    month,
    createdAt: now,
    processingAt: timing.processingAt,
    endAt: timing.endAt,
    failure,
    seed,
    callbackUrl: accepted.callbackUrl,
    request: structuredClone(accepted.request),
    answer: 'ok',
    status: 'pending',
    refunded: 0,
    items: null,
    fileTokens: [],
    linkExpiresAt: null,
    callbacks: [],
  };
}

/** The length of a song made by an earlier successful job of this sandbox, or why it cannot be used. */
function earlierSong(ctx: SubmitContext, taskId: string, audioId: unknown): number | RequestIssue {
  ctx.jobs.advance(ctx.now());
  const job = ctx.jobs.get(taskId);
  if (job?.entry.model !== 'song-replace-section' || job.status !== 'success') {
    return {
      path: 'task_id',
      message: `no successful song task ${JSON.stringify(taskId)} in this sandbox; use the img_uuid of an earlier song-replace-section job, or audio_url`,
    };
  }
  const song = job.items?.find((item) => item.type === 'audio' && item.audio_id === audioId);
  if (!song || song.type === 'json' || song.audio_duration === undefined) {
    return {
      path: 'audio_id',
      message: `not a song of task ${taskId}; use one of its json[].audio_id values`,
    };
  }
  return song.audio_duration;
}

/** Fields whose length is billed or checked, and fields the spec caps in size (the face swap's image). */
function fieldsToMeasure(entry: CatalogEntry, body: RequestBody): CatalogEntry['mediaFields'] {
  return entry.mediaFields.filter(
    (f) => (f.needsDuration || Number.isFinite(f.maxBytes)) && typeof body[f.field] === 'string',
  );
}

/** Measures every input whose length is billed or checked, as the service does before charging. */
async function measureMedia(
  fields: CatalogEntry['mediaFields'],
  body: RequestBody,
  prober: Prober,
): Promise<{ media: MediaDurations; issues: RequestIssue[] }> {
  const media: MediaDurations = {};
  const issues: RequestIssue[] = [];
  await Promise.all(
    fields.map(async ({ field, kind, maxBytes, needsDuration }) => {
      const location = body[field] as string;
      if (!/^https?:\/\//i.test(location)) {
        issues.push({
          path: field,
          message: `must be an http(s) URL the sandbox can fetch, got ${JSON.stringify(location)}`,
        });
        return;
      }
      const probe = await prober(location, kind);
      if (probe.ok && probe.bytes !== undefined && probe.bytes > maxBytes) {
        issues.push({
          path: field,
          message: `the file is ${Math.round(probe.bytes / 1e5) / 10} MB; the limit is ${maxBytes / 1e6} MB`,
        });
      } else if (!needsDuration) {
        // Only the size matters here; an image the sandbox cannot fetch is not billed by it.
      } else if (probe.ok) media[field] = probe.seconds;
      else issues.push({ path: field, message: `could not measure the ${kind}'s duration: ${probe.reason}` });
    }),
  );
  // Promise.all completes in network order; sort so the message is the same every time.
  issues.sort((a, b) => a.path.localeCompare(b.path));
  return { media, issues };
}
