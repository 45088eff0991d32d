// `budget_per_period`: all the scheduled runs of one manifest together stay under a cap per ledger
// period (a UTC calendar month). A run starts only when its worst case fits in what is left.

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

export function checkPeriodBudget(input: PeriodBudgetInput): PeriodBudgetDecision {
  const reserved = input.reserved ?? 0;
  const remaining = Math.max(0, input.cap - input.spent - reserved);
  if (input.worstCase <= remaining) return { ok: true, remaining };
  const held =
    reserved > 0 ? ` (and ${fmt(reserved)} reserved for tasks in flight, in doubt or re-rolled)` : '';
  return {
    ok: false,
    remaining,
    message: `budget_per_period: ${fmt(input.spent)} of ${fmt(input.cap)} tokens spent in ${input.period}${held}, ${fmt(remaining)} left, but the run can cost up to ${fmt(input.worstCase)}; raise budget_per_period or shrink the manifest`,
  };
}

/** Tokens come in fractions (0.2 per image): two decimals at most, no trailing zeros. */
function fmt(n: number): string {
  return String(Number(n.toFixed(2)));
}
