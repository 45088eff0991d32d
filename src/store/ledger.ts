// What was spent, per API-key fingerprint and month, per run and per model. Charges are written by
// recordSubmitted and refunds by recordJobStatus; this module only reads them, and keeps the quota
// figures the API told us.

import { fromMicro, toMicro } from '../util/money.js';
import type { Db } from './db.js';
import { asTokens, micro, tokensTotal } from './micro.js';
import { fromIso, toIso } from './time.js';
import type { Clock, LedgerSums, ModelTotals, PeriodSpend, QuotaRecord } from './types.js';

interface SumsRow {
  charged: number;
  refunded: number;
}

const SUMS = `${tokensTotal('tokens', "kind = 'charge'")} AS charged,
  ${tokensTotal('tokens', "kind = 'refund'")} AS refunded`;

function toSums(row: SumsRow | undefined): LedgerSums {
  const charged = row?.charged ?? 0;
  const refunded = row?.refunded ?? 0;
  return { charged, refunded, net: fromMicro(toMicro(charged) - toMicro(refunded)) };
}

export class LedgerStore {
  readonly #now: Clock;
  readonly #spentInPeriod;
  readonly #spentSince;
  readonly #spentByPeriod;
  readonly #spentByRun;
  readonly #spentByManifest;
  readonly #modelTotals;
  readonly #upsertQuota;
  readonly #selectQuota;

  constructor(db: Db, now: Clock) {
    this.#now = now;
    this.#spentInPeriod = db.prepare<[string, string], SumsRow>(
      `SELECT ${SUMS} FROM ledger WHERE key_fingerprint = ? AND period = ?`,
    );
    // A refund counts against the moment of its charge: it gives back what that charge took.
    this.#spentSince = db.prepare<[string, string], SumsRow>(
      `SELECT ${SUMS} FROM ledger
       WHERE key_fingerprint = ? AND img_uuid IN (
         SELECT img_uuid FROM ledger WHERE kind = 'charge' AND at >= ?)`,
    );
    this.#spentByPeriod = db.prepare<[], SumsRow & { key_fingerprint: string; period: string }>(
      `SELECT key_fingerprint, period, ${SUMS} FROM ledger GROUP BY key_fingerprint, period
       ORDER BY period DESC, key_fingerprint`,
    );
    this.#spentByRun = db.prepare<[string], SumsRow>(`SELECT ${SUMS} FROM ledger WHERE run_id = ?`);
    this.#spentByManifest = db.prepare<[string, string], SumsRow>(
      `SELECT ${SUMS} FROM ledger
       WHERE period = ? AND run_id IN (SELECT id FROM runs WHERE manifest_path = ?)`,
    );
    this.#modelTotals = db.prepare<
      { runId: string },
      SumsRow & { model: string; tasks: number; estimated: number; est_min: number; est_max: number }
    >(
      `SELECT tasks.model AS model, count(*) AS tasks,
         -- A skipped task left the run's estimate (src/account/): a rejected upstream took it out.
         ${tokensTotal('est_tokens', "state <> 'skipped'")} AS estimated,
         ${tokensTotal('est_min', "state <> 'skipped'")} AS est_min,
         ${tokensTotal('est_max', "state <> 'skipped'")} AS est_max,
         ${asTokens('total(spent.charged)')} AS charged, ${asTokens('total(spent.refunded)')} AS refunded
       FROM tasks LEFT JOIN (
         SELECT task_id, total(CASE WHEN kind = 'charge' THEN ${micro('tokens')} END) AS charged,
           total(CASE WHEN kind = 'refund' THEN ${micro('tokens')} END) AS refunded
         FROM ledger WHERE run_id = :runId GROUP BY task_id
       ) AS spent USING (task_id)
       WHERE tasks.run_id = :runId
       GROUP BY tasks.model ORDER BY tasks.model`,
    );
    this.#upsertQuota = db.prepare<{
      keyFingerprint: string;
      used: number;
      quota: number;
      period: string;
      now: string;
    }>(
      `INSERT INTO quota (key_fingerprint, used, quota, period, learned_at)
       VALUES (:keyFingerprint, :used, :quota, :period, :now)
       ON CONFLICT (key_fingerprint) DO UPDATE SET used = excluded.used, quota = excluded.quota,
         period = excluded.period, learned_at = excluded.learned_at`,
    );
    this.#selectQuota = db.prepare<
      [string],
      { key_fingerprint: string; used: number; quota: number; period: string; learned_at: string }
    >('SELECT * FROM quota WHERE key_fingerprint = ?');
  }

  /** Net spend of one key in one `YYYY-MM` period (UTC); a refund counts in its charge's period. */
  ledgerSpent(keyFingerprint: string, period: string): LedgerSums {
    return toSums(this.#spentInPeriod.get(keyFingerprint, period));
  }

  /** Spend of one key on charges made at or after `since` (e.g. since the quota was last learned). */
  ledgerSpentSince(keyFingerprint: string, since: Date): LedgerSums {
    return toSums(this.#spentSince.get(keyFingerprint, toIso(since)));
  }

  /** For `balance`: every key and period with its spend, newest period first. */
  spendByPeriod(): PeriodSpend[] {
    return this.#spentByPeriod.all().map((row) => ({
      keyFingerprint: row.key_fingerprint,
      period: row.period,
      ...toSums(row),
    }));
  }

  runSpent(runId: string): LedgerSums {
    return toSums(this.#spentByRun.get(runId));
  }

  /** Spend of every run of one manifest in a period, for a schedule's `budget_per_period`. */
  manifestSpent(manifestPath: string, period: string): LedgerSums {
    return toSums(this.#spentByManifest.get(period, manifestPath));
  }

  /** Per model of a run: task count, estimates, and what the ledger says was charged and refunded. */
  modelTotals(runId: string): ModelTotals[] {
    return this.#modelTotals.all({ runId }).map((row) => ({
      model: row.model,
      tasks: row.tasks,
      estimated: row.estimated,
      estimatedMin: row.est_min,
      estimatedMax: row.est_max,
      ...toSums(row),
    }));
  }

  /** The figures of a code-101 answer ("<used> of <quota> tokens used (<period>)"). */
  recordQuota(keyFingerprint: string, quota: { used: number; quota: number; period: string }): void {
    this.#upsertQuota.run({ keyFingerprint, ...quota, now: toIso(this.#now()) });
  }

  getQuota(keyFingerprint: string): QuotaRecord | undefined {
    const row = this.#selectQuota.get(keyFingerprint);
    if (row === undefined) return undefined;
    return {
      keyFingerprint: row.key_fingerprint,
      used: row.used,
      quota: row.quota,
      period: row.period,
      learnedAt: fromIso(row.learned_at),
    };
  }
}
