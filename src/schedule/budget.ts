// `budget_per_period`: all the scheduled runs of one manifest together stay under a cap per ledger
// period (a UTC calendar month). A run starts only when its worst case fits in what is left.

import { fromMicro, tokensOf, toMicro } from '../util/money.js';
import { fmtTokensExact } from '../util/numbers.js';

export type PeriodBudgetDecision =
  | { ok: true; remaining: number }
  | { ok: false; remaining: number; message: string };

export interface PeriodBudgetInput {
  cap: number;
  /** Net spend (charged − refunded) of the manifest's runs in the period, from the ledger. */
  spent: number;
  /** Worst cases the manifest's runs hold open (in flight, in doubt, re-rolls asked for): they may still charge. */
  reserved?: number;
  /** The most the run can still charge (the sum of its tasks' maximum estimates). */
  worstCase: number;
  /** `YYYY-MM`, for the message. */
  period: string;
}

/** Compared in micro-tokens, as the store compares every spend: float sums of 0.2s drift. */
export function checkPeriodBudget(input: PeriodBudgetInput): PeriodBudgetDecision {
  const reserved = input.reserved ?? 0;
  const leftMicro = toMicro(input.cap) - toMicro(input.spent) - toMicro(reserved);
  const remaining = fromMicro(Math.max(0, leftMicro));
  if (toMicro(input.worstCase) <= Math.max(0, leftMicro)) return { ok: true, remaining };
  const held =
    reserved > 0 ? ` (and ${tokensOf(reserved)} reserved for tasks in flight, in doubt or re-rolled)` : '';
  // Spent past the cap (lowered, or charged more than the worst cases held): by how much, never "0 left".
  const room =
    leftMicro >= 0
      ? `${tokensOf(fromMicro(leftMicro))} left`
      : `already ${tokensOf(fromMicro(-leftMicro))} over`;
  return {
    ok: false,
    remaining,
    message: `budget_per_period: ${fmtTokensExact(input.spent)} of ${tokensOf(input.cap)} spent in ${input.period}${held}, ${room}, but the run can cost up to ${tokensOf(input.worstCase)}; raise budget_per_period or shrink the manifest`,
  };
}
