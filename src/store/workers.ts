// The workers of a run: every process driving it has a row here, renewed by a heartbeat. On a
// PostgreSQL state several workers share a run; whether one of them is lost is decided in one place
// (workerIsLost), read by the workers' sweep, `status` and `view` alike.

import { hostname } from 'node:os';
import type { Db } from './db.js';
import { fromIso, toIso } from './time.js';
import type { Clock } from './types.js';

export interface WorkerRecord {
  workerId: string;
  host: string;
  pid: number;
  startedAt: Date;
  heartbeatAt: Date;
  expiresAt: Date;
  /** It left on its own (nothing left for it, or stopped by a signal). */
  stoppedAt?: Date;
  /** When another worker declared it lost and took its work back. */
  lostAt?: Date;
  /** Tasks it holds now: claimed, being sent, or jobs it watches. */
  inFlight: number;
  /** POSTs it sent that the API accepted. */
  submitted: number;
  /** Not stopped, and either declared lost, expired, or its pid gone on this host. */
  lost: boolean;
}

export interface WorkerCounts {
  inFlight: number;
  submitted: number;
}

interface WorkerRow {
  worker_id: string;
  host: string;
  pid: number;
  started_at: string;
  heartbeat_at: string;
  expires_at: string;
  stopped_at: string | null;
  lost_at: string | null;
  in_flight: number;
  submitted: number;
}

/**
 * True only when the holder (`pid@host#nonce`) is a process of this machine that no longer exists. A
 * holder elsewhere, or a pid that is alive (even if reused by another program), keeps its lease or its
 * worker row until it expires.
 */
export function holderIsDead(holder: string): boolean {
  const m = /^(\d+)@(.*)#[^#]*$/.exec(holder);
  if (!m || m[2] !== hostname()) return false;
  const pid = Number(m[1]);
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** The one decision of whether a worker is lost: declared so, or not stopped and expired or dead here. */
export function workerIsLost(
  w: { workerId: string; expiresAt: Date; stoppedAt?: Date; lostAt?: Date },
  now: Date,
): boolean {
  if (w.lostAt !== undefined) return true;
  if (w.stoppedAt !== undefined) return false;
  return w.expiresAt.getTime() <= now.getTime() || holderIsDead(w.workerId);
}

export class WorkerStore {
  readonly #now: Clock;
  readonly #join;
  readonly #heartbeat;
  readonly #leave;
  readonly #list;
  readonly #markLost;

  constructor(db: Db, now: Clock) {
    this.#now = now;
    // A worker id is unique per process (its nonce): joining again after a restart of the same id is
    // the same worker coming back, which keeps its row's start.
    this.#join = db.prepare<{
      runId: string;
      workerId: string;
      host: string;
      pid: number;
      now: string;
      expiresAt: string;
    }>(
      `INSERT INTO workers (run_id, worker_id, host, pid, started_at, heartbeat_at, expires_at)
       VALUES (:runId, :workerId, :host, :pid, :now, :now, :expiresAt)
       ON CONFLICT (run_id, worker_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at,
         expires_at = excluded.expires_at, stopped_at = NULL
       WHERE workers.lost_at IS NULL`,
    );
    this.#heartbeat = db.prepare<{
      runId: string;
      workerId: string;
      now: string;
      expiresAt: string;
      inFlight: number;
      submitted: number;
    }>(
      `UPDATE workers SET heartbeat_at = :now, expires_at = :expiresAt, in_flight = :inFlight,
         submitted = :submitted
       WHERE run_id = :runId AND worker_id = :workerId AND lost_at IS NULL AND stopped_at IS NULL`,
    );
    this.#leave = db.prepare<{ runId: string; workerId: string; now: string }>(
      `UPDATE workers SET stopped_at = :now, in_flight = 0
       WHERE run_id = :runId AND worker_id = :workerId AND stopped_at IS NULL AND lost_at IS NULL`,
    );
    this.#list = db.prepare<[string], WorkerRow>(
      `SELECT worker_id, host, pid, started_at, heartbeat_at, expires_at, stopped_at, lost_at, in_flight, submitted
       FROM workers WHERE run_id = ? ORDER BY started_at, worker_id`,
    );
    this.#markLost = db.prepare<{ runId: string; workerId: string; now: string }>(
      `UPDATE workers SET lost_at = :now
       WHERE run_id = :runId AND worker_id = :workerId AND lost_at IS NULL AND stopped_at IS NULL`,
    );
  }

  /** Records a worker of `runId`, alive for `ttlMs` unless it beats again; false when it was declared lost. */
  join(runId: string, workerId: string, host: string, pid: number, ttlMs: number): boolean {
    checkTtl(ttlMs);
    const now = this.#now();
    const expiresAt = toIso(new Date(now.getTime() + ttlMs));
    return this.#join.run({ runId, workerId, host, pid, now: toIso(now), expiresAt }).changes === 1;
  }

  /** Keeps the worker alive for `ttlMs` more; false when it was declared lost (or left): it must stop. */
  heartbeat(runId: string, workerId: string, counts: WorkerCounts, ttlMs: number): boolean {
    checkTtl(ttlMs);
    const now = this.#now();
    const expiresAt = toIso(new Date(now.getTime() + ttlMs));
    const values = { runId, workerId, now: toIso(now), expiresAt, ...counts };
    return this.#heartbeat.run(values).changes === 1;
  }

  /** The worker stops on its own; false when it was not a live worker of the run. */
  leave(runId: string, workerId: string): boolean {
    return this.#leave.run({ runId, workerId, now: toIso(this.#now()) }).changes === 1;
  }

  /** Marks a worker lost (the sweep does, in the transaction that takes its work back); false if it was not live. */
  markLost(runId: string, workerId: string): boolean {
    return this.#markLost.run({ runId, workerId, now: toIso(this.#now()) }).changes === 1;
  }

  /** Every worker the run has had, the first started first. */
  list(runId: string): WorkerRecord[] {
    const now = this.#now();
    return this.#list.all(runId).map((row) => toWorker(row, now));
  }
}

function toWorker(row: WorkerRow, now: Date): WorkerRecord {
  const w: WorkerRecord = {
    workerId: row.worker_id,
    host: row.host,
    pid: row.pid,
    startedAt: fromIso(row.started_at),
    heartbeatAt: fromIso(row.heartbeat_at),
    expiresAt: fromIso(row.expires_at),
    inFlight: row.in_flight,
    submitted: row.submitted,
    lost: false,
  };
  if (row.stopped_at !== null) w.stoppedAt = fromIso(row.stopped_at);
  if (row.lost_at !== null) w.lostAt = fromIso(row.lost_at);
  w.lost = workerIsLost(w, now);
  return w;
}

function checkTtl(ttlMs: number): void {
  if (!Number.isFinite(ttlMs) || ttlMs <= 0) {
    throw new RangeError(`worker ttlMs: must be a finite number > 0, got ${ttlMs}`);
  }
}
