// What `schedule` remembers per manifest across restarts, so missed firings are known
// (and not replayed) and `status` can show the next firing.

import type { Db } from './db.js';
import { fromIso, fromIsoOrNull, toIso } from './time.js';
import type { Clock, ScheduleRecord } from './types.js';

interface ScheduleRow {
  manifest_path: string;
  last_fired_at: string | null;
  last_run_id: string | null;
  next_fire_at: string | null;
  updated_at: string;
}

function toSchedule(row: ScheduleRow): ScheduleRecord {
  return {
    manifestPath: row.manifest_path,
    lastFiredAt: fromIsoOrNull(row.last_fired_at),
    lastRunId: row.last_run_id,
    nextFireAt: fromIsoOrNull(row.next_fire_at),
    updatedAt: fromIso(row.updated_at),
  };
}

export class ScheduleStore {
  readonly #now: Clock;
  readonly #recordFiring;
  readonly #claimFiring;
  readonly #setNextFire;
  readonly #unclaimFiring;
  readonly #selectSchedule;
  readonly #selectSchedules;

  constructor(db: Db, now: Clock) {
    this.#now = now;
    this.#recordFiring = db.prepare<{
      manifestPath: string;
      firedAt: string;
      runId: string | null;
      nextFireAt: string | null;
      now: string;
    }>(
      `INSERT INTO schedules (manifest_path, last_fired_at, last_run_id, next_fire_at, updated_at)
       VALUES (:manifestPath, :firedAt, :runId, :nextFireAt, :now)
       ON CONFLICT (manifest_path) DO UPDATE SET last_fired_at = excluded.last_fired_at,
         last_run_id = coalesce(excluded.last_run_id, schedules.last_run_id), next_fire_at = excluded.next_fire_at, updated_at = excluded.updated_at`,
    );
    // One statement decides, on either backend: the row moves forward to this slot only if no one has
    // handled it or a later one. PostgreSQL locks the conflicting row and re-reads it before the WHERE,
    // SQLite runs one writer at a time, so of any number of schedulers exactly one sees a change.
    this.#claimFiring = db.prepare<{
      manifestPath: string;
      firedAt: string;
      nextFireAt: string | null;
      now: string;
    }>(
      `INSERT INTO schedules (manifest_path, last_fired_at, last_run_id, next_fire_at, updated_at)
       VALUES (:manifestPath, :firedAt, NULL, :nextFireAt, :now)
       ON CONFLICT (manifest_path) DO UPDATE SET last_fired_at = excluded.last_fired_at,
         next_fire_at = excluded.next_fire_at, updated_at = excluded.updated_at
       WHERE schedules.last_fired_at IS NULL OR schedules.last_fired_at < excluded.last_fired_at`,
    );
    // Only the claim this scheduler made: a row another one moved on since is left alone.
    this.#unclaimFiring = db.prepare<{
      manifestPath: string;
      firedAt: string;
      before: string | null;
      now: string;
    }>(
      `UPDATE schedules SET last_fired_at = :before, updated_at = :now
       WHERE manifest_path = :manifestPath AND last_fired_at = :firedAt`,
    );
    this.#setNextFire = db.prepare<{ manifestPath: string; nextFireAt: string | null; now: string }>(
      `INSERT INTO schedules (manifest_path, next_fire_at, updated_at) VALUES (:manifestPath, :nextFireAt, :now)
       ON CONFLICT (manifest_path) DO UPDATE SET next_fire_at = excluded.next_fire_at,
         updated_at = excluded.updated_at`,
    );
    this.#selectSchedule = db.prepare<[string], ScheduleRow>(
      'SELECT * FROM schedules WHERE manifest_path = ?',
    );
    this.#selectSchedules = db.prepare<[], ScheduleRow>('SELECT * FROM schedules ORDER BY manifest_path');
  }

  /** A firing happened (`runId` null when it was skipped, e.g. the previous run was still going: the last run id is kept). */
  recordFiring(
    manifestPath: string,
    firing: { firedAt: Date; runId: string | null; nextFireAt: Date | null },
  ): void {
    this.#recordFiring.run({
      manifestPath,
      firedAt: toIso(firing.firedAt),
      runId: firing.runId,
      nextFireAt: firing.nextFireAt === null ? null : toIso(firing.nextFireAt),
      now: toIso(this.#now()),
    });
  }

  /**
   * Takes the firing due `firedAt` for this scheduler: true for exactly one caller across every process
   * on the state; false when it (or a later firing) was already handled elsewhere.
   */
  claimFiring(manifestPath: string, firing: { firedAt: Date; nextFireAt: Date | null }): boolean {
    const changed = this.#claimFiring.run({
      manifestPath,
      firedAt: toIso(firing.firedAt),
      nextFireAt: firing.nextFireAt === null ? null : toIso(firing.nextFireAt),
      now: toIso(this.#now()),
    }).changes;
    return changed === 1;
  }

  /**
   * Gives back the firing due `firedAt` that claimFiring took and that made no run (the scheduler stopped
   * first): the row's last firing is `before` again, so the slot is not counted as fired.
   */
  unclaimFiring(manifestPath: string, firing: { firedAt: Date; before: Date | null }): boolean {
    return (
      this.#unclaimFiring.run({
        manifestPath,
        firedAt: toIso(firing.firedAt),
        before: firing.before === null ? null : toIso(firing.before),
        now: toIso(this.#now()),
      }).changes === 1
    );
  }

  setNextFire(manifestPath: string, nextFireAt: Date | null): void {
    this.#setNextFire.run({
      manifestPath,
      nextFireAt: nextFireAt === null ? null : toIso(nextFireAt),
      now: toIso(this.#now()),
    });
  }

  getSchedule(manifestPath: string): ScheduleRecord | undefined {
    const row = this.#selectSchedule.get(manifestPath);
    return row === undefined ? undefined : toSchedule(row);
  }

  listSchedules(): ScheduleRecord[] {
    return this.#selectSchedules.all().map(toSchedule);
  }
}
