// Whether a run may start, from figures gathered by the caller. Pure, so every refusal is tested as a table.

import { tokensPlainText } from '../util/money.js';

export interface PreflightInput {
  /** Worst case of the tasks still to submit. */
  remainingMax: number;
  remainingTokens: number;
  /** Already charged net for this run (a resumed run). */
  chargedSoFar: number;
  balance?: number;
  quota?: { limit: number; used: number; source: string };
  budget?: number;
  allowPartial: boolean;
}

export interface PreflightDecision {
  ok: boolean;
  /** One sentence per limit the run would exceed. */
  refusals: string[];
  /** Tokens left under each limit after the run, for the summary. */
  leftAfter: { balance?: number; quota?: number; budget?: number };
}

const fmt = tokensPlainText;

export function decidePreflight(input: PreflightInput): PreflightDecision {
  const refusals: string[] = [];
  const leftAfter: PreflightDecision['leftAfter'] = {};
  const need = input.remainingMax;
  if (input.balance !== undefined) {
    leftAfter.balance = input.balance - need;
    if (need > input.balance) {
      refusals.push(`the run can cost up to ${fmt(need)} tokens but the balance is ${fmt(input.balance)}`);
    }
  }
  if (input.quota) {
    const room = input.quota.limit - input.quota.used;
    leftAfter.quota = room - need;
    if (need > room) {
      refusals.push(
        `the run can cost up to ${fmt(need)} tokens but only ${fmt(room)} of the quota (${fmt(input.quota.limit)}, ${input.quota.source}) are left this period`,
      );
    }
  }
  if (input.budget !== undefined) {
    const room = input.budget - input.chargedSoFar;
    leftAfter.budget = room - need;
    if (need > room) {
      refusals.push(
        `the run can cost up to ${fmt(need)} tokens but the budget leaves ${fmt(room)} (budget ${fmt(input.budget)}, ${fmt(input.chargedSoFar)} charged already)`,
      );
    }
  }
  return { ok: refusals.length === 0 || input.allowPartial, refusals, leftAfter };
}

/**
 * The budget is a hard cap: a task is submitted only if what is charged, plus the worst case of the
 * tasks in flight, plus its own worst case, fits. Every figure is in micro-tokens (whole numbers), so
 * the comparison is exact.
 */
export function fitsBudget(
  budgetMicro: number | undefined,
  chargedMicro: number,
  inFlightMaxMicro: number,
  taskMaxMicro: number,
): boolean {
  if (budgetMicro === undefined) return true;
  return chargedMicro + inFlightMaxMicro + taskMaxMicro <= budgetMicro;
}
