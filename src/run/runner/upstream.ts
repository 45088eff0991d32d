// A chained task's references filled in just before it is submitted: each `{{after…}}` takes
// its value from the upstream's job record, whose links are fresh (a record older than the links' life,
// or any record of an earlier process, is fetched again); the filled-in request is checked against its
// model's rules, its media measured and priced exactly, and stored before the intent. Nothing is sent
// for a request that breaks a rule: the task is rejected without a POST, nothing charged.

import type { JobRecord } from '../../api/schemas.js';
import { DEFAULT_PRICES } from '../../catalog/prices.js';
import type { CatalogEntry, MediaDurations, RequestBody } from '../../catalog/types.js';
import { toWireBody } from '../../catalog/wire.js';
import { fillReferences, type Output, parseReference, referencesIn, SINGLE } from '../../manifest/after.js';
import type { TaskRecord } from '../../store/index.js';
import { toMicro } from '../../util/money.js';
import { planResults } from '../results.js';
import type { RunCore } from './core.js';
import { expiryOf } from './upstream-records.js';

/** A link is passed on only if it lives at least this long after the downstream is submitted. */
const LINK_MARGIN_MS = 30 * 60_000;

export type Prepared =
  | { type: 'ready'; task: TaskRecord }
  /** The filled-in request breaks a rule, or the upstream's result lacks what is referenced. */
  | { type: 'rejected'; reason: string }
  /** The upstream's record could not be had now (the API is unreachable): left pending for later. */
  | { type: 'later'; reason: string };

/** What one upstream gives its downstreams: its record (links fresh) and what the record means. */
interface UpstreamResult {
  task: TaskRecord;
  entry: CatalogEntry;
  record: JobRecord;
}

/** Fills in a pending chained task's references; a task without any is ready as it is. */
export async function prepareChained(
  core: RunCore,
  task: TaskRecord,
  entry: CatalogEntry,
): Promise<Prepared> {
  const { store } = core.deps;
  const { runId } = core.opts;
  const planned = JSON.parse(task.plannedBody ?? task.wireBody) as RequestBody;
  const paths = referencesIn(planned);
  if (paths.size === 0) return { type: 'ready', task };

  const links = store.chains.upstreamsOf(runId, task.taskId);
  const names = links.some((l) => l.name !== SINGLE) ? links.map((l) => l.name) : undefined;
  const upstreams = new Map<string, UpstreamResult>();
  for (const link of links) {
    const up = store.tasks.getTask(runId, link.upstreamId);
    if (up === undefined || up.state !== 'done' || up.imgUuid === null) {
      return { type: 'later', reason: `waits for ${link.upstreamId}, which is not done` };
    }
    const upEntry = core.entryOf(up.model);
    if (upEntry === undefined)
      return { type: 'rejected', reason: `${link.upstreamId}: unknown model ${up.model}` };
    const record = await freshRecord(core, up.imgUuid);
    if (record.type === 'expired') {
      return {
        type: 'rejected',
        reason: `not sent: ${link.upstreamId}: ${record.reason}; submit ${link.upstreamId} again for a new result (change it and run with --accept-changes)`,
      };
    }
    if (record.type !== 'ok') return { type: 'later', reason: `${link.upstreamId}: ${record.reason}` };
    upstreams.set(link.name, { task: up, entry: upEntry, record: record.record });
  }

  const missing: string[] = [];
  const value = (path: string): unknown => {
    const parsed = parseReference(path.split('.'), names);
    const up = parsed.ok ? upstreams.get(parsed.reference.name) : undefined;
    const found = parsed.ok && up ? resultValue(up, parsed.reference.output) : undefined;
    // A sheet field written as null holds nothing to send: like a field the sheet does not have.
    if (found === undefined || found === null)
      missing.push(`{{${path}}}${up ? ` (${up.task.taskId}'s result has none)` : ''}`);
    return found;
  };
  const filled = fillReferences(planned, value) as RequestBody;
  if (missing.length > 0) {
    return { type: 'rejected', reason: `not sent: cannot fill in ${missing.join(', ')}` };
  }
  const { model: _model, ...fields } = filled;
  const checked = entry.check(fields);
  if (!checked.ok) {
    return { type: 'rejected', reason: `not sent: the filled-in request ${issuesText(checked.issues)}` };
  }
  const body = checked.body;
  const media = await measure(core, entry, body, upstreams);
  const ruleIssues = entry.checkMedia(body, media.durations);
  if (ruleIssues.length > 0) {
    return { type: 'rejected', reason: `not sent: with its upstream's result, ${issuesText(ruleIssues)}` };
  }
  const estimate = entry.estimate(body, media.durations, core.opts.prices ?? DEFAULT_PRICES);
  if (media.notes.length > 0) estimate.basis = `${estimate.basis}; ${media.notes.join('; ')}`;
  const wire = toWireBody(entry, body);
  const ready = await core.writes.write(() =>
    store.chains.fillIn(runId, task.taskId, JSON.stringify(wire), estimate),
  );
  // The run's estimate tightens as the plan's range of this task becomes its exact price.
  core.money.estimateMoved(toMicro(ready.estimate.tokens) - toMicro(task.estimate.tokens));
  return { type: 'ready', task: ready };
}

function issuesText(issues: ReadonlyArray<{ path: string; message: string }>): string {
  return issues.map((i) => (i.path === '' ? i.message : `input.${i.path}: ${i.message}`)).join('; ');
}

async function freshRecord(
  core: RunCore,
  imgUuid: string,
): Promise<{ type: 'ok'; record: JobRecord } | { type: 'error' | 'expired'; reason: string }> {
  const until = core.now() + LINK_MARGIN_MS;
  const known = core.upstreamRecords.fresh(imgUuid, until);
  if (known) return { type: 'ok', record: known };
  const outcome = await core.jobRecordAgain(imgUuid);
  if (outcome.type !== 'ok') {
    const why = outcome.type === 'retryable' ? outcome.reason : outcome.message;
    return { type: 'error', reason: `its job record could not be fetched again for fresh links: ${why}` };
  }
  const expiresAt = expiryOf(outcome.value);
  if (expiresAt !== undefined && expiresAt <= core.now()) {
    // The service gives no fresh links for this job: sending a dead link would only fail the downstream job.
    return {
      type: 'expired',
      reason: `its result links expired at ${new Date(expiresAt).toISOString()} and a fresh job record does not renew them`,
    };
  }
  core.upstreamRecords.remember(imgUuid, outcome.value, core.now());
  return { type: 'ok', record: outcome.value };
}

/** The value a reference names in an upstream's result; undefined when the result has none. */
function resultValue(up: UpstreamResult, output: Output): unknown {
  const body = JSON.parse(up.task.wireBody) as RequestBody;
  const plan = planResults(up.entry, body, up.record.json);
  // Every file a model makes is of one kind (the character sheet is not a file): what the model makes
  // decides, not the item's `type`, which the service may get wrong (a video typed `image`).
  const fileKind = up.entry.result.items.find((kind) => kind !== 'json');
  switch (output.kind) {
    case 'image':
    case 'video':
    case 'audio':
      return fileKind === output.kind ? plan.files[0]?.url : undefined;
    case 'file':
      return plan.files[output.n - 1]?.url;
    case 'img_uuid':
      return up.task.imgUuid ?? undefined;
    case 'song': {
      const song = plan.songs[output.n - 1];
      const found = song?.[output.field];
      return found === null ? undefined : found;
    }
    case 'sheet': {
      const sheet = plan.sheet;
      if (sheet === null || typeof sheet !== 'object' || Array.isArray(sheet)) return undefined;
      return Object.hasOwn(sheet, output.key) ? (sheet as Record<string, unknown>)[output.key] : undefined;
    }
  }
}

/** The filled-in request's media lengths: measured over HTTP, or a song's length from its record. */
async function measure(
  core: RunCore,
  entry: CatalogEntry,
  body: RequestBody,
  upstreams: ReadonlyMap<string, UpstreamResult>,
): Promise<{ durations: MediaDurations; notes: string[] }> {
  const durations: MediaDurations = {};
  const notes: string[] = [];
  // Local `file:` inputs are measured through the links the service will get (uploaded before the run).
  const linked = core.opts.inputLinks ? await core.opts.inputLinks(body) : body;
  const needs = entry.mediaFields
    .filter((f) => f.needsDuration && typeof linked[f.field] === 'string')
    .map((f) => ({ field: f.field, location: linked[f.field] as string, kind: f.kind }));
  if (needs.length > 0) {
    const measured = await core.measure(needs.map(({ location, kind }) => ({ location, kind })));
    for (const need of needs) {
      const result = measured.get(need.location);
      if (result?.ok) durations[need.field] = result.seconds;
      else notes.push(`${need.field}: ${result?.reason ?? 'not measured'}`);
    }
  }
  // A song named by task_id + audio_id: its length is in the upstream's record (see the song entry).
  const song = typeof body.audio_id === 'string' ? findSong(upstreams, body.audio_id) : undefined;
  if (song !== undefined) durations.audio_id = song;
  return { durations, notes };
}

function findSong(upstreams: ReadonlyMap<string, UpstreamResult>, audioId: string): number | undefined {
  for (const up of upstreams.values()) {
    const plan = planResults(up.entry, JSON.parse(up.task.wireBody) as RequestBody, up.record.json);
    const song = plan.songs.find((s) => s.audio_id === audioId);
    if (typeof song?.audio_duration === 'number') return song.audio_duration;
  }
  return undefined;
}
