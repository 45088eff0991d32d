// Jobs and their life cycle: pending -> processing -> success | failed, driven by the injected clock.
// A job's whole future (timing, failure, result content) is drawn when it is accepted; looking at
// it later only reveals how far along that future the clock has moved.
import type { DocumentedJobStatus } from '../api/job-status.js';
import type { JobRecord as WireJobRecord } from '../api/schemas.js';
import type { CatalogEntry, MediaDurations, RequestBody } from '../catalog/types.js';
import type { Account } from './account.js';
import type { FileStore } from './files.js';
import { createRandom } from './random.js';
import { planItems, type ResultItem } from './results.js';

/** The sandbox's jobs speak only the spec's four statuses; the quirks reword them on the wire. */
export type JobStatus = DocumentedJobStatus;

/** How the submission was answered; anything but `ok` is a charge the client may not know about. */
export type SubmitAnswer = 'ok' | 'error-502' | 'connection-dropped';

export interface CallbackAttempt {
  at: string;
  statusCode?: number;
  error?: string;
}

export interface CallbackLog {
  status: JobStatus;
  attempts: CallbackAttempt[];
  outcome: 'sending' | 'delivered' | 'dropped';
}

export interface SandboxJob {
  readonly id: string;
  readonly entry: CatalogEntry;
  readonly body: RequestBody;
  readonly media: MediaDurations;
  readonly listPrice: number;
  readonly cost: number;
  /** Month of the quota the charge counts against. */
  readonly month: string;
  readonly createdAt: number;
  /** Moved later, with endAt, when the account's concurrency limit keeps the job queued. */
  processingAt: number;
  endAt: number;
  /** Why the job will fail, decided at acceptance; null when it will succeed. */
  readonly failure: string | null;
  /** Seeds the job's own generator for its result content. */
  readonly seed: number;
  readonly callbackUrl: string | undefined;
  /** The request body as it arrived (never the key: that travels in a header, which is not kept). */
  readonly request: unknown;
  answer: SubmitAnswer;
  status: JobStatus;
  refunded: number;
  items: ResultItem[] | null;
  /** File token of each item of `items`, null for an item without a file. */
  fileTokens: Array<string | null>;
  linkExpiresAt: number | null;
  readonly callbacks: CallbackLog[];
}

/**
 * The job record of the wire (`data` of jobs/detail and the body of callbacks): the client's record,
 * with what the sandbox always fills and the forms it writes (ISO times, seconds as a number).
 */
export type JobRecord = WireJobRecord & {
  status: JobStatus;
  type: string;
  job_type: string;
  start_time: string;
  end_time?: string;
  model_id: string;
  json: ResultItem[] | null;
  link_expired_at?: string;
  duration?: number;
};

export function toRecord(job: SandboxJob): JobRecord {
  const record: JobRecord = {
    img_uuid: job.id,
    status: job.status,
    type: job.entry.kind,
    job_type: job.entry.kind,
    start_time: new Date(job.createdAt).toISOString(),
    model_id: job.entry.model,
    json: job.status === 'success' ? job.items : null,
  };
  if (job.status === 'success' || job.status === 'failed')
    record.end_time = new Date(job.endAt).toISOString();
  if (job.status === 'success') {
    if (job.linkExpiresAt !== null) record.link_expired_at = new Date(job.linkExpiresAt).toISOString();
    const workSeconds = (job.endAt - job.processingAt) / 1000;
    // oc-maker's duration covers the image stage only; the sandbox gives the text stage the first half.
    record.duration =
      Math.round((job.entry.model === 'oc-maker' ? workSeconds / 2 : workSeconds) * 1000) / 1000;
  }
  return record;
}

export interface JobsDeps {
  account: Account;
  files: FileStore;
  /** The link of a result file: item `index` of a job, registered under `token`. */
  link: (token: string, index: number) => string;
  linkTtlSeconds: () => number;
  /** Jobs processing at once at most; null for no limit. */
  concurrency: () => number | null;
  /** Called on each change to processing, success and failed, in order. */
  onChange: (job: SandboxJob) => void;
}

export interface ConcurrencyState {
  limit: number | null;
  /** Jobs processing now. */
  running: number;
  /** Jobs queued (pending) now, whether for their own queue time or for a free slot. */
  waiting: number;
  /** Most jobs ever processing at once; exact under a limit, where starts and ends replay in time order. */
  peak: number;
}

export class Jobs {
  readonly #all = new Map<string, SandboxJob>();
  readonly #active = new Set<SandboxJob>();
  readonly #deps: JobsDeps;
  #peak = 0;
  #running = 0;

  constructor(deps: JobsDeps) {
    this.#deps = deps;
  }

  add(job: SandboxJob): void {
    this.#all.set(job.id, job);
    this.#active.add(job);
  }

  /** A finished job of an earlier sandbox (src/sandbox/journal.ts): known, never advanced again. */
  restore(job: SandboxJob): void {
    if (!this.#all.has(job.id)) this.#all.set(job.id, job);
  }

  get(id: string): SandboxJob | undefined {
    return this.#all.get(id);
  }

  all(): IterableIterator<SandboxJob> {
    return this.#all.values();
  }

  concurrency(): ConcurrencyState {
    let running = 0;
    let waiting = 0;
    for (const job of this.#active) {
      if (job.status === 'processing') running++;
      else if (job.status === 'pending') waiting++;
    }
    return { limit: this.#deps.concurrency(), running, waiting, peak: this.#peak };
  }

  /** Moves every unfinished job as far as the clock allows. */
  advance(nowMs: number): void {
    const limit = this.#deps.concurrency();
    if (limit === null) {
      for (const job of this.#active) this.#advanceOne(job, nowMs);
      return;
    }
    this.#advanceLimited(nowMs, limit);
  }

  #advanceOne(job: SandboxJob, nowMs: number): void {
    if (job.status === 'pending' && nowMs >= job.processingAt) this.#start(job, job.processingAt);
    if (job.status === 'processing' && nowMs >= job.endAt) this.#finish(job);
  }

  /**
   * Replays, in time order, every start and end due by `nowMs`: a job whose queue time has come
   * starts only when fewer than `limit` jobs are processing, and then runs its full length from that
   * moment. Exact whatever the polling rate, because slots free at the ends' own times.
   */
  #advanceLimited(nowMs: number, limit: number): void {
    const running: SandboxJob[] = [];
    // In submission order: the active set keeps insertion order.
    const queued: SandboxJob[] = [];
    for (const job of this.#active) (job.status === 'processing' ? running : queued).push(job);
    let clock = Number.NEGATIVE_INFINITY;
    for (;;) {
      let ending: SandboxJob | undefined;
      for (const job of running)
        if (job.endAt <= nowMs && (!ending || job.endAt < ending.endAt)) ending = job;
      let startAt = Number.POSITIVE_INFINITY;
      let next: SandboxJob | undefined;
      if (running.length < limit && queued.length > 0) {
        // The next start is when a slot is free and some job is ready; of the jobs ready then, the
        // first submitted goes first.
        let firstReady = Number.POSITIVE_INFINITY;
        for (const job of queued) firstReady = Math.min(firstReady, job.processingAt);
        startAt = Math.max(clock, firstReady);
        next = queued.find((job) => job.processingAt <= startAt);
      }
      if (next && startAt <= nowMs && (!ending || startAt <= ending.endAt)) {
        queued.splice(queued.indexOf(next), 1);
        this.#start(next, startAt);
        running.push(next);
        clock = startAt;
      } else if (ending) {
        running.splice(running.indexOf(ending), 1);
        clock = ending.endAt;
        this.#finish(ending);
      } else return;
    }
  }

  #start(job: SandboxJob, atMs: number): void {
    // A job kept queued by the limit still works its planned length once it starts.
    job.endAt += atMs - job.processingAt;
    job.processingAt = atMs;
    job.status = 'processing';
    this.#running++;
    this.#peak = Math.max(this.#peak, this.#running);
    this.#deps.onChange(job);
  }

  #finish(job: SandboxJob): void {
    if (job.failure === null) this.#succeed(job);
    else this.#fail(job);
    this.#running--;
    this.#active.delete(job);
    this.#deps.onChange(job);
  }

  #succeed(job: SandboxJob): void {
    const expiresAt = job.endAt + this.#deps.linkTtlSeconds() * 1000;
    const planned = planItems(job.entry, job.body, job.media, createRandom(job.seed));
    job.fileTokens = [];
    job.items = planned.map(({ item, recipe }, index) => {
      if (recipe === null || item.type === 'json') {
        job.fileTokens.push(null);
        return item;
      }
      const token = this.#deps.files.add(job.id, index, recipe, expiresAt);
      job.fileTokens.push(token);
      return { ...item, value: this.#deps.link(token, index) };
    });
    job.linkExpiresAt = expiresAt;
    job.status = 'success';
  }

  #fail(job: SandboxJob): void {
    this.#deps.account.refund(job.cost, job.month);
    job.refunded = job.cost;
    job.status = 'failed';
  }
}
