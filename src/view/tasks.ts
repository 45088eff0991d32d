// The task list (a page by keyset) and one task in full, as the JSON API answers them. The request is
// shown as sent with its secrets taken out: signed link queries and the callback address.

import { isBucketLocation } from '../results/output.js';
import {
  type FileRecord,
  type RunRecord,
  type Store,
  type TaskState,
  type ViewCursor,
  type ViewOrder,
  type ViewTaskRow,
  withoutSignedQueries,
} from '../store/index.js';
import { roundTokens } from '../util/money.js';
import { scrub } from '../util/secrets.js';
import { VIEW_API_VERSION } from './data.js';
import type { TaskListQuery } from './schemas.js';
import { scrubbed } from './scrubbed.js';

const DEFAULT_LIMIT = 48;

/** The URL of a result file: by run, task and index, which the server resolves through the store. */
export function fileUrl(f: FileRecord): string {
  return `/files/${encodeURIComponent(f.runId)}/${encodeURIComponent(f.taskId)}/${f.index}`;
}

function fileJson(f: FileRecord): Record<string, unknown> {
  return {
    index: f.index,
    kind: f.kind,
    name: f.path.split('/').pop() ?? '',
    bytes: f.bytes,
    sha256: f.sha256,
    url: fileUrl(f),
    in_bucket: isBucketLocation(f.path),
    completed_at: f.completedAt.toISOString(),
  };
}

/** What a card shows beyond the files: an oc-maker sheet, songs' titles and lyrics (from the job record). */
export function extrasOf(record: unknown): { sheet?: unknown; songs?: Array<Record<string, unknown>> } {
  const items = (record as { json?: unknown } | null)?.json;
  if (!Array.isArray(items)) return {};
  const out: { sheet?: unknown; songs?: Array<Record<string, unknown>> } = {};
  for (const item of items as Array<Record<string, unknown> | null>) {
    if (item === null || typeof item !== 'object') continue;
    if (item['type'] === 'json' && item['value'] !== null && typeof item['value'] === 'object') {
      out.sheet = item['value'];
    }
    if (typeof item['title'] === 'string' || typeof item['lyrics'] === 'string') {
      const song: Record<string, unknown> = {};
      for (const key of ['title', 'lyrics', 'style', 'audio_duration']) {
        if (item[key] !== undefined) song[key] = item[key];
      }
      out.songs = [...(out.songs ?? []), song];
    }
  }
  return out;
}

function cardExtras(store: Store, t: ViewTaskRow): Record<string, unknown> {
  const wants = t.model === 'oc-maker' || t.files.some((f) => f.kind === 'audio');
  if (!wants || t.imgUuid === null) return {};
  const record = store.jobs.jobEvents(t.imgUuid).at(-1)?.record;
  return scrubbed(extrasOf(record === undefined ? null : withoutSignedQueries(record)));
}

function taskRowJson(t: ViewTaskRow, store: Store, runId: string): Record<string, unknown> {
  return {
    ...cardExtras(store, t),
    id: t.taskId,
    seq: t.seq,
    model: t.model,
    state: t.state,
    error: t.error === null ? null : scrub(t.error),
    text: scrubbed(t.text),
    estimate: roundTokens(t.estimate),
    estimate_max: roundTokens(t.estimateMax),
    charged: roundTokens(t.charged),
    refunded: roundTokens(t.refunded),
    net: roundTokens(t.charged - t.refunded),
    submitted_at: t.submittedAt,
    finished_at: t.finishedAt,
    updated_at: t.updatedAt,
    files: t.files.map(fileJson),
    review: t.review ? reviewJson(t) : null,
    ...(t.state === 'awaiting_review' ? { waits_for_review: waitsForReview(store, runId, t.taskId) } : {}),
  };
}

/** The reviewed upstreams a task held for a person waits on: done, and nobody decided on them yet. */
function waitsForReview(store: Store, runId: string, taskId: string): string[] {
  return store.viewReads
    .upstreamsWithState(runId, taskId)
    .filter((u) => {
      if (u.state !== 'done') return false;
      const up = store.tasks.getTask(runId, u.task);
      return up?.review === true && up.verdict === null;
    })
    .map((u) => u.task);
}

/** Where a reviewed task's result stands: the page's badge, and the version a decision is taken on. */
function reviewJson(t: {
  state: TaskState;
  verdict: 'approved' | 'rejected' | null;
  attempt: number;
  version: number;
}): Record<string, unknown> {
  const status = t.verdict ?? (t.state === 'done' ? 'awaiting' : 'waiting');
  return { status, attempt: t.attempt, version: t.version };
}

function encodeCursor(c: ViewCursor | null): string | null {
  return c === null ? null : Buffer.from(JSON.stringify(c)).toString('base64url');
}

/** GET /api/runs/:run/tasks */
export function taskList(store: Store, runId: string, query: TaskListQuery): Record<string, unknown> {
  const order: ViewOrder = query.order ?? 'newest';
  const awaiting = query.review === 'awaiting';
  const states = query.state ?? (awaiting ? (['done'] as TaskState[]) : undefined);
  const page = store.viewReads.taskPage({
    runId,
    order,
    limit: query.limit ?? DEFAULT_LIMIT,
    ...(states ? { states } : {}),
    ...(query.model ? { model: query.model } : {}),
    ...(awaiting ? { awaiting } : {}),
    ...(query.q ? { q: query.q } : {}),
    ...(query.cursor ? { after: query.cursor } : {}),
  });
  return {
    v: VIEW_API_VERSION,
    run: runId,
    order,
    tasks: page.tasks.map((t) => taskRowJson(t, store, runId)),
    next_cursor: encodeCursor(page.next),
  };
}

/** The request body as sent, without signed link queries, the callback address or a registered secret. */
function requestAsSent(wireBody: string): unknown {
  let body: unknown;
  try {
    body = JSON.parse(scrub(wireBody));
  } catch {
    return null;
  }
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    delete (body as Record<string, unknown>)['custom_callback_url'];
  }
  return withoutSignedQueries(body);
}

/** GET /api/runs/:run/tasks/:task; undefined when the run has no such task. */
export function taskDetail(
  store: Store,
  run: RunRecord,
  taskId: string,
): Record<string, unknown> | undefined {
  const t = store.tasks.getTask(run.id, taskId);
  if (t === undefined) return undefined;
  const reads = store.viewReads;
  const events = t.imgUuid === null ? [] : store.jobs.jobEvents(t.imgUuid);
  const latest = events.at(-1);
  return {
    v: VIEW_API_VERSION,
    run: run.id,
    task: {
      id: t.taskId,
      seq: t.seq,
      model: t.model,
      endpoint: t.endpoint,
      state: t.state,
      img_uuid: t.imgUuid,
      error: t.error === null ? null : scrub(t.error),
      job_status: t.jobStatus,
      estimate: t.estimate,
      planned_estimate: t.plannedEstimate,
      cost: t.cost,
      refunded: t.refunded,
      cost_assumed: t.costAssumed,
      recovered: t.recovered,
      retries: t.retries,
      submitted_at: t.submittedAt?.toISOString() ?? null,
      finished_at: t.finishedAt?.toISOString() ?? null,
      job_duration: t.jobDuration,
      polls: t.pollCount,
      last_polled_at: t.lastPolledAt?.toISOString() ?? null,
    },
    request: requestAsSent(t.wireBody),
    attempts: store.submissions.attemptsOf(run.id, taskId).map((a) => ({
      attempt: a.attemptNo,
      sent_at: a.sentAt.toISOString(),
      answered_at: a.answeredAt?.toISOString() ?? null,
      outcome: a.outcome,
      http_status: a.httpStatus,
      code: a.code,
      message: a.message === null ? null : scrub(a.message),
      img_uuid: a.imgUuid,
    })),
    ledger: reads.ledgerOfTask(run.id, taskId).map((l) => ({
      kind: l.kind,
      tokens: l.tokens,
      at: l.at,
      img_uuid: l.imgUuid,
      assumed: l.assumed,
    })),
    job: {
      events: events.map((e) => ({ status: e.status, at: e.at.toISOString(), source: e.source })),
      record:
        latest?.record === undefined || latest.record === null
          ? null
          : scrubbed(withoutSignedQueries(latest.record)),
    },
    files: store.files.filesOfTask(run.id, taskId).map(fileJson),
    review: t.review
      ? {
          ...reviewJson(t),
          decisions: store.reviews
            .decisionsOf(run.id)
            .filter((d) => d.taskId === taskId)
            .map((d) => ({
              verdict: d.verdict,
              attempt: d.attempt,
              note: d.note === null ? null : scrub(d.note),
              by: d.decidedBy,
              at: d.decidedAt.toISOString(),
            })),
        }
      : null,
    upstreams: reads.upstreamsWithState(run.id, taskId),
    downstreams: reads.downstreamsWithState(run.id, taskId),
  };
}
