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
  claim_holder: string | null;
  claim_expires_at: string | null;
}

/** Compared as text with the expiry: a claim whose holder is gone counts as expired, whatever its expiry. */
const ANY_EXPIRY = '9999-12-31T23:59:59.999Z';

function toSchedule(row: ScheduleRow): ScheduleRecord {
  return {
    manifestPath: row.manifest_path,
    lastFiredAt: fromIsoOrNull(row.last_fired_at),
    lastRunId: row.last_run_id,
    nextFireAt: fromIsoOrNull(row.next_fire_at),
    updatedAt: fromIso(row.updated_at),
    ...(row.claim_holder !== null &&
      row.claim_expires_at !== null && {
        claim: { holder: row.claim_holder, expiresAt: fromIso(row.claim_expires_at) },
      }),
  };
}

export class ScheduleStore {
  readonly #now: Clock;
  readonly #recordFiring;
  readonly #claimFiring;
  readonly #setNextFire;
  readonly #unclaimFiring;
  /** What happens to a claim after it is made: taken over, renewed, settled. */
  readonly #claims;
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
         last_run_id = coalesce(excluded.last_run_id, schedules.last_run_id), next_fire_at = excluded.next_fire_at, updated_at = excluded.updated_at,
         claim_holder = NULL, claim_expires_at = NULL`,
    );
    // One statement decides, on either backend: the row moves forward to this slot only if no one has
    // handled it or a later one. PostgreSQL locks the conflicting row and re-reads it before the WHERE,
    // SQLite runs one writer at a time, so of any number of schedulers exactly one sees a change.
    // The claim names its holder and lives until claim_expires_at, so that a slot whose claimer died before
    // making its run is not counted as fired for good (takeOverFiring).
    this.#claimFiring = db.prepare<{
      manifestPath: string;
      firedAt: string;
      nextFireAt: string | null;
      now: string;
      holder: string;
      expiresAt: string;
    }>(
      `INSERT INTO schedules (manifest_path, last_fired_at, last_run_id, next_fire_at, updated_at, claim_holder, claim_expires_at)
       VALUES (:manifestPath, :firedAt, NULL, :nextFireAt, :now, :holder, :expiresAt)
       ON CONFLICT (manifest_path) DO UPDATE SET last_fired_at = excluded.last_fired_at,
         next_fire_at = excluded.next_fire_at, updated_at = excluded.updated_at,
         claim_holder = excluded.claim_holder, claim_expires_at = excluded.claim_expires_at
       WHERE schedules.last_fired_at IS NULL OR schedules.last_fired_at < excluded.last_fired_at`,
    );
    this.#claims = prepareClaimMoves(db);
    // Only the claim this scheduler made: a row another one moved on since is left alone.
    this.#unclaimFiring = db.prepare<{
      manifestPath: string;
      firedAt: string;
      before: string | null;
      now: string;
    }>(
      `UPDATE schedules SET last_fired_at = :before, updated_at = :now, claim_holder = NULL, claim_expires_at = NULL
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
   * Takes the firing due `firedAt` for `holder`, its claim living `ttlMs` unless renewed: true for exactly
   * one caller across every process on the state; false when it (or a later firing) was already handled
   * elsewhere.
   */
  claimFiring(
    manifestPath: string,
    firing: { firedAt: Date; nextFireAt: Date | null; holder: string; ttlMs: number },
  ): boolean {
    const now = this.#now();
    const changed = this.#claimFiring.run({
      manifestPath,
      firedAt: toIso(firing.firedAt),
      nextFireAt: firing.nextFireAt === null ? null : toIso(firing.nextFireAt),
      now: toIso(now),
      holder: firing.holder,
      expiresAt: toIso(new Date(now.getTime() + firing.ttlMs)),
    }).changes;
    return changed === 1;
  }

  /**
   * Takes over the claim of the firing due `firedAt` that `from` holds and that outlived it: expired, or
   * `fromGone` (its process is gone). True for exactly one caller; false when the claim was settled,
   * renewed, or taken by another since it was read.
   */
  takeOverFiring(
    manifestPath: string,
    firing: { firedAt: Date; from: string; fromGone: boolean; holder: string; ttlMs: number },
  ): boolean {
    const now = this.#now();
    return (
      this.#claims.takeOver.run({
        manifestPath,
        firedAt: toIso(firing.firedAt),
        from: firing.from,
        expiredBy: firing.fromGone ? ANY_EXPIRY : toIso(now),
        holder: firing.holder,
        expiresAt: toIso(new Date(now.getTime() + firing.ttlMs)),
        now: toIso(now),
      }).changes === 1
    );
  }

  /** The holder's heartbeat while the firing's run is not made: false when the claim is no longer its own. */
  renewClaim(manifestPath: string, firing: { firedAt: Date; holder: string; ttlMs: number }): boolean {
    return (
      this.#claims.renew.run({
        manifestPath,
        firedAt: toIso(firing.firedAt),
        holder: firing.holder,
        expiresAt: toIso(new Date(this.#now().getTime() + firing.ttlMs)),
      }).changes === 1
    );
  }

  /** The holder stopped before making the firing's run: its claim lapses now, for another scheduler to take. */
  expireClaim(manifestPath: string, firing: { firedAt: Date; holder: string }): void {
    this.#claims.renew.run({
      manifestPath,
      firedAt: toIso(firing.firedAt),
      holder: firing.holder,
      expiresAt: toIso(this.#now()),
    });
  }

  /** The firing was handled without a run (skipped, refused, failed): nobody is to take it over. */
  settleClaim(manifestPath: string, firing: { firedAt: Date; holder: string }): void {
    this.#claims.settle.run({
      manifestPath,
      firedAt: toIso(firing.firedAt),
      holder: firing.holder,
      now: toIso(this.#now()),
    });
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

/** The statements that move a claim after it is made (ScheduleStore#claims). */
function prepareClaimMoves(db: Db) {
  return {
    // As the claim: one statement decides, so of any number of schedulers that find the claim outlived
    // its holder exactly one takes it.
    takeOver: db.prepare<{
      manifestPath: string;
      firedAt: string;
      from: string;
      expiredBy: string;
      holder: string;
      expiresAt: string;
      now: string;
    }>(
      `UPDATE schedules SET claim_holder = :holder, claim_expires_at = :expiresAt, updated_at = :now
         WHERE manifest_path = :manifestPath AND last_fired_at = :firedAt AND claim_holder = :from
           AND claim_expires_at <= :expiredBy`,
    ),
    renew: db.prepare<{
      manifestPath: string;
      firedAt: string;
      holder: string;
      expiresAt: string;
    }>(
      `UPDATE schedules SET claim_expires_at = :expiresAt
         WHERE manifest_path = :manifestPath AND last_fired_at = :firedAt AND claim_holder = :holder`,
    ),
    settle: db.prepare<{ manifestPath: string; firedAt: string; holder: string; now: string }>(
      `UPDATE schedules SET claim_holder = NULL, claim_expires_at = NULL, updated_at = :now
         WHERE manifest_path = :manifestPath AND last_fired_at = :firedAt AND claim_holder = :holder`,
    ),
  };
}
