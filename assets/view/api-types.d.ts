// What the page reads from the view's JSON API (src/view/), as the page's scripts are type-checked
// against it (assets/view/tsconfig.json, run by `npm test`). test/view/contract.test.ts reads real
// answers of a real run through these types, so a field renamed on either side fails the tests.

/** A state a task is shown in; the list itself is served (`/api/lists`), never copied into the page. */
export type TaskState = string;
export type Counts = Record<TaskState, number>;

export interface Lists {
  v: number;
  task_states: TaskState[];
  /** Each state in a person's words, as `status` says it. */
  state_labels: Record<TaskState, string>;
  review_statuses: string[];
  orders: string[];
}

export interface RunHead {
  id: string;
  name: string;
  manifest: string;
  state: string;
  exit_code: number | null;
  /** Why a run that did not finish stopped (the first reason, in the line it stopped with); null otherwise. */
  stopped: { reason: string; label?: string; message: string; at: string | null } | null;
  started_at: string | null;
  finished_at: string | null;
  active_ms: number;
  tasks: number;
  finished: number;
  by_state: Counts;
  estimated: number;
  worst_case: number;
  budget: number | null;
  charged: number;
  refunded: number;
  net: number;
  /** The run's output folder (`<output>/<run>`), or its place in a bucket. */
  folder: string;
}

export interface RunsAnswer {
  v: number;
  runs: RunHead[];
}

export interface ModelRow {
  model: string;
  tasks: number;
  done: number;
  estimated: number;
  charged: number;
  refunded: number;
  net: number;
}

export interface FailureGroup {
  reason: string;
  count: number;
  tasks: string[];
}

export interface ChainRow {
  task: string;
  state: string;
  /** `name`: the link's name in the manifest's `after` ('' for a single upstream); `review`: where a reviewed upstream's result stands. */
  after: Array<{ name: string; task: string; state: string | null; review?: string }>;
}

export interface SpendSeries {
  /** [time_ms, charged, refunded, net] (arrays, as JSON has no tuples) */
  points: number[][];
  budget: number | null;
  worst_case: number;
}

export interface FinishedSeries {
  /** [time_ms, finished] */
  points: number[][];
  rate_per_minute: number | null;
  estimated_end: string | null;
  unfinished: number;
}

export interface ReviewSummary {
  awaiting: number;
  waiting: number;
  approved: number;
  rejected: number;
  rerolls: { asked: number; net: number };
}

export interface RunDetail {
  v: number;
  figures_ready: boolean;
  run: RunHead;
  models: ModelRow[];
  failures: FailureGroup[];
  in_doubt: { tasks: number; advice: string | null; retry_estimate: number; retry_max: number };
  unfinished: { tasks: number; advice: string | null };
  paid_not_on_disk: Record<string, { tasks: number; tokens: number }>;
  chains: ChainRow[];
  spend_series: SpendSeries;
  finished_series: FinishedSeries;
  review: ReviewSummary | null;
}

/** A run's live counters, pushed as the `run` event. */
export interface RunEvent {
  run: string;
  state: string;
  by_state: Counts;
  tasks: number;
  finished: number;
  charged: number;
  refunded: number;
  net: number;
}

/** One process that drives the run (a worker of a fleet, or the one runner of a SQLite state). */
export interface WorkerRow {
  id: string;
  host: string;
  pid: number;
  /** working, stopped (left on its own) or lost (died or stopped beating) */
  state: string;
  started_at: string;
  heartbeat_at: string;
  expires_at: string;
  stopped_at: string | null;
  lost_at: string | null;
  in_flight: number;
  submitted: number;
}

/** `GET /api/runs/:run/workers`, and the `workers` event when one of them moves. */
export interface WorkersAnswer {
  run: string;
  /** The server's time they were read at: how long ago a heartbeat was is counted from it. */
  now: string;
  workers: WorkerRow[];
}

/** The state database went away or came back, pushed as the `store` event. */
export interface StoreEvent {
  reachable: boolean;
  /** Why it cannot be read (one line), null when it is back. */
  error: string | null;
}

export interface FileRow {
  index: number;
  kind: string;
  name: string;
  bytes: number;
  url: string;
}

export interface ReviewState {
  status: string;
  attempt: number;
  version: number;
}

export interface TaskRow {
  id: string;
  model: string;
  state: TaskState;
  error: string | null;
  text: Record<string, string | undefined>;
  net: number;
  files: FileRow[];
  review: ReviewState | null;
  /** For a task that waits for a person's review of its upstreams: which ones. */
  waits_for_review?: string[];
  sheet?: unknown;
  songs?: Array<{ title?: string; lyrics?: string }>;
}

export interface TaskPage {
  v: number;
  tasks: TaskRow[];
  next_cursor: string | null;
}

export interface Neighbour {
  task: string;
  name?: string | null;
  state: string | null;
}

export interface Decision {
  verdict: string;
  attempt: number;
  note: string | null;
  by: string;
  at: string;
}

export interface TaskDetail {
  v: number;
  task: {
    id: string;
    model: string;
    endpoint: string;
    state: TaskState;
    img_uuid: string | null;
    error: string | null;
    job_status: string | null;
    estimate: { tokens: number; min: number; max: number };
    cost: number | null;
    refunded: number | null;
    submitted_at: string | null;
    finished_at: string | null;
    job_duration: number | null;
    polls: number;
  };
  request: unknown;
  attempts: Array<{
    attempt: number;
    sent_at: string;
    answered_at: string | null;
    outcome: string | null;
    http_status: number | null;
    message: string | null;
  }>;
  ledger: Array<{ kind: string; tokens: number; at: string; img_uuid: string | null }>;
  job: { events: Array<{ status: string; at: string; source: string }>; record: unknown };
  files: FileRow[];
  review: (ReviewState & { decisions: Decision[] }) | null;
  upstreams: Neighbour[];
  downstreams: Neighbour[];
}

export interface RerollPrice {
  total: number;
  /** Absent when the manifest sets no budget. */
  budget?: number;
  /** What the budget leaves before these re-rolls; absent without a budget. */
  left?: number;
  fits: boolean;
  /** The next `run` would refuse to start: the worst case after the re-rolls is over the budget. */
  nextRunRefuses: boolean;
  /** The prompt's words (own price, downstreams priced again, what the budget leaves), as the CLI's. */
  text: string;
}

export interface Outcome {
  task: string;
  ok: boolean;
  reason?: string;
}

export interface DecisionAnswer {
  outcomes: Outcome[];
}
