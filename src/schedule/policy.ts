// Whether a firing that came due runs: on time, late (the process was down or the machine slept),
// and whether the latest missed one is caught up. Pure: the schedule and the clock come in.

import type { CronSchedule } from './next.js';

export type DueDecision =
  | { kind: 'none' }
  | { kind: 'fire'; at: Date; late: boolean }
  | { kind: 'missed'; latest: Date };

export interface DueInput {
  schedule: CronSchedule;
  /** Everything up to here was handled (fired, skipped or reported missed). */
  since: Date;
  now: Date;
  catchUp: boolean;
  /** A firing this late still counts as on time (timers wake a little late, processes restart). */
  graceMs: number;
}

/**
 * Only the latest due firing can run: a burst of catch-up runs after a week offline would spend a
 * week's money at once, so older ones are never replayed.
 */
export function dueFiring(input: DueInput): DueDecision {
  const latest = input.schedule.latest(input.since, input.now);
  if (latest === undefined) return { kind: 'none' };
  const lateBy = input.now.getTime() - latest.getTime();
  if (lateBy <= input.graceMs) return { kind: 'fire', at: latest, late: false };
  if (input.catchUp) return { kind: 'fire', at: latest, late: true };
  return { kind: 'missed', latest };
}

/** Where a restarted scheduler takes over: after the last firing it recorded, else now (nothing missed). */
export function resumePoint(
  record: { lastFiredAt: Date | null; nextFireAt: Date | null } | undefined,
  now: Date,
): Date {
  if (record?.lastFiredAt) return record.lastFiredAt;
  // Started before but never fired: what came due from its next firing on was missed.
  if (record?.nextFireAt) return new Date(Math.min(now.getTime(), record.nextFireAt.getTime() - 1));
  return now;
}
