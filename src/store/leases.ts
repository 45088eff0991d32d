// "Two `run`s of the same run id never proceed at once": a lease row with an expiry, renewed by a
// heartbeat. A holder that died (kill -9, reboot) stops renewing, and its lease can be taken once expired.

import type { Db } from './db.js';
import { fromIso, toIso } from './time.js';
import type { Clock, LeaseRecord, LeaseResult } from './types.js';

interface LeaseRow {
  name: string;
  holder: string;
  acquired_at: string;
  heartbeat_at: string;
  expires_at: string;
}

function toLease(row: LeaseRow): LeaseRecord {
  return {
    name: row.name,
    holder: row.holder,
    acquiredAt: fromIso(row.acquired_at),
    heartbeatAt: fromIso(row.heartbeat_at),
    expiresAt: fromIso(row.expires_at),
  };
}

/** Who holds a lease, readable in `status`: `pid@host#nonce`. The nonce tells apart two processes that reuse a pid. */
export function leaseHolder(pid: number, host: string, nonce: string): string {
  return `${pid}@${host}#${nonce}`;
}

export class LeaseStore {
  readonly #now: Clock;
  readonly #takeLease;
  readonly #selectLease;
  readonly #renewLease;
  readonly #deleteLease;
  readonly #acquire;

  constructor(db: Db, now: Clock) {
    this.#now = now;
    // One statement decides: free, expired, or already ours. Anything else leaves the row untouched.
    this.#takeLease = db.prepare<{ name: string; holder: string; now: string; expiresAt: string }>(
      `INSERT INTO leases (name, holder, acquired_at, heartbeat_at, expires_at)
       VALUES (:name, :holder, :now, :now, :expiresAt)
       ON CONFLICT (name) DO UPDATE SET
         acquired_at = CASE WHEN leases.holder = excluded.holder THEN leases.acquired_at ELSE excluded.acquired_at END,
         holder = excluded.holder, heartbeat_at = excluded.heartbeat_at, expires_at = excluded.expires_at
       WHERE leases.holder = excluded.holder OR leases.expires_at <= excluded.heartbeat_at`,
    );
    this.#selectLease = db.prepare<[string], LeaseRow>('SELECT * FROM leases WHERE name = ?');
    this.#renewLease = db.prepare<{ name: string; holder: string; now: string; expiresAt: string }>(
      `UPDATE leases SET heartbeat_at = :now, expires_at = :expiresAt WHERE name = :name AND holder = :holder`,
    );
    this.#deleteLease = db.prepare<[string, string]>('DELETE FROM leases WHERE name = ? AND holder = ?');
    this.#acquire = db.transaction((name: string, holder: string, ttlMs: number): LeaseResult => {
      const now = this.#now();
      const expiresAt = toIso(new Date(now.getTime() + ttlMs));
      const taken = this.#takeLease.run({ name, holder, now: toIso(now), expiresAt }).changes === 1;
      const row = this.#selectLease.get(name);
      if (row === undefined) throw new Error(`lease ${name}: vanished inside its own transaction`);
      return { acquired: taken, holder: row.holder, expiresAt: fromIso(row.expires_at) };
    });
  }

  /**
   * Takes the lease `name` (a run id, or `schedule:<manifest>`) for `ttlMs` if it is free, expired or
   * already `holder`'s. Otherwise returns who holds it and until when.
   */
  acquireLease(name: string, holder: string, ttlMs: number): LeaseResult {
    checkTtl(ttlMs);
    return this.#acquire.immediate(name, holder, ttlMs);
  }

  /** Extends our lease; false when it is no longer ours (expired and taken): stop driving the run. */
  renewLease(name: string, holder: string, ttlMs: number): boolean {
    checkTtl(ttlMs);
    const now = this.#now();
    const expiresAt = toIso(new Date(now.getTime() + ttlMs));
    return this.#renewLease.run({ name, holder, now: toIso(now), expiresAt }).changes === 1;
  }

  /** Gives the lease up; false when it was not ours. */
  releaseLease(name: string, holder: string): boolean {
    return this.#deleteLease.run(name, holder).changes === 1;
  }

  getLease(name: string): LeaseRecord | undefined {
    const row = this.#selectLease.get(name);
    return row === undefined ? undefined : toLease(row);
  }
}

function checkTtl(ttlMs: number): void {
  if (!Number.isFinite(ttlMs) || ttlMs <= 0) {
    throw new RangeError(`lease ttlMs: must be a finite number > 0, got ${ttlMs}`);
  }
}
