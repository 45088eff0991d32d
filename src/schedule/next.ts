// When a manifest's `schedule` fires: the cron package parses the expression and steps through wall
// time in the manifest's timezone. Its steps are right along a continuous sequence of firings (a
// daily 02:30 fires once on both change days, an hourly one fires for every real hour), but a step
// taken from inside the repeated hour of an autumn change can land on the second 02:30 of a day
// that already had one (a scheduler restarted at 02:10 the second time round). So when a firing falls
// in a repeated hour, we walk the sequence from the first pass, as a scheduler running through it does.

import { CronTime } from 'cron';
import { offsetMinutes } from './zone.js';

/** A time-zone change is at most a couple of hours; changes are months apart. */
const NEAR_CHANGE_MS = 3 * 3_600_000;
/** Guards a loop against a library bug rather than a real schedule (a year of per-minute firings). */
const MAX_STEPS = 600_000;

export type ParsedSchedule = { ok: true; schedule: CronSchedule } | { ok: false; message: string };

export class CronSchedule {
  readonly expression: string;
  readonly timezone: string;
  readonly #time: CronTime;

  private constructor(expression: string, timezone: string, time: CronTime) {
    this.expression = expression;
    this.timezone = timezone;
    this.#time = time;
  }

  /**
   * Parses a cron expression of 5 fields (minute first) or 6 (second first), read in `timezone`
   * (UTC when the manifest names none, never the machine's zone: a server moved abroad keeps its hours).
   */
  static parse(expression: string, timezone = 'UTC'): ParsedSchedule {
    const fields = expression.trim().split(/\s+/).length;
    if (fields !== 5 && fields !== 6) {
      return {
        ok: false,
        message: `schedule: must be a cron expression of 5 or 6 fields, like "0 3 * * *", got "${expression}" (${fields} field${fields === 1 ? '' : 's'})`,
      };
    }
    try {
      return {
        ok: true,
        schedule: new CronSchedule(expression, timezone, new CronTime(expression, timezone)),
      };
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      const what = /timezone/i.test(reason)
        ? `timezone: must be an IANA time zone, like Europe/Paris or UTC, got "${timezone}"`
        : `schedule: must be a valid cron expression, like "0 3 * * *", got "${expression}" (${reason})`;
      return { ok: false, message: what };
    }
  }

  /** The first firing strictly after `after`. */
  next(after: Date): Date {
    const found = this.#stepPast(this.#step(after), after);
    const twin = this.#firstPassTwin(found);
    if (twin === undefined || twin.getTime() > after.getTime()) return found;
    return this.#stepPast(twin, after);
  }

  /** The latest firing in (`after`, `notAfter`], or undefined when there is none. */
  latest(after: Date, notAfter: Date): Date | undefined {
    if (notAfter.getTime() <= after.getTime()) return undefined;
    // Look back in growing windows so a per-second schedule down for a month costs few steps.
    for (let window = 1000; ; window *= 2) {
      const from = Math.max(after.getTime(), notAfter.getTime() - window);
      let found = this.next(new Date(from));
      if (found.getTime() <= notAfter.getTime()) {
        for (let steps = 0; steps < MAX_STEPS; steps++) {
          const following = this.next(found);
          if (following.getTime() > notAfter.getTime()) return found;
          found = following;
        }
        return found;
      }
      if (from === after.getTime()) return undefined;
    }
  }

  /** The next `count` firings after `after`, for logs and tests. */
  upcoming(after: Date, count: number): Date[] {
    const out: Date[] = [];
    let at = after;
    for (let i = 0; i < count; i++) {
      at = this.next(at);
      out.push(at);
    }
    return out;
  }

  #step(from: Date): Date {
    return this.#time.getNextDateFrom(from, this.timezone).toJSDate();
  }

  /** When `at` is the second occurrence of its wall time (autumn), the first occurrence; else undefined. */
  #firstPassTwin(at: Date): Date | undefined {
    const now = offsetMinutes(at, this.timezone);
    const earlier = offsetMinutes(new Date(at.getTime() - NEAR_CHANGE_MS), this.timezone);
    if (earlier <= now) return undefined;
    const twin = new Date(at.getTime() - (earlier - now) * 60_000);
    return offsetMinutes(twin, this.timezone) === earlier ? twin : undefined;
  }

  #stepPast(first: Date, after: Date): Date {
    let at = first;
    for (let steps = 0; at.getTime() <= after.getTime(); steps++) {
      if (steps >= MAX_STEPS) {
        throw new Error(`schedule "${this.expression}": found no firing after ${after.toISOString()}`);
      }
      at = this.#step(at);
    }
    return at;
  }
}
