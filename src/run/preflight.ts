// Whether a run may start, from figures gathered by the caller. Pure, so every refusal is tested as a table.

import { fromMicro, roomText, tokensOf, toMicro } from '../util/money.js';

export interface PreflightInput {
  /** Worst case of the tasks still to submit. */
  remainingMax: number;
  remainingTokens: number;
  /** Already charged net for this run (a resumed run). */
  chargedSoFar: number;
  /**
   * Worst cases the run holds that the tasks to send do not count again: tasks in doubt or in flight may
   * have been charged, so the budget keeps room for them.
   */
  reservedSoFar?: number;
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

const fmt = tokensOf;

/**
 * Compared in micro-tokens: in floats a budget of 1.2 with 0.8 charged leaves 0.39999999999999997, and a
 * re-roll of 0.4 the store had let in was refused at the next run, which was then stuck.
 */
export function decidePreflight(input: PreflightInput): PreflightDecision {
  const refusals: string[] = [];
  const leftAfter: PreflightDecision['leftAfter'] = {};
  const need = input.remainingMax;
  const needMicro = toMicro(need);
  if (input.balance !== undefined) {
    leftAfter.balance = fromMicro(toMicro(input.balance) - needMicro);
    if (needMicro > toMicro(input.balance)) {
      refusals.push(`the run can cost up to ${fmt(need)} but the balance is ${fmt(input.balance)}`);
    }
  }
  if (input.quota) {
    const roomMicro = toMicro(input.quota.limit) - toMicro(input.quota.used);
    const room = fromMicro(roomMicro);
    leftAfter.quota = fromMicro(roomMicro - needMicro);
    if (needMicro > roomMicro) {
      refusals.push(
        roomMicro >= 0
          ? `the run can cost up to ${fmt(need)} but only ${fmt(room)} of the quota (${fmt(input.quota.limit)}, ${input.quota.source}) are left this period`
          : `the run can cost up to ${fmt(need)} but the quota (${fmt(input.quota.limit)}, ${input.quota.source}) is already ${fmt(-room)} over this period`,
      );
    }
  }
  if (input.budget !== undefined) {
    const reservedMicro = toMicro(input.reservedSoFar ?? 0);
    const roomMicro = toMicro(input.budget) - toMicro(input.chargedSoFar) - reservedMicro;
    leftAfter.budget = fromMicro(roomMicro - needMicro);
    if (needMicro > roomMicro) {
      const held =
        reservedMicro > 0
          ? `, ${fmt(fromMicro(reservedMicro))} reserved for tasks in doubt or in flight`
          : '';
      refusals.push(
        `the run can cost up to ${fmt(need)} but the budget of ${fmt(input.budget)} ${roomText(roomMicro)} (${fmt(input.chargedSoFar)} charged already${held})`,
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
