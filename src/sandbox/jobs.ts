// Jobs and their life cycle: pending -> processing -> success | failed, driven by the injected clock.
// A job's whole future (timing, failure, result content) is drawn when it is accepted; looking at
// it later only reveals how far along that future the clock has moved.
import type { CatalogEntry, MediaDurations, RequestBody } from '../catalog/types.js';
import type { Account } from './account.js';
import type { FileStore } from './files.js';
import { createRandom } from './random.js';
import { planItems, type ResultItem } from './results.js';

export type JobStatus = 'pending' | 'processing' | 'success' | 'failed';

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
  readonly processingAt: number;
  readonly endAt: number;
  /** Why the job will fail, decided at acceptance; null when it will succeed. */
  readonly failure: string | null;
  /** Seeds the job's own generator for its result content. */
  readonly seed: number;
  readonly callbackUrl: string | undefined;
  answer: SubmitAnswer;
  status: JobStatus;
  refunded: number;
  items: ResultItem[] | null;
  linkExpiresAt: number | null;
  readonly callbacks: CallbackLog[];
}

/** The job record of the wire: `data` of jobs/detail and the body of callbacks. */
export interface JobRecord {
  img_uuid: string;
  status: JobStatus;
  type: string;
  job_type: string;
  start_time: string;
  end_time?: string;
  model_id: string;
  json: ResultItem[] | null;
  link_expired_at?: string;
  duration?: number;
}

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
  baseUrl: () => string;
  linkTtlSeconds: () => number;
  /** Called on each change to processing, success and failed, in order. */
  onChange: (job: SandboxJob) => void;
}

export class Jobs {
  readonly #all = new Map<string, SandboxJob>();
  readonly #active = new Set<SandboxJob>();
  readonly #deps: JobsDeps;

  constructor(deps: JobsDeps) {
    this.#deps = deps;
  }

  add(job: SandboxJob): void {
    this.#all.set(job.id, job);
    this.#active.add(job);
  }

  get(id: string): SandboxJob | undefined {
    return this.#all.get(id);
  }

  all(): IterableIterator<SandboxJob> {
    return this.#all.values();
  }

  /** Moves every unfinished job as far as the clock allows. */
  advance(nowMs: number): void {
    for (const job of this.#active) this.#advanceOne(job, nowMs);
  }

  #advanceOne(job: SandboxJob, nowMs: number): void {
    if (job.status === 'pending' && nowMs >= job.processingAt) {
      job.status = 'processing';
      this.#deps.onChange(job);
    }
    if (job.status === 'processing' && nowMs >= job.endAt) {
      if (job.failure === null) this.#succeed(job);
      else this.#fail(job);
      this.#active.delete(job);
      this.#deps.onChange(job);
    }
  }

  #succeed(job: SandboxJob): void {
    const expiresAt = job.endAt + this.#deps.linkTtlSeconds() * 1000;
    const planned = planItems(job.entry, job.body, job.media, createRandom(job.seed));
    job.items = planned.map(({ item, recipe }, index) => {
      if (recipe === null || item.type === 'json') return item;
      const token = this.#deps.files.add(job.id, index, recipe, expiresAt);
      return { ...item, value: `${this.#deps.baseUrl()}/files/${token}` };
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
