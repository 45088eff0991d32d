// The quota rule, in one place: how much of a key's monthly quota is used, and how that is known.
// The limit comes from configuration (used = what the local ledger spent with the key this month) or
// from the API's last code-101 answer in this month (used = its figure plus what the ledger spent
// since). A figure learned in an earlier month says nothing about this one. `plan`, `run`, `balance`
// and the report all read quotas through `quotaStanding`; each words `basis` its own way.

import type { LedgerSums, Store } from './index.js';
import { periodOf } from './index.js';

/** What `quotaStanding` reads from the store. */
export type QuotaStore = Pick<Store, 'ledger'>;

export interface QuotaStanding {
  /** What the local ledger spent with the key in the month of `now` (zeros without a store or key). */
  spent: LedgerSums;
  /** Null when neither configuration nor a code-101 answer of this month gives one. */
  limit: number | null;
  /** Tokens of the quota used this month; null exactly when `limit` is. */
  used: number | null;
  /** How limit and used are known: the report's and `balance`'s words; null when unknown. */
  source: string | null;
  basis: 'configured' | 'learned' | null;
  /** When the API told us the figures (basis `learned`), else null. */
  learnedAt: Date | null;
}

const NOTHING_SPENT: LedgerSums = { charged: 0, refunded: 0, net: 0 };

/**
 * The quota standing of one key in the month of `now`. Without a store (no state file yet) or without
 * a key fingerprint, nothing was spent locally: a configured limit then stands with 0 used.
 */
export function quotaStanding(
  store: QuotaStore | undefined,
  configQuota: number | undefined,
  fingerprint: string | undefined,
  now: Date,
): QuotaStanding {
  const ledger = store !== undefined && fingerprint !== undefined ? { store, fingerprint } : undefined;
  const spent = ledger ? ledger.store.ledger.ledgerSpent(ledger.fingerprint, periodOf(now)) : NOTHING_SPENT;
  if (configQuota !== undefined) {
    return {
      spent,
      limit: configQuota,
      used: spent.net,
      source: 'limit from configuration; used = this month in the local ledger',
      basis: 'configured',
      learnedAt: null,
    };
  }
  const learned = ledger?.store.ledger.getQuota(ledger.fingerprint);
  if (ledger && learned !== undefined && periodOf(learned.learnedAt) === periodOf(now)) {
    return {
      spent,
      limit: learned.quota,
      used: learned.used + ledger.store.ledger.ledgerSpentSince(ledger.fingerprint, learned.learnedAt).net,
      source: `learned from the API on ${learnedDay(learned.learnedAt)}, plus the ledger since`,
      basis: 'learned',
      learnedAt: learned.learnedAt,
    };
  }
  return { spent, limit: null, used: null, source: null, basis: null, learnedAt: null };
}

/** The day a quota was learned, as every quota sentence writes it. */
export function learnedDay(learnedAt: Date): string {
  return learnedAt.toISOString().slice(0, 10);
}
