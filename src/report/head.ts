// The run-level part of the report (everything but the task lists) from the store's aggregates, so the
// tasks of a run of any size are summed without being loaded: the figures are those assembleReport
// computes from every task in memory, up to the float noise of adding in another order (all rounded).

import { describeRun, invocationCommand } from '../account/index.js';
import { invocationOf } from '../results/invocation.js';
import { reportReview } from '../review/index.js';
import type { ReportModelFigures, Store } from '../store/index.js';
import { emptyNotOnDisk, emptyTaskCounts, NOT_ON_DISK, TASK_STATES } from '../store/index.js';
import {
  assembleHead,
  quotaOfKey,
  type ReportHead,
  type ReportOptions,
  type SummaryCounts,
  shownRun,
  summaryOf,
  UnknownRunError,
} from './build.js';

export function collectReportHead(store: Store, runId: string, opts: ReportOptions): ReportHead {
  const recorded = store.runs.getRun(runId);
  if (recorded === undefined) throw new UnknownRunError(runId);
  const run = shownRun(store, recorded, opts);
  const figures = store.reportReads.reportModelFigures(runId);
  const byModel = figures.map((f) => ({
    model: f.model,
    ...summaryOf(countsOf([f]), f, estimatedOf([f])),
  }));
  return assembleHead({
    run,
    reader: opts.reader ?? { state: store.file },
    now: opts.now,
    quotaKeys: store.spend.runKeys(runId).map((key) => quotaOfKey(store, key, opts.now, opts.quota)),
    totals: summaryOf(countsOf(figures), store.ledger.runSpent(runId), estimatedOf(figures)),
    byModel,
    inDoubt: {
      count: sum(figures.map((f) => f.byState.in_doubt)),
      atMost: sum(figures.map((f) => f.inDoubtMax)),
    },
    files: store.reportReads.runFileTotals(runId),
    ...withReview(reportReview(store, runId)),
    account: describeRun(store, runId, {
      command: invocationCommand(invocationOf(run, opts.reader ?? { state: store.file })),
      ...(opts.shownState !== undefined ? { shownState: opts.shownState } : {}),
    }),
  });
}

function withReview(review: ReportHead['review']): { review?: NonNullable<ReportHead['review']> } {
  return review === undefined ? {} : { review };
}

/** The counts of several models together. */
function countsOf(figures: readonly ReportModelFigures[]): SummaryCounts {
  const byStatus = emptyTaskCounts();
  const notOnDisk = emptyNotOnDisk();
  for (const f of figures) {
    for (const s of TASK_STATES) byStatus[s] += f.byState[s];
    for (const s of NOT_ON_DISK) {
      notOnDisk[s].tasks += f.notOnDisk[s].tasks;
      notOnDisk[s].tokens += f.notOnDisk[s].tokens;
    }
  }
  return {
    byStatus,
    jobs: sum(figures.map((f) => f.jobs)),
    pricedTasks: sum(figures.map((f) => f.pricedTasks)),
    pricedListPrice: sum(figures.map((f) => f.pricedListPrice)),
    pricedCharged: sum(figures.map((f) => f.pricedCharged)),
    notOnDisk,
    recovered: sum(figures.map((f) => f.recovered)),
    retried: sum(figures.map((f) => f.retried)),
    costAssumed: sum(figures.map((f) => f.costAssumed)),
  };
}

function estimatedOf(figures: readonly ReportModelFigures[]): { tokens: number; min: number; max: number } {
  return {
    tokens: sum(figures.map((f) => f.estimated)),
    min: sum(figures.map((f) => f.estimatedMin)),
    max: sum(figures.map((f) => f.estimatedMax)),
  };
}

function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}
