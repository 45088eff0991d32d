// The Runner's public vocabulary (re-exported by ../runner.ts) and the one record its parts share per job.

import type { ApiClient } from '../../api/client.js';
import type { DownloadOptions, DownloadResult } from '../../api/download.js';
import type { CatalogEntry, PriceTable, RequestBody } from '../../catalog/types.js';
import type { TaskOrder } from '../../manifest/types.js';
import type { ProbeResult } from '../../media/types.js';
import type { BucketOutput } from '../../results/bucket.js';
import type { Store, TaskRecord, TaskState } from '../../store/index.js';
import type { Logger } from '../../util/log.js';
import type { RunEvent } from '../events.js';
import type { ExpectedMs, PollProfiles } from '../polling.js';
import type { IncomingTasks } from '../storing.js';

export type StopReason =
  | 'interrupted'
  | 'insufficient-tokens'
  | 'quota-exceeded'
  | 'unauthorized'
  | 'budget'
  /** A fired run's manifest spent its `budget_per_period` (the run's own budget left room). */
  | 'period-budget'
  | 'unreachable'
  | 'lease-lost'
  | 'local-disk'
  | 'limit'
  | 'internal';

export interface RunnerDeps {
  store: Store;
  client: ApiClient;
  /** Fingerprint of the API key for the ledger; never the key. */
  keyFingerprint: string;
  logger: Logger;
  download: (url: string, dest: string, opts: DownloadOptions) => Promise<DownloadResult>;
  now?: () => number;
  random?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Called whenever counts change (the renderer throttles). */
  onProgress?: (progress: RunProgress) => void;
  /** Called once for each thing that happens to a task (see ./events.ts); must not throw. */
  onEvent?: (event: RunEvent) => void;
  /** Measures media lengths (a chained task's filled-in inputs); over HTTP by default. */
  measure?: (needs: Array<{ location: string; kind: MediaKind }>) => Promise<Map<string, ProbeResult>>;
}

export type MediaKind = 'image' | 'audio' | 'video';

/** How long the runner waits on the service, and how hard it tries before a task changes state. */
export interface WatchPolicy {
  /** Past this long after submission a job is `stalled`: its slot is released, it is polled slowly. */
  jobDeadlineMs: Record<MediaKind, number>;
  /** Poll interval of a stalled job. */
  stalledPollMs: number;
  /** jobs/detail may not know a job right after its submission: a 404 within this window is waited on. */
  notFoundWindowMs: number;
  /** A job that says success with no result list yet is polled this long before it counts as unfetched. */
  successGraceMs: number;
  /** Fresh job records fetched for one file whose link is refused or expired. */
  linkRefreshes: number;
  /** Result items kept per job; a server listing more is cut there. */
  maxResultItems: number;
  /** Bytes per job, all its files together. */
  maxJobBytes: number;
  /** Throttled (429) answers one task may get before it is left pending for a later run. */
  maxThrottledPerTask: number;
  /** With callbacks, how long the run waits for the callback of a task it just put in doubt. */
  doubtCallbackWaitMs: number;
}

/** Generous on purpose: a video of the service can take many minutes in a busy queue. */
export const DEFAULT_WATCH_POLICY: WatchPolicy = {
  jobDeadlineMs: { image: 30 * 60_000, audio: 60 * 60_000, video: 3 * 60 * 60_000 },
  stalledPollMs: 60_000,
  notFoundWindowMs: 60_000,
  successGraceMs: 60_000,
  linkRefreshes: 3,
  maxResultItems: 16,
  maxJobBytes: 8 * 1024 ** 3,
  maxThrottledPerTask: 200,
  doubtCallbackWaitMs: 30_000,
};

/** The numbers of a run's policy (../settings.ts, where each is described) that the Runner reads as they are. */
export interface RunnerPolicy {
  /** Polls in flight at once, for all jobs together. */
  pollConcurrency: number;
  /** Largest result file accepted. */
  maxDownloadBytes: number;
  /** Longest wait for a download's headers, and between two of its chunks. */
  downloadTimeoutMs: number;
  /** Submissions answered 500 / refused connection are retried this many times per task. */
  submitRetries: number;
  retryBaseMs: number;
  retryCapMs: number;
  /** After this many tasks in a row gave up on retries, stop submitting: the API is down. */
  giveUpAfterTasks: number;
}

/** The keys of RunnerPolicy, to take them from a RunPolicy in one place. */
export const RUNNER_POLICY_KEYS = [
  'pollConcurrency',
  'maxDownloadBytes',
  'downloadTimeoutMs',
  'submitRetries',
  'retryBaseMs',
  'retryCapMs',
  'giveUpAfterTasks',
] as const satisfies readonly (keyof RunnerPolicy)[];

/** This runner is one worker of a fleet on a shared (PostgreSQL) state. */
export interface FleetWorker {
  /** Its row in store.workers (`pid@host#nonce`). */
  workerId: string;
  /** Its heartbeat keeps it alive this long; it beats, and sweeps the others, four times in that. */
  ttlMs: number;
  /** With nothing of its own to do while others hold work, it looks at the queue again this often. */
  idlePollMs: number;
}

export interface RunnerOptions extends RunnerPolicy {
  runId: string;
  /** Several processes work on the run (store.claims): only what this one claimed is its own. */
  fleet?: FleetWorker;
  /** `<output>/<run>`; `s3://bucket/<prefix>/<run>` when results go to a bucket. */
  runDir: string;
  /** Results go to this bucket instead of the local disk. */
  bucket?: BucketOutput;
  concurrency: number;
  budget?: number;
  pollProfiles: PollProfiles;
  /** Multiplies the catalog's expected job durations (the sandbox demo's and the tests' time scale). */
  jobTimeScale?: number;
  downloadConcurrency: number;
  /** Aborted on the first Ctrl-C / SIGTERM: stop submitting, record the answers in flight, return. */
  stop: AbortSignal;
  /** Aborted on a second Ctrl-C: return at once. */
  halt?: AbortSignal;
  /** With a callback receiver: the URL given to the service for each task. */
  callbackUrlFor?: (taskId: string) => string;
  /**
   * With local inputs (uploaded before the first POST): the request as sent, each `file:` value made a
   * link fresh for link_ttl (src/run/runner/uploads.ts). The stored request keeps `file:path`.
   */
  inputLinks?: (body: RequestBody) => Promise<RequestBody>;
  /** `run --retries N`: replaces every task's own `retries` for this run. */
  retries?: number;
  /** `run --only`: submit only these tasks (the others stay pending). */
  only?: readonly string[];
  /** `run --limit N`: submit at most this many tasks that were pending (a smoke test before the batch). */
  limit?: number;
  /** Which pending task goes next; the longest expected job first unless the manifest's order is asked for. */
  order?: TaskOrder;
  /** Prices (the account's overrides): a chained task is priced exactly with them once it is filled in. */
  prices?: PriceTable;
  watch?: Partial<WatchPolicy>;
  /** A new run's tasks still being stored: submitted as they arrive, the longest first (../storing.ts). */
  incoming?: IncomingTasks;
  /** `run --wait-for-review`: go on until every reviewed result is decided. */
  waitForReview?: boolean;
  /** How often the store is looked at for new decisions (approvals, re-rolls) while the run waits; 1000 ms. */
  reviewPollMs?: number;
}

export interface RunProgress {
  counts: Record<TaskState, number>;
  charged: number;
  refunded: number;
  inFlight: number;
  /** Tokens by which chained tasks priced exactly in this process moved the run's estimate (negative: tightened). */
  estimateChange?: number;
  /** Set while `--wait-for-review` waits for a person: the results awaiting a decision; nothing else moves. */
  waitingForDecisions?: number;
}

export interface RunResult {
  stopReason?: StopReason;
  /** Reviewed results nobody decided on yet when the run ended. */
  awaitingReview: number;
  /** One line for the user about why the run stopped early. */
  stopMessage?: string;
  /**
   * Why tasks this process left are unfinished (put off to the end, a job the API did not know, stalled,
   * a result not fetched): the first one's id and reason, and whether there are others; absent when none.
   */
  unfinishedWhy?: string;
  counts: Record<TaskState, number>;
  polls: number;
  /** How the successes of this process became known: a confirmed callback, or a poll of our own. */
  arrivals: { poll: number; callback: number };
  /** Quota figures learned from a code-101 answer. */
  quota?: { used: number; quota: number; period: string };
  /** Answers from the API that could not be read at all (each retried). */
  unreadableAnswers: number;
  /** In-doubt tasks a callback proved accepted, adopted by this process. */
  recoveredFromDoubt: number;
  /** Failed (refunded) jobs submitted again by `retries`. */
  retriedFailures: number;
}

/** A job this process watches (internal to the runner). */
export interface Watched {
  task: TaskRecord;
  entry: CatalogEntry;
  polls: number;
  /** Whether the task holds one of the run's concurrency slots. */
  holdsSlot: boolean;
  /** How long its job is expected to take, learnt from the run's jobs of the same model. */
  expected: ExpectedMs;
  /** When the job was last seen not finished (epoch ms): the earliest it can have ended. */
  lastLookAt?: number;
  /** When this process started watching the job (epoch ms). */
  watchedAt: number;
  /** The request as sent, for what the job's size says about its duration. */
  body: RequestBody;
  /** When jobs/detail first said success without a result list. */
  emptySuccessSince?: number;
  stalled: boolean;
}

/** What a callback claims about a task's job; only a poll of jobs/detail confirms it. */
export interface CallbackHint {
  taskId: string;
  imgUuid: string | undefined;
  status: string | undefined;
}
