// Reads for the cost report of a run of any size. The run-level figures are SQL aggregates; the tasks
// come a page at a time, each page with its spend, files and latest submission in one query apiece,
// and without the request body: only the few text fields of it that the gallery shows. So writing the
// report of 100,000 tasks holds one page of them, never the run.

import type { Estimate } from '../catalog/types.js';
import { fromMicro, toMicro } from '../util/money.js';
import type { Db } from './db.js';
import { type FileRow, toFile } from './files.js';
import { asTokens, micro, tokensTotal } from './micro.js';
import { shownStateSql, storedStatesFor } from './shown-state.js';
import { fromIsoOrNull } from './time.js';
import {
  emptyTaskCounts,
  type FileRecord,
  TASK_STATES,
  type TaskSpend,
  type TaskState,
  type UpstreamLink,
} from './types.js';

/**
 * The request fields a person reads as the task's text, in the order the gallery prefers them; the view's
 * cards show them too.
 */
export const REQUEST_TEXT_FIELDS = ['prompt', 'text', 'lyrics', 'description', 'title'] as const;
export type RequestTextField = (typeof REQUEST_TEXT_FIELDS)[number];

/** One task as the report shows it: no request body, its ledger spend and files alongside. */
export interface ReportTaskRow {
  taskId: string;
  seq: number;
  model: string;
  state: TaskState;
  imgUuid: string | null;
  jobStatus: string | null;
  estimate: Estimate;
  error: string | null;
  submittedAt: Date | null;
  finishedAt: Date | null;
  jobDuration: number | null;
  /** The request's text fields that are JSON strings (null otherwise, or when the body is not JSON). */
  requestText: Record<RequestTextField, string | null>;
  /** The request body as sent (without the callback URL; the key never in it), null when not JSON. */
  request: Record<string, unknown> | null;
  /** Every charge and refund of the task in the ledger (zero when none). */
  spend: TaskSpend;
  /** Its result files, by index. */
  files: FileRecord[];
  /** When its latest submission was sent; null when it never was. */
  lastSentAt: Date | null;
  /** Submissions sent (every attempt row), and how many of them the API accepted (and charged). */
  attempts: AttemptCounts;
  /** The API did not state the cost of the current job: the list price was booked for it. */
  costAssumed: boolean;
  /** The current job was adopted from doubt (a callback proved the lost submission was accepted). */
  recovered: boolean;
  /** The tasks it waits for and takes results from (chains); empty for most tasks. */
  upstreams: UpstreamLink[];
  /** A chained task priced exactly before it was sent: the plan's estimate (its `estimate` is the exact one). */
  plannedEstimate: Estimate | null;
}

/** How many times a task was sent, and how many of those the API accepted (each one a charge). */
export interface AttemptCounts {
  total: number;
  charged: number;
}

/** The states of a task that was charged and has no result on disk (in doubt aside: it may not be paid). */
export const NOT_ON_DISK = ['unfetched', 'stalled', 'lost'] as const;
export type NotOnDiskState = (typeof NOT_ON_DISK)[number];

/** Per state of NOT_ON_DISK: how many tasks, and what the ledger says they cost (charged − refunded). */
export type NotOnDiskFigures = Record<NotOnDiskState, { tasks: number; tokens: number }>;

/** A task that needs the user, as `status <run>` lists it: no body, its net spend beside it. */
export interface ProblemTaskRow {
  taskId: string;
  model: string;
  state: TaskState;
  imgUuid: string | null;
  error: string | null;
  /** charged − refunded, from the ledger. */
  net: number;
  /** The most it may cost (the estimate's max), for tasks in doubt. */
  estimateMax: number;
}

export interface ReportPagesOptions {
  /** Only tasks in these states (default: all). */
  states?: readonly TaskState[];
  /** Tasks per page (default 500). */
  pageSize?: number;
  /** At most this many tasks in all (default: no limit). */
  limit?: number;
}

/** Per model of a run: tasks by state, estimates, what the ledger says, and the discount's figures. */
export interface ReportModelFigures {
  model: string;
  byState: Record<TaskState, number>;
  /** Sums of the tasks' estimates (best, min, max), in tokens. */
  estimated: number;
  estimatedMin: number;
  estimatedMax: number;
  /** Every charge and refund of the model's tasks in the ledger. */
  charged: number;
  refunded: number;
  /** Jobs charged (more than the tasks after `--retry-in-doubt` or `--accept-changes`). */
  jobs: number;
  /** Charged tasks whose list price is known exactly (estimate min = max). */
  pricedTasks: number;
  /** Their list price: estimate × jobs charged. */
  pricedListPrice: number;
  /** What the ledger charged for them, each task's sum rounded to 1e-6 tokens. */
  pricedCharged: number;
  /** Sum of the estimate maxima of the in-doubt tasks: the most they may have cost. */
  inDoubtMax: number;
  /** Tasks charged and without a result on disk, per state, with their net cost. */
  notOnDisk: NotOnDiskFigures;
  /** Tasks whose current job was recovered from doubt. */
  recovered: number;
  /** Tasks the API accepted more than once (a failed, refunded job sent again). */
  retried: number;
  /** Tasks with a charge booked at list price because the API did not state it. */
  costAssumed: number;
}

/** A run's estimates and ledger sums, in tokens. */
export interface RunTotals {
  estimated: number;
  charged: number;
  refunded: number;
  /** charged − refunded. */
  net: number;
}

export interface RunFileTotals {
  files: number;
  bytes: number;
}

const DEFAULT_PAGE = 128;

interface PageTaskRow {
  rid: number;
  body: string;
  planned_estimate: string | null;
  task_id: string;
  seq: number;
  model: string;
  state: TaskState;
  img_uuid: string | null;
  job_status: string | null;
  est_tokens: number;
  est_min: number;
  est_max: number;
  est_basis: string;
  est_assumed: number;
  error: string | null;
  submitted_at: string | null;
  finished_at: string | null;
  job_duration: number | null;
  cost_assumed: number;
  recovered: number;
  prompt: string | null;
  text: string | null;
  lyrics: string | null;
  description: string | null;
  title: string | null;
}

interface FigureRow {
  model: string;
  state: TaskState;
  est_tokens: number;
  est_min: number;
  est_max: number;
  /** Micro-tokens. */
  charged: number;
  /** Micro-tokens. */
  refunded: number;
  jobs: number;
  charged_attempts: number;
  refunds: number;
  assumed_jobs: number;
  recovered: number;
  cost_assumed: number;
}

type PageFileRow = FileRow;

interface PageSpendRow {
  task_id: string;
  charged: number;
  refunded: number;
  jobs: number;
  assumed_jobs: number;
}

interface ProblemRow {
  task_id: string;
  model: string;
  state: TaskState;
  img_uuid: string | null;
  error: string | null;
  net: number;
  est_max: number;
}

/** The state as the account counts it: a result a person rejected is a rejection (src/account/). */
const REVIEWED_STATE_SQL = `(CASE WHEN t.review = 1 AND t.verdict = 'rejected' AND t.state = 'done' THEN 'rejected'
  ELSE ${shownStateSql('t')} END)`;

/** The net of one task from the ledger in micro-tokens (src/store/micro.ts), through its (run_id, task_id) index. */
const TASK_NET_MICRO = `(SELECT total(CASE kind WHEN 'charge' THEN ${micro('tokens')} ELSE -${micro('tokens')} END)
  FROM ledger AS l WHERE l.run_id = t.run_id AND l.task_id = t.task_id)`;

/** A task's charges (or refunds) in micro-tokens. */
const taskMicro = (kind: 'charge' | 'refund'): string =>
  `(SELECT total(${micro('tokens')}) FROM ledger AS l WHERE l.run_id = t.run_id AND l.task_id = t.task_id
     AND kind = '${kind}')`;

/** A text field of the body when it is a JSON string. CASE is lazy: json_type never sees invalid JSON. */
export function requestTextSql(field: RequestTextField): string {
  return `CASE WHEN json_valid(body) THEN CASE json_type(body, '$.${field}') WHEN 'text' THEN json_extract(body, '$.${field}') END END AS ${field}`;
}

/** A page of the report's tasks by row id (PostgreSQL reads the body's text fields its own way: overrides.ts). */
export const TASK_PAGE_SQL = `SELECT rowid AS rid, task_id, seq, model, ${shownStateSql('t')} AS state, img_uuid, job_status, est_tokens, est_min, est_max,
         est_basis, est_assumed, error, submitted_at, finished_at, job_duration, cost_assumed, recovered, body,
         planned_estimate,
         ${REQUEST_TEXT_FIELDS.map(requestTextSql).join(', ')}
       FROM tasks AS t WHERE rowid IN (SELECT value FROM json_each(:rowids))`;

const IN_PAGE = 'task_id IN (SELECT value FROM json_each(:ids))';

export class ReportReadStore {
  readonly #selectInDoubtOrder;
  readonly #selectSeqs;
  readonly #selectPage;
  readonly #selectFiles;
  readonly #selectUpstreams;
  readonly #selectSpend;
  readonly #selectLastSent;
  readonly #selectFigures;
  readonly #selectFileTotals;
  readonly #selectAttemptCounts;
  readonly #selectProblems;
  readonly #selectNotOnDisk;
  readonly #selectTaskRowids;
  readonly #selectEstimated;
  readonly #selectLedgerIds;
  readonly #selectRunSums;

  // Long on purpose: every statement is prepared once, here, and named for what it does.
  constructor(db: Db) {
    // The report's order is in-doubt tasks first (they need the user), then manifest order. Both come
    // from the covering index (run_id, state, seq) and no SQL sort: a sort of every task of a large run
    // would take SQLite's sorter memory, while row ids placed by seq in a typed array take 8 bytes a task.
    this.#selectInDoubtOrder = db
      .prepare<[string], number>(
        `SELECT rowid FROM tasks WHERE run_id = ? AND state = 'in_doubt' ORDER BY seq`,
      )
      .pluck();
    this.#selectSeqs = db
      .prepare<{ runId: string; stored: string; states: string }, [number, number]>(
        `SELECT seq, rowid FROM tasks AS t
         WHERE run_id = :runId AND state IN (SELECT value FROM json_each(:stored))
           AND ${shownStateSql('t')} IN (SELECT value FROM json_each(:states))`,
      )
      .raw();
    this.#selectPage = db.prepare<{ rowids: string }, PageTaskRow>(TASK_PAGE_SQL);
    this.#selectUpstreams = db.prepare<
      { runId: string; ids: string },
      { task_id: string; name: string; upstream_id: string }
    >(
      `SELECT task_id, name, upstream_id FROM task_upstreams WHERE run_id = :runId AND ${IN_PAGE} ORDER BY task_id, name`,
    );
    this.#selectFiles = db.prepare<{ runId: string; ids: string }, PageFileRow>(
      `SELECT * FROM files WHERE run_id = :runId AND ${IN_PAGE} ORDER BY task_id, idx`,
    );
    this.#selectSpend = db.prepare<{ runId: string; ids: string }, PageSpendRow>(
      `SELECT task_id,
         ${tokensTotal('tokens', "kind = 'charge'")} AS charged,
         ${tokensTotal('tokens', "kind = 'refund'")} AS refunded,
         count(CASE WHEN kind = 'charge' THEN 1 END) AS jobs,
         count(CASE WHEN kind = 'charge' AND assumed = 1 THEN 1 END) AS assumed_jobs
       FROM ledger WHERE run_id = :runId AND ${IN_PAGE} GROUP BY task_id`,
    );
    // A bare column next to max() comes from the row holding the maximum (documented SQLite behaviour).
    this.#selectLastSent = db.prepare<
      { runId: string; ids: string },
      { task_id: string; sent_at: string; n: number; total: number; charged: number }
    >(
      `SELECT task_id, sent_at, max(attempt_no) AS n, count(*) AS total,
         count(CASE WHEN outcome = 'submitted' THEN 1 END) AS charged
       FROM attempts WHERE run_id = :runId AND ${IN_PAGE} GROUP BY task_id`,
    );
    this.#selectAttemptCounts = db.prepare<[string], { task_id: string; total: number; charged: number }>(
      `SELECT task_id, count(*) AS total, count(CASE WHEN outcome = 'submitted' THEN 1 END) AS charged
       FROM attempts WHERE run_id = ? GROUP BY task_id`,
    );
    // One state at a time through the (run_id, state, seq) index, so LIMIT stops the read early.
    this.#selectProblems = db.prepare<
      { runId: string; state: string; limit: number; withErrorOnly: number },
      ProblemRow
    >(
      `SELECT task_id, model, state, img_uuid, error, est_max, ${asTokens(TASK_NET_MICRO)} AS net
       FROM tasks AS t WHERE run_id = :runId AND state = :state
         AND (:withErrorOnly = 0 OR error IS NOT NULL)
       ORDER BY seq LIMIT :limit`,
    );
    this.#selectNotOnDisk = db.prepare<[string], { state: NotOnDiskState; tasks: number; tokens: number }>(
      `SELECT state, count(*) AS tasks, ${asTokens(`total(${TASK_NET_MICRO})`)} AS tokens
       FROM tasks AS t WHERE run_id = ? AND state IN ('unfetched', 'stalled', 'lost') GROUP BY state`,
    );
    // Run totals at a million tasks: the run's rows are found through an index (which holds the row
    // ids), then read as one range of the table in storage order. Reading each row through the index
    // instead jumps around the file and takes twice as long; `+run_id` keeps SQLite on the range.
    this.#selectTaskRowids = db.prepare<[string], { lo: number | null; hi: number | null }>(
      'SELECT min(rowid) AS lo, max(rowid) AS hi FROM tasks WHERE run_id = ?',
    );
    this.#selectEstimated = db.prepare<[number, number, string], { estimated: number }>(
      `SELECT ${tokensTotal('est_tokens')} AS estimated FROM tasks WHERE rowid BETWEEN ? AND ? AND +run_id = ?`,
    );
    this.#selectLedgerIds = db.prepare<[string], { lo: number | null; hi: number | null }>(
      'SELECT min(id) AS lo, max(id) AS hi FROM ledger WHERE run_id = ?',
    );
    this.#selectRunSums = db.prepare<[number, number, string], { charged: number; refunded: number }>(
      `SELECT ${tokensTotal('tokens', "kind = 'charge'")} AS charged,
         ${tokensTotal('tokens', "kind = 'refund'")} AS refunded
       FROM ledger WHERE id BETWEEN ? AND ? AND +run_id = ?`,
    );
    // One pass over the run's tasks, summed in JavaScript: GROUP BY would sort every task (SQLite
    // groups by sorting), and the ledger is read through its (run_id, task_id) index for each.
    this.#selectFigures = db.prepare<[string], FigureRow>(
      `SELECT model, ${REVIEWED_STATE_SQL} AS state, est_tokens, est_min, est_max,
         ${taskMicro('charge')} AS charged, ${taskMicro('refund')} AS refunded,
         (SELECT count(*) FROM ledger AS l WHERE l.run_id = t.run_id AND l.task_id = t.task_id
            AND kind = 'charge') AS jobs,
         (SELECT count(*) FROM ledger AS l WHERE l.run_id = t.run_id AND l.task_id = t.task_id
            AND kind = 'charge' AND assumed = 1) AS assumed_jobs,
         (SELECT count(*) FROM ledger AS l WHERE l.run_id = t.run_id AND l.task_id = t.task_id
            AND kind = 'charge' AND reroll = 0) AS charged_attempts,
         (SELECT count(*) FROM ledger AS l WHERE l.run_id = t.run_id AND l.task_id = t.task_id
            AND kind = 'refund') AS refunds,
         recovered, cost_assumed
       FROM tasks AS t WHERE run_id = ?`,
    );
    this.#selectFileTotals = db.prepare<[string], { files: number; bytes: number }>(
      'SELECT count(*) AS files, coalesce(sum(bytes), 0) AS bytes FROM files WHERE run_id = ?',
    );
  }

  /**
   * The tasks of a run in the report's order (in doubt first, then manifest order), a page at a time.
   * Each page is read in full when it is asked for, so no statement stays open between pages: the
   * caller may await between them while other code uses the database. Tasks added after the first
   * page are not listed; a task's figures are as of its own page.
   */
  *reportTaskPages(runId: string, opts: ReportPagesOptions = {}): Generator<ReportTaskRow[], void, void> {
    const pageSize = Math.max(1, opts.pageSize ?? DEFAULT_PAGE);
    let left = opts.limit ?? Number.POSITIVE_INFINITY;
    const states = opts.states ?? TASK_STATES;
    let page: number[] = [];
    for (const rowid of this.#order(runId, states)) {
      if (left-- <= 0) break;
      page.push(rowid);
      if (page.length === pageSize) {
        yield this.#page(runId, page);
        page = [];
      }
    }
    if (page.length > 0) yield this.#page(runId, page);
  }

  /** Row ids in the report's order, all read before the first is handed out. */
  #order(runId: string, states: readonly TaskState[]): Iterable<number> {
    const inDoubt = states.includes('in_doubt') ? this.#selectInDoubtOrder.all(runId) : [];
    const others = states.filter((s) => s !== 'in_doubt');
    // Seqs are 0, 1, 2, … in a run (the store hands them out in turn), so seq indexes the array;
    // 0 marks a seq without a task here (row ids start at 1).
    let bySeq = new Float64Array(1024);
    let count = 0;
    const filter = { runId, stored: JSON.stringify(storedStatesFor(others)), states: JSON.stringify(others) };
    for (const [seq, rowid] of this.#selectSeqs.iterate(filter)) {
      if (seq >= bySeq.length) {
        const grown = new Float64Array(Math.max(seq + 1, bySeq.length * 2));
        grown.set(bySeq);
        bySeq = grown;
      }
      bySeq[seq] = rowid;
      count = Math.max(count, seq + 1);
    }
    const ordered = bySeq.subarray(0, count);
    return (function* () {
      yield* inDoubt;
      for (const rowid of ordered) if (rowid !== 0) yield rowid;
    })();
  }

  #page(runId: string, rowids: readonly number[]): ReportTaskRow[] {
    const byRowid = new Map<number, PageTaskRow>();
    for (const row of this.#selectPage.iterate({ rowids: JSON.stringify(rowids) })) byRowid.set(row.rid, row);
    const ids = JSON.stringify([...byRowid.values()].map((row) => row.task_id));
    const files = new Map<string, FileRecord[]>();
    for (const row of this.#selectFiles.iterate({ runId, ids })) {
      const list = files.get(row.task_id);
      if (list === undefined) files.set(row.task_id, [toFile(row)]);
      else list.push(toFile(row));
    }
    const spend = new Map<string, PageSpendRow>();
    for (const row of this.#selectSpend.iterate({ runId, ids })) spend.set(row.task_id, row);
    const sent = new Map<string, { sent_at: string; total: number; charged: number }>();
    for (const row of this.#selectLastSent.iterate({ runId, ids })) sent.set(row.task_id, row);
    const upstreams = new Map<string, UpstreamLink[]>();
    for (const row of this.#selectUpstreams.iterate({ runId, ids })) {
      const list = upstreams.get(row.task_id) ?? [];
      list.push({ name: row.name, upstreamId: row.upstream_id });
      upstreams.set(row.task_id, list);
    }

    const page: ReportTaskRow[] = [];
    for (const rowid of rowids) {
      const row = byRowid.get(rowid);
      if (row === undefined) continue;
      const s = spend.get(row.task_id);
      const a = sent.get(row.task_id);
      page.push({
        taskId: row.task_id,
        seq: row.seq,
        model: row.model,
        state: row.state,
        imgUuid: row.img_uuid,
        jobStatus: row.job_status,
        estimate: {
          tokens: row.est_tokens,
          min: row.est_min,
          max: row.est_max,
          basis: row.est_basis,
          assumedPrice: row.est_assumed === 1,
        },
        error: row.error,
        submittedAt: fromIsoOrNull(row.submitted_at),
        finishedAt: fromIsoOrNull(row.finished_at),
        jobDuration: row.job_duration,
        request: parseRequest(row.body),
        requestText: {
          prompt: row.prompt,
          text: row.text,
          lyrics: row.lyrics,
          description: row.description,
          title: row.title,
        },
        spend: {
          taskId: row.task_id,
          charged: s?.charged ?? 0,
          refunded: s?.refunded ?? 0,
          net: fromMicro(toMicro(s?.charged ?? 0) - toMicro(s?.refunded ?? 0)),
          jobs: s?.jobs ?? 0,
        },
        files: files.get(row.task_id) ?? [],
        lastSentAt: fromIsoOrNull(a?.sent_at ?? null),
        attempts: { total: a?.total ?? 0, charged: a?.charged ?? 0 },
        costAssumed: row.cost_assumed === 1 || (s?.assumed_jobs ?? 0) > 0,
        upstreams: upstreams.get(row.task_id) ?? [],
        plannedEstimate:
          row.planned_estimate === null ? null : (JSON.parse(row.planned_estimate) as Estimate),
        recovered: row.recovered === 1,
      });
    }
    return page;
  }

  /**
   * Per model of the run (by name): its tasks by state, estimates, spend and the exactly priced ones.
   * Amounts are added in whole micro-tokens (src/store/micro.ts): the rows' order, which the backends do
   * not share, then changes nothing.
   */
  reportModelFigures(runId: string): ReportModelFigures[] {
    const figures = new Map<string, ReportModelFigures>();
    for (const row of this.#selectFigures.iterate(runId)) {
      let f = figures.get(row.model);
      if (f === undefined) {
        f = emptyFigures(row.model);
        figures.set(row.model, f);
      }
      f.byState[row.state]++;
      // A skipped task left the run's estimate (src/account/): a rejected upstream took it out.
      if (row.state !== 'skipped') {
        f.estimated += toMicro(row.est_tokens);
        f.estimatedMin += toMicro(row.est_min);
        f.estimatedMax += toMicro(row.est_max);
      }
      f.charged += row.charged;
      f.refunded += row.refunded;
      f.jobs += row.jobs;
      if (row.state === 'in_doubt') f.inDoubtMax += toMicro(row.est_max);
      if (isNotOnDisk(row.state)) {
        f.notOnDisk[row.state].tasks++;
        f.notOnDisk[row.state].tokens += row.charged - row.refunded;
      }
      if (row.recovered === 1) f.recovered++;
      // Sent again after a refunded (failed) job: a re-roll is no retry (src/account/ tells them apart).
      if (row.charged_attempts > 1 && row.refunds > 0) f.retried++;
      if (row.cost_assumed === 1 || row.assumed_jobs > 0) f.costAssumed++;
      if (row.jobs > 0 && row.est_min === row.est_max) {
        f.pricedTasks++;
        f.pricedListPrice += toMicro(row.est_tokens) * row.jobs;
        f.pricedCharged += row.charged;
      }
    }
    return [...figures.values()]
      .sort((a, b) => (a.model < b.model ? -1 : a.model > b.model ? 1 : 0))
      .map(figuresInTokens);
  }

  /** Per task of the run that was ever sent: its attempts, and how many the API accepted. */
  taskAttemptCounts(runId: string): Map<string, AttemptCounts> {
    const counts = new Map<string, AttemptCounts>();
    for (const row of this.#selectAttemptCounts.iterate(runId)) {
      counts.set(row.task_id, { total: row.total, charged: row.charged });
    }
    return counts;
  }

  /**
   * At most `limit` tasks in the given states, the states in the order given (most urgent first), each
   * in manifest order, with their net spend. `withErrorOnly` states list only tasks that carry a reason
   * (pending tasks that gave up for now). Reads no more rows than it returns.
   */
  problemTasks(
    runId: string,
    states: readonly TaskState[],
    limit: number,
    withErrorOnly: readonly TaskState[] = [],
  ): ProblemTaskRow[] {
    const rows: ProblemTaskRow[] = [];
    for (const state of states) {
      const left = limit - rows.length;
      if (left <= 0) break;
      const only = withErrorOnly.includes(state) ? 1 : 0;
      for (const row of this.#selectProblems.iterate({ runId, state, limit: left, withErrorOnly: only })) {
        rows.push({
          taskId: row.task_id,
          model: row.model,
          state: row.state,
          imgUuid: row.img_uuid,
          error: row.error,
          net: row.net,
          estimateMax: row.est_max,
        });
      }
    }
    return rows;
  }

  /** The run's charged tasks without a result on disk, per state: counts and net tokens, by SQL. */
  notOnDiskByState(runId: string): NotOnDiskFigures {
    const figures = emptyNotOnDisk();
    for (const row of this.#selectNotOnDisk.iterate(runId)) {
      figures[row.state] = { tasks: row.tasks, tokens: row.tokens };
    }
    return figures;
  }

  /**
   * What `status` shows of a run's money: the sum of its estimates, and what the ledger charged and
   * refunded. Two sequential reads, so it stays well under a second at 1,000,000 tasks.
   */
  runTotals(runId: string): RunTotals {
    const tasks = this.#selectTaskRowids.get(runId);
    const estimated =
      tasks?.lo == null || tasks.hi == null
        ? 0
        : (this.#selectEstimated.get(tasks.lo, tasks.hi, runId)?.estimated ?? 0);
    const ids = this.#selectLedgerIds.get(runId);
    const sums =
      ids?.lo == null || ids.hi == null ? undefined : this.#selectRunSums.get(ids.lo, ids.hi, runId);
    const charged = sums?.charged ?? 0;
    const refunded = sums?.refunded ?? 0;
    return { estimated, charged, refunded, net: fromMicro(toMicro(charged) - toMicro(refunded)) };
  }

  /** How many result files the run has, and their total size in bytes. */
  runFileTotals(runId: string): RunFileTotals {
    return this.#selectFileTotals.get(runId) ?? { files: 0, bytes: 0 };
  }
}

/** Figures added up in micro-tokens, as tokens. */
function figuresInTokens(f: ReportModelFigures): ReportModelFigures {
  const notOnDisk = emptyNotOnDisk();
  for (const state of NOT_ON_DISK) {
    notOnDisk[state] = { tasks: f.notOnDisk[state].tasks, tokens: fromMicro(f.notOnDisk[state].tokens) };
  }
  return {
    ...f,
    estimated: fromMicro(f.estimated),
    estimatedMin: fromMicro(f.estimatedMin),
    estimatedMax: fromMicro(f.estimatedMax),
    charged: fromMicro(f.charged),
    refunded: fromMicro(f.refunded),
    pricedListPrice: fromMicro(f.pricedListPrice),
    pricedCharged: fromMicro(f.pricedCharged),
    inDoubtMax: fromMicro(f.inDoubtMax),
    notOnDisk,
  };
}

function emptyFigures(model: string): ReportModelFigures {
  return {
    model,
    byState: emptyTaskCounts(),
    estimated: 0,
    estimatedMin: 0,
    estimatedMax: 0,
    charged: 0,
    refunded: 0,
    jobs: 0,
    pricedTasks: 0,
    pricedListPrice: 0,
    pricedCharged: 0,
    inDoubtMax: 0,
    notOnDisk: emptyNotOnDisk(),
    recovered: 0,
    retried: 0,
    costAssumed: 0,
  };
}

export function emptyNotOnDisk(): NotOnDiskFigures {
  return {
    unfetched: { tasks: 0, tokens: 0 },
    stalled: { tasks: 0, tokens: 0 },
    lost: { tasks: 0, tokens: 0 },
  };
}

export function isNotOnDisk(state: TaskState): state is NotOnDiskState {
  return (NOT_ON_DISK as readonly TaskState[]).includes(state);
}

/** A stored request body as an object; null when it is not a JSON object (never the case for ours). */
export function parseRequest(body: string): Record<string, unknown> | null {
  try {
    const value = JSON.parse(body) as unknown;
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}
