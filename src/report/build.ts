// Builds the cost report of one run from the state database. Reading (collectReportInput) is kept apart
// from assembling (assembleReport, pure), so the arithmetic is tested on plain data. Every figure comes
// from the store, never from the manifest: the manifest may have changed since the run.

import { relative, sep } from 'node:path';
import { describeRun, invocationCommand, type NextAction, type RunAccount } from '../account/index.js';
import type { Estimate } from '../catalog/types.js';
import { MediabatchError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import { parseShardRunId } from '../plan/shard.js';
import {
  commandLine,
  DEFAULT_STATE_FILE,
  invocationOf,
  type Reader,
  type RunInvocation,
} from '../results/invocation.js';
import { taskFolderName } from '../results/names.js';
import { reportReview, reviewFacts } from '../review/index.js';
import {
  type AttemptCounts,
  activeMsOf,
  emptyNotOnDisk,
  emptyTaskCounts,
  type FileRecord,
  isNotOnDisk,
  type LedgerSums,
  type ModelTotals,
  NOT_ON_DISK,
  type NotOnDiskFigures,
  parseRequest,
  periodOf,
  type ReportTaskSpend,
  type RunFileTotals,
  type RunRecord,
  type RunState,
  type Store,
  type TaskRecord,
  type TaskSpend,
  type TaskState,
  UNFINISHED,
  type UpstreamLink,
} from '../store/index.js';
import { type QuotaStore, quotaStanding } from '../store/quota.js';
import { roundTokens, tokensToUsd, USD_PER_TOKEN } from '../util/money.js';
import { countOf, fmtTokensWithUnit } from '../util/numbers.js';
import type { Report, ReportSummary, ReportTask, TaskReview } from './schema.js';

export interface ReportOptions {
  now: Date;
  /**
   * How the person reaches the run (their working folder, `--state`, `--config`): the commands the report
   * prints carry them. Without it, the state file's own path and absolute paths.
   */
  reader?: Reader;
  /** `<output>/<run>`: file paths in the report are relative to it. */
  runDir: string;
  /** The monthly quota from configuration (MEDIABATCH_QUOTA), when the user set one. */
  quota?: number;
  /**
   * The run's state as shown (the run layer's shownRunState: a run whose process or every worker died is
   * `interrupted`), so that the report says what `status` and the view say; the recorded one without it.
   */
  shownState?: (run: RunRecord) => RunState;
}

/**
 * The run as the report shows it: its state as `opts.shownState` says, and its active time with the
 * session under way (to now while it runs, to its last sign of work once its process or workers are gone).
 */
export function shownRun(
  store: Store,
  run: RunRecord,
  opts: Pick<ReportOptions, 'shownState' | 'now'>,
): RunRecord {
  const state = opts.shownState === undefined ? run.state : opts.shownState(run);
  return { ...run, state, activeMs: activeMsOf(store, run, state, opts.now) };
}

export interface QuotaKeyInput {
  keyFingerprint: string;
  spent: LedgerSums;
  limit: number | null;
  used: number | null;
  source: string | null;
}

/** Everything the report needs, read from the store in one go. */
export interface ReportInput {
  run: RunRecord;
  tasks: TaskRecord[];
  files: FileRecord[];
  spend: ReportTaskSpend[];
  /** Per task ever sent: its submissions, and how many the API accepted. */
  attempts: ReadonlyMap<string, AttemptCounts>;
  runSpent: LedgerSums;
  modelTotals: ModelTotals[];
  /** When the last submission of each in-doubt task was sent. */
  inDoubtSentAt: ReadonlyMap<string, Date | null>;
  quotaKeys: QuotaKeyInput[];
  now: Date;
  runDir: string;
  /** How the commands the report prints reach the run (ReportOptions' reader). */
  reader?: Reader;
  /** Reviewed tasks: their review, and the run's review figures. */
  reviews?: ReadonlyMap<string, TaskReview>;
  review?: Report['review'];
  /** The run's one account: the report's totals agree with it. */
  account: RunAccount;
}

/** Thrown for a run id the store does not know; the CLI words it. */
export class UnknownRunError extends MediabatchError {
  override name = 'UnknownRunError';
  override readonly exitCode = EXIT.invalid;
  readonly runId: string;
  constructor(runId: string) {
    super(`run ${runId}: not found in the state database`);
    this.runId = runId;
  }
}

export function buildReport(store: Store, runId: string, opts: ReportOptions): Report {
  return assembleReport(collectReportInput(store, runId, opts));
}

export function collectReportInput(store: Store, runId: string, opts: ReportOptions): ReportInput {
  const recorded = store.runs.getRun(runId);
  if (recorded === undefined) throw new UnknownRunError(runId);
  const run = shownRun(store, recorded, opts);
  const tasks = store.tasks.tasksOfRun(runId);
  const inDoubtSentAt = new Map<string, Date | null>();
  for (const task of tasks) {
    if (task.state !== 'in_doubt') continue;
    inDoubtSentAt.set(task.taskId, store.submissions.attemptsOf(runId, task.taskId).at(-1)?.sentAt ?? null);
  }
  const quotaKeys = store.spend.runKeys(runId).map((key) => quotaOfKey(store, key, opts.now, opts.quota));
  const review = reportReview(store, runId);
  return {
    account: describeRun(store, runId, {
      command: invocationCommand(invocationOf(run, opts.reader ?? { state: store.file })),
      ...(opts.shownState !== undefined ? { shownState: opts.shownState } : {}),
    }),
    run,
    tasks,
    files: store.files.filesOfRun(runId),
    spend: store.spend.taskSpend(runId),
    attempts: store.reportReads.taskAttemptCounts(runId),
    runSpent: store.ledger.runSpent(runId),
    modelTotals: store.ledger.modelTotals(runId),
    inDoubtSentAt,
    quotaKeys,
    now: opts.now,
    runDir: opts.runDir,
    reader: opts.reader ?? { state: store.file },
    reviews: reviewFacts(store, runId),
    ...(review !== undefined && { review }),
  };
}

/** What the ledger spent with one key in the month of `now`, and its quota as far as it is known (src/store/quota.ts). */
export function quotaOfKey(
  store: QuotaStore,
  keyFingerprint: string,
  now: Date,
  configQuota?: number,
): QuotaKeyInput {
  const { spent, limit, used, source } = quotaStanding(store, configQuota, keyFingerprint, now);
  return { keyFingerprint, spent, limit, used, source };
}

const NO_SPEND: ReportTaskSpend = { taskId: '', charged: 0, refunded: 0, net: 0, jobs: 0, assumedJobs: 0 };
const NO_ATTEMPTS: AttemptCounts = { total: 0, charged: 0 };

export function assembleReport(input: ReportInput): Report {
  const spendOf = new Map(input.spend.map((s) => [s.taskId, s]));
  const filesOf = new Map<string, FileRecord[]>();
  for (const f of input.files) filesOf.set(f.taskId, [...(filesOf.get(f.taskId) ?? []), f]);

  const ordered = [...input.tasks].sort(
    (a, b) => Number(b.state === 'in_doubt') - Number(a.state === 'in_doubt') || a.seq - b.seq,
  );
  const tasks = ordered.map((t) =>
    reportTask(
      t,
      spendOf.get(t.taskId) ?? NO_SPEND,
      filesOf.get(t.taskId) ?? [],
      input.runDir,
      input.attempts.get(t.taskId) ?? NO_ATTEMPTS,
      input.reviews?.get(t.taskId),
    ),
  );

  const byModel = input.modelTotals.map((m) => ({
    model: m.model,
    ...summarise(
      tasks.filter((t) => t.model === m.model),
      m,
      { tokens: m.estimated, min: m.estimatedMin, max: m.estimatedMax },
    ),
  }));
  const estimated = {
    tokens: sum(input.modelTotals.map((m) => m.estimated)),
    min: sum(input.modelTotals.map((m) => m.estimatedMin)),
    max: sum(input.modelTotals.map((m) => m.estimatedMax)),
  };
  const totals = summarise(tasks, input.runSpent, estimated);
  const inDoubt = tasks
    .filter((t) => t.status === 'in_doubt')
    .map((t) => inDoubtEntry(t, input.inDoubtSentAt.get(t.id) ?? null));
  const head = assembleHead({
    run: input.run,
    reader: input.reader ?? { state: DEFAULT_STATE_FILE },
    now: input.now,
    quotaKeys: input.quotaKeys,
    totals,
    byModel,
    inDoubt: { count: inDoubt.length, atMost: sum(inDoubt.map((t) => t.at_most)) },
    files: {
      files: sum(tasks.map((t) => t.files.length)),
      bytes: sum(tasks.map((t) => t.bytes)),
    },
    ...(input.review !== undefined && { review: input.review }),
    account: input.account,
  });
  return reportOf(head, inDoubt, tasks);
}

/** The report without its two task lists (in_doubt, tasks): every run-level figure. */
export interface ReportHead extends Omit<Report, 'in_doubt' | 'tasks'> {
  /** The in-doubt tasks: how many, and the most they may have cost together. */
  inDoubt: { count: number; atMost: number };
  /** The run's result files: how many, and their total size in bytes. */
  files: RunFileTotals;
}

export interface HeadInput {
  run: RunRecord;
  reader: Reader;
  now: Date;
  quotaKeys: readonly QuotaKeyInput[];
  totals: ReportSummary;
  byModel: Report['by_model'];
  inDoubt: { count: number; atMost: number };
  files: RunFileTotals;
  review?: Report['review'];
  account: RunAccount;
}

export function assembleHead(input: HeadInput): ReportHead {
  const { run, account } = input;
  const totals = totalsOfAccount(input.totals, account);
  const inv = invocationOf(run, input.reader);
  return {
    version: 2,
    generated_at: input.now.toISOString(),
    usd_per_token: USD_PER_TOKEN,
    run: {
      id: run.id,
      name: run.manifestName,
      manifest: run.manifestPath,
      state: run.state,
      exit_code: run.exitCode,
      created_at: run.createdAt.toISOString(),
      // The first start and the last end: a re-run that had nothing to do moves neither.
      started_at: isoOrNull(run.firstStartedAt ?? run.startedAt),
      finished_at: isoOrNull(run.finishedAt),
      active_s: Math.round(run.activeMs / 1000),
      ...shardOfRun(run.id),
      invocation: reportInvocation(inv),
    },
    advice: [...adviceFor(totals, account, inv), ...reviewAdvice(account, inv)],
    totals,
    account,
    by_model: input.byModel,
    balance: {
      before: run.balanceBefore,
      after: run.balanceAfter,
      change:
        run.balanceBefore !== null && run.balanceAfter !== null
          ? roundTokens(run.balanceBefore - run.balanceAfter)
          : null,
    },
    quota: {
      period: periodOf(input.now),
      keys: input.quotaKeys.map((k) => ({
        key_fingerprint: k.keyFingerprint,
        charged: roundTokens(k.spent.charged),
        refunded: roundTokens(k.spent.refunded),
        net: roundTokens(k.spent.net),
        limit: k.limit,
        used: k.used === null ? null : roundTokens(k.used),
        source: k.source,
      })),
    },
    inDoubt: input.inDoubt,
    files: input.files,
    ...(input.review !== undefined && { review: input.review }),
  };
}

/** The whole report, its keys in the one order report.json has (the streamed writer relies on it). */
/** report.json's `run.shard` of a shard's run; nothing for a run that is not one. */
function shardOfRun(runId: string): { shard?: NonNullable<Report['run']['shard']> } {
  const parsed = parseShardRunId(runId);
  return parsed ? { shard: { index: parsed.shard.index, count: parsed.shard.count, run: parsed.base } } : {};
}

export function reportOf(head: ReportHead, inDoubt: Report['in_doubt'], tasks: ReportTask[]): Report {
  return {
    version: head.version,
    generated_at: head.generated_at,
    usd_per_token: head.usd_per_token,
    run: head.run,
    advice: head.advice,
    in_doubt: inDoubt,
    totals: head.totals,
    ...(head.account !== undefined && { account: head.account }),
    by_model: head.by_model,
    balance: head.balance,
    quota: head.quota,
    ...(head.review !== undefined && { review: head.review }),
    tasks,
    ...(head.shards ? { shards: head.shards } : {}),
  };
}

/** The head of a report already in memory (for the pure renderers of small runs). */
export function headOfReport(report: Report): ReportHead {
  const { in_doubt: inDoubt, tasks, ...head } = report;
  return {
    ...head,
    inDoubt: { count: inDoubt.length, atMost: sum(inDoubt.map((t) => t.at_most)) },
    files: { files: sum(tasks.map((t) => t.files.length)), bytes: sum(tasks.map((t) => t.bytes)) },
  };
}

export function inDoubtEntry(t: ReportTask, sentAt: Date | null): Report['in_doubt'][number] {
  return { id: t.id, model: t.model, sent_at: isoOrNull(sentAt), reason: t.error, at_most: t.estimate.max };
}

/** The task fields a report row shows: a TaskRecord, or the store's lighter ReportTaskRow. */
export type ReportTaskSource = Pick<
  TaskRecord,
  | 'taskId'
  | 'model'
  | 'imgUuid'
  | 'state'
  | 'jobStatus'
  | 'estimate'
  | 'submittedAt'
  | 'finishedAt'
  | 'jobDuration'
  | 'error'
  | 'costAssumed'
  | 'recovered'
>;

export function reportTask(
  t: ReportTaskSource &
    ({ request: Record<string, unknown> | null } | { wireBody: string }) & {
      upstreams?: readonly UpstreamLink[];
      plannedEstimate?: Estimate | null;
    },
  spend: Pick<TaskSpend, 'charged' | 'refunded' | 'jobs'> & { assumedJobs?: number },
  files: readonly FileRecord[],
  runDir: string,
  attempts: AttemptCounts,
  review?: TaskReview,
): ReportTask {
  const net = roundTokens(spend.charged - spend.refunded);
  return {
    id: t.taskId,
    model: t.model,
    img_uuid: t.imgUuid,
    status: t.state,
    job_status: t.jobStatus,
    request: 'request' in t ? t.request : parseRequest(t.wireBody),
    folder: taskFolderName(t.taskId),
    estimate: {
      tokens: t.estimate.tokens,
      min: t.estimate.min,
      max: t.estimate.max,
      basis: t.estimate.basis,
      assumed: t.estimate.assumedPrice,
    },
    charged: roundTokens(spend.charged),
    refunded: roundTokens(spend.refunded),
    net,
    net_usd: tokensToUsd(net),
    jobs: spend.jobs,
    attempts: attempts.total,
    charged_attempts: attempts.charged,
    // Any charge of the task booked at list price, not only the current job's.
    cost_assumed: t.costAssumed || (spend.assumedJobs ?? 0) > 0,
    recovered_from_doubt: t.recovered,
    submitted_at: isoOrNull(t.submittedAt),
    finished_at: isoOrNull(t.finishedAt),
    job_duration_s: t.jobDuration,
    elapsed_s:
      t.submittedAt !== null && t.finishedAt !== null
        ? Math.max(0, (t.finishedAt.getTime() - t.submittedAt.getTime()) / 1000)
        : null,
    files: files.map((f) => ({
      path: relativePath(runDir, f.path),
      kind: f.kind,
      bytes: f.bytes,
      sha256: f.sha256,
    })),
    bytes: files.reduce((n, f) => n + f.bytes, 0),
    error: t.error,
    after: (t.upstreams ?? []).map((u) => ({ name: u.name, task: u.upstreamId })),
    planned_estimate:
      t.plannedEstimate === undefined || t.plannedEstimate === null
        ? null
        : {
            tokens: t.plannedEstimate.tokens,
            min: t.plannedEstimate.min,
            max: t.plannedEstimate.max,
            basis: t.plannedEstimate.basis,
          },
    ...(review !== undefined && { review }),
  };
}

/** Counts from the tasks; money from the store's own sums, so the report adds up to the ledger. */
function summarise(
  tasks: readonly ReportTask[],
  money: Pick<LedgerSums, 'charged' | 'refunded'>,
  estimated: { tokens: number; min: number; max: number },
): ReportSummary {
  const byStatus = emptyTaskCounts();
  const notOnDisk = emptyNotOnDisk();
  for (const t of tasks) {
    // As the account counts it: a result a person rejected is a rejection.
    byStatus[t.review?.status === 'rejected' && t.status === 'done' ? 'rejected' : t.status]++;
    if (isNotOnDisk(t.status)) {
      notOnDisk[t.status].tasks++;
      notOnDisk[t.status].tokens += t.net;
    }
  }
  // The discount is seen only on jobs whose list price is known exactly (no length range).
  const priced = tasks.filter((t) => t.jobs > 0 && t.estimate.min === t.estimate.max);
  return summaryOf(
    {
      byStatus,
      jobs: sum(tasks.map((t) => t.jobs)),
      pricedTasks: priced.length,
      pricedListPrice: sum(priced.map((t) => t.estimate.tokens * t.jobs)),
      pricedCharged: sum(priced.map((t) => t.charged)),
      notOnDisk,
      recovered: tasks.filter((t) => t.recovered_from_doubt).length,
      // Sent again after a refunded job; a re-roll (one more attempt of a reviewed task) is no retry.
      retried: tasks.filter((t) => t.charged_attempts - ((t.review?.attempt ?? 1) - 1) > 1 && t.refunded > 0)
        .length,
      costAssumed: tasks.filter((t) => t.cost_assumed).length,
    },
    money,
    estimated,
  );
}

/** What a summary counts: from the tasks in memory, or from the store's aggregates (ReportModelFigures). */
export interface SummaryCounts {
  byStatus: Record<TaskState, number>;
  jobs: number;
  /** Charged tasks whose list price is known exactly, their list price (× jobs) and their charges. */
  pricedTasks: number;
  pricedListPrice: number;
  pricedCharged: number;
  /** Charged tasks without a result on disk, per state, with their net cost. */
  notOnDisk: NotOnDiskFigures;
  recovered: number;
  /** Tasks the API accepted more than once. */
  retried: number;
  costAssumed: number;
}

/** Counts from the tasks; money from the store's own sums, so the report adds up to the ledger. */
export function summaryOf(
  counts: SummaryCounts,
  money: Pick<LedgerSums, 'charged' | 'refunded'>,
  estimated: { tokens: number; min: number; max: number },
): ReportSummary {
  const listPrice = roundTokens(counts.pricedListPrice);
  const ratio = listPrice > 0 ? Math.round((counts.pricedCharged / listPrice) * 1e4) / 1e4 : null;
  const charged = roundTokens(money.charged);
  const refunded = roundTokens(money.refunded);
  const net = roundTokens(charged - refunded);
  return {
    tasks: sum(Object.values(counts.byStatus)),
    by_status: counts.byStatus,
    jobs: counts.jobs,
    estimated: {
      tokens: roundTokens(estimated.tokens),
      min: roundTokens(estimated.min),
      max: roundTokens(estimated.max),
      usd: tokensToUsd(estimated.tokens),
    },
    charged: { tokens: charged, usd: tokensToUsd(charged) },
    refunded: { tokens: refunded, usd: tokensToUsd(refunded) },
    net: { tokens: net, usd: tokensToUsd(net) },
    list_price_of_charged: counts.pricedTasks > 0 ? listPrice : null,
    charge_ratio: ratio,
    discount: ratio === null ? null : Math.round((1 - ratio) * 1e4) / 1e4,
    paid_without_result: paidWithoutResult(counts.notOnDisk),
    recovered_from_doubt: counts.recovered,
    retried: counts.retried,
    cost_assumed: counts.costAssumed,
  };
}

function paidWithoutResult(f: NotOnDiskFigures): ReportSummary['paid_without_result'] {
  const of = (state: keyof NotOnDiskFigures) => ({
    tasks: f[state].tasks,
    tokens: roundTokens(f[state].tokens),
  });
  return {
    tasks: sum(NOT_ON_DISK.map((s) => f[s].tasks)),
    tokens: roundTokens(sum(NOT_ON_DISK.map((s) => f[s].tokens))),
    unfetched: of('unfetched'),
    stalled: of('stalled'),
    lost: of('lost'),
  };
}

/** report.json's `run.invocation`: what the commands of the report carry, in the report's words. */
function reportInvocation(inv: RunInvocation): NonNullable<Report['run']['invocation']> {
  return {
    manifest: inv.manifest,
    state: inv.state,
    ...(inv.sandbox ? { sandbox: true } : {}),
    ...(inv.config !== undefined ? { config: inv.config } : {}),
    ...(inv.baseUrl !== undefined ? { base_url: inv.baseUrl } : {}),
    ...(inv.budget !== undefined ? { budget: inv.budget } : {}),
    ...(inv.allowOutsideData ? { allow_outside_data: true } : {}),
    ...(inv.allowLocalOutput ? { allow_local_output: true } : {}),
    ...(inv.allowPartial ? { allow_partial: true } : {}),
  };
}

/**
 * The invocation of a report's run, back from report.json: for report.md and `report --merge`. A report
 * written before reports kept it names the manifest and the default state file only.
 */
export function invocationOfReport(run: Report['run']): RunInvocation {
  const r = run.invocation;
  if (r === undefined) return { runId: run.id, manifest: run.manifest, state: DEFAULT_STATE_FILE };
  return {
    runId: run.id,
    manifest: r.manifest,
    state: r.state,
    ...(r.sandbox ? { sandbox: true } : {}),
    ...(r.config !== undefined ? { config: r.config } : {}),
    ...(r.base_url !== undefined ? { baseUrl: r.base_url } : {}),
    ...(r.budget !== undefined ? { budget: r.budget } : {}),
    ...(r.allow_outside_data ? { allowOutsideData: true } : {}),
    ...(r.allow_local_output ? { allowLocalOutput: true } : {}),
    ...(r.allow_partial ? { allowPartial: true } : {}),
  };
}

/**
 * The report's totals as the account states them: counts by shown state (a result rejected in review
 * is a rejection), retries that are retries (not re-rolls), the estimate that follows decisions.
 */
function totalsOfAccount(totals: ReportSummary, account: RunAccount): ReportSummary {
  return {
    ...totals,
    tasks: account.tasks,
    by_status: account.by_state,
    jobs: account.money.jobs,
    estimated: {
      tokens: account.estimate.tokens,
      min: account.estimate.min,
      max: account.estimate.max,
      usd: account.estimate.usd,
    },
    retried: account.money.by_kind.retry.tasks,
    paid_without_result: account.paid_without_result,
  };
}

/** The command of the account's next step of this kind, in code style; the fallback when it has none. */
function commandOf(account: RunAccount, action: NextAction, fallback: string): string {
  return `\`${account.next.find((s) => s.action === action)?.command ?? fallback}\``;
}

/** Results waiting for a person, and the command that decides. */
function reviewAdvice(account: RunAccount, inv: RunInvocation): string[] {
  const awaiting = account.review?.awaiting ?? 0;
  if (awaiting === 0) return [];
  const review = commandOf(account, 'review', commandLine(inv, { command: 'review' }));
  const goOn = commandOf(account, 'continue', commandLine(inv, { command: 'run' }));
  return [
    `${countOf(awaiting, 'result')} ${awaiting === 1 ? 'awaits' : 'await'} review: ${review} lists ${awaiting === 1 ? 'it' : 'them'}; approve, reject or re-roll, then ${goOn} sends on what was approved.`,
  ];
}

function adviceFor(totals: ReportSummary, account: RunAccount, inv: RunInvocation): string[] {
  const s = account.by_state;
  const advice: string[] = [];
  const goOn = commandOf(account, 'continue', commandLine(inv, { command: 'run' }));
  if (account.in_doubt.tasks > 0) {
    const n = account.in_doubt.tasks;
    const them = n === 1 ? 'it' : 'them';
    const retry = commandOf(
      account,
      'retry-in-doubt',
      commandLine(inv, { command: 'run', retryInDoubt: true }),
    );
    advice.push(
      `${countOf(n, 'task')} in doubt: sent, but the answer was lost, so the API may have charged up to ${fmtTokensWithUnit(account.in_doubt.at_most)} for ${them}. ` +
        `Check the account (its balance or job list) first; then ${retry} submits ${them} again (possibly charged twice), or leave ${them} to pay nothing more.`,
    );
  }
  const paid = totals.paid_without_result;
  if (paid.unfetched.tasks > 0) {
    advice.push(
      `${countOf(paid.unfetched.tasks, 'task')} paid, result not on disk yet (${fmtTokensWithUnit(paid.unfetched.tokens)}): the download did not finish. ` +
        `${goOn} fetches ${paid.unfetched.tasks === 1 ? 'it' : 'them'} without paying again.`,
    );
  }
  if (paid.stalled.tasks > 0) {
    advice.push(
      `${countOf(paid.stalled.tasks, 'task')} stalled (${fmtTokensWithUnit(paid.stalled.tokens)} paid): the service is past the deadline and still working. ` +
        `${goOn} keeps watching ${paid.stalled.tasks === 1 ? 'it' : 'them'}.`,
    );
  }
  if (paid.lost.tasks > 0) {
    advice.push(
      `${countOf(paid.lost.tasks, 'task')} paid, result lost (${fmtTokensWithUnit(paid.lost.tokens)}): the service no longer has ${paid.lost.tasks === 1 ? 'it' : 'them'}. The errors say why; ask the service about a refund.`,
    );
  }
  // Unfetched and stalled tasks are unfinished too, but said above with what they cost; tasks held by a
  // review are said with the review.
  const unfinished = sum(
    UNFINISHED.filter((state) => !isNotOnDisk(state) && state !== 'awaiting_review').map((state) => s[state]),
  );
  if (unfinished > 0) {
    advice.push(`${countOf(unfinished, 'task')} unfinished: ${goOn} continues where it stopped.`);
  }
  if (s.failed > 0) {
    advice.push(
      `${countOf(s.failed, 'task')} failed; failed jobs were refunded (${fmtTokensWithUnit(totals.refunded.tokens)}). The errors say why.`,
    );
  }
  if (account.rejected.by_api > 0) {
    advice.push(
      `${countOf(account.rejected.by_api, 'task')} rejected by the API and not charged: fix the request in the manifest (see the errors) and run again.`,
    );
  }
  if (s.blocked > 0) advice.push(`${countOf(s.blocked, 'task')} blocked: the errors say what to do.`);
  return advice;
}

function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

export function isoOrNull(date: Date | null): string | null {
  return date === null ? null : date.toISOString();
}

function relativePath(runDir: string, path: string): string {
  return relative(runDir, path).split(sep).join('/');
}
