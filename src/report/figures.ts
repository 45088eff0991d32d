// The figures report.md and the gallery both show, built once: the cost table's row of a model or of
// the whole run, and the sentences about money by kind. Pure.

import type { RunAccount } from '../account/index.js';
import { countOf, fmtCount, fmtTokensWithUnit } from '../util/numbers.js';
import { fmtPercent, fmtTokens, fmtUsd } from './format.js';
import type { ReportSummary } from './schema.js';

/** The cost table's columns, in the order of `costCells`. */
export const COST_COLUMNS = [
  'Tasks',
  'Jobs',
  'Done',
  'Failed',
  'In doubt',
  'Not on disk',
  'Estimated',
  'Charged',
  'Refunded',
  'Net',
  'Net USD',
  'Charged ÷ list',
] as const;

/** One row of the cost table (a model, or the total), formatted. */
export function costCells(s: ReportSummary): string[] {
  return [
    fmtCount(s.tasks),
    fmtCount(s.jobs),
    fmtCount(s.by_status.done),
    fmtCount(s.by_status.failed),
    fmtCount(s.by_status.in_doubt),
    fmtCount(s.paid_without_result.tasks),
    fmtTokens(s.estimated.tokens),
    fmtTokens(s.charged.tokens),
    fmtTokens(s.refunded.tokens),
    fmtTokens(s.net.tokens),
    fmtUsd(s.net.usd),
    fmtPercent(s.charge_ratio),
  ];
}

/**
 * What the run's money went to beyond each task's first job, one phrase each: automatic retries,
 * re-rolls and retries of doubt, never one called another. Empty when every job was a first one.
 */
export function moneyByKindPhrases(account: RunAccount | undefined): string[] {
  if (account === undefined) return [];
  const k = account.money.by_kind;
  return [
    k.retry.jobs > 0
      ? `${countOf(k.retry.tasks, 'task')} retried after a failed, refunded job (${countOf(k.retry.jobs, 'retry', 'retries')}, net ${fmtTokensWithUnit(k.retry.net)})`
      : '',
    k.reroll.jobs > 0
      ? `${countOf(k.reroll.jobs, 're-roll')} charged (net ${fmtTokensWithUnit(k.reroll.net)})`
      : '',
    k.doubt_retry.jobs > 0
      ? `${countOf(k.doubt_retry.tasks, 'task')} sent again after doubt (net ${fmtTokensWithUnit(k.doubt_retry.net)})`
      : '',
    k.sent_again.jobs > 0
      ? `${countOf(k.sent_again.tasks, 'task')} sent again with a changed request (net ${fmtTokensWithUnit(k.sent_again.net)})`
      : '',
  ].filter(Boolean);
}
