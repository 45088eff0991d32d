// `balance`: the account balance from the API, and what the local ledger knows of spend per period and
// API-key fingerprint (and of the current key's quota). The ledger part works without credentials.

import { ApiSettingsError } from '../../api/client.js';
import type { Config } from '../../config.js';
import { type QuotaStanding, quotaStanding } from '../../run/quota.js';
import { keyFingerprint, periodOf } from '../../store/index.js';
import { roundTokens, tokensToUsd } from '../../util/money.js';
import { EXIT, ExitError } from '../errors.js';
import { fmtTokens, fmtTokensAsUsd, table } from '../format.js';
import { openExistingStore, type ReadContext } from '../read.js';

export interface BalanceContext extends ReadContext {
  config: Pick<Config, 'apiKey' | 'baseUrl' | 'quota'>;
  /** From makeBalanceSource; undefined when no credentials are set. */
  balance?: () => Promise<number>;
}

// One function on purpose: the balance, the ledger per period and the quota are one screen, read top to bottom.
export async function balanceCommand(opts: { json?: boolean }, ctx: BalanceContext): Promise<number> {
  const { io, config } = ctx;
  const now = io.now();
  const fingerprint = config.apiKey ? keyFingerprint(config.apiKey) : null;

  let balance: number | null = null;
  let balanceError: string | null = null;
  let failure: ExitError | undefined;
  if (ctx.balance === undefined) {
    balanceError = 'no credentials: set MEDIABATCH_API_KEY and MEDIABATCH_BASE_URL to ask the API';
  } else {
    try {
      balance = await ctx.balance();
    } catch (error) {
      failure =
        error instanceof ExitError
          ? error
          : error instanceof ApiSettingsError
            ? new ExitError(EXIT.invalid, error.message)
            : new ExitError(
                EXIT.invalid,
                `cannot read the balance from ${config.baseUrl ?? 'the API'} (${(error as Error).message}): check MEDIABATCH_BASE_URL and the network`,
              );
      balanceError = failure.message;
    }
  }

  const store = openExistingStore(ctx);
  let ledger: { period: string; key_fingerprint: string; charged: number; refunded: number; net: number }[];
  let quota: QuotaStanding | undefined;
  try {
    ledger = (store?.spendByPeriod() ?? []).map((p) => ({
      period: p.period,
      key_fingerprint: p.keyFingerprint,
      charged: roundTokens(p.charged),
      refunded: roundTokens(p.refunded),
      net: roundTokens(p.net),
    }));
    if (fingerprint !== null) {
      quota = quotaStanding(store, config.quota, fingerprint, now);
    }
  } finally {
    store?.close();
  }

  if (opts.json) {
    io.stdout.write(
      `${JSON.stringify(
        {
          balance,
          balance_usd: balance === null ? null : tokensToUsd(balance),
          balance_error: balanceError,
          key_fingerprint: fingerprint,
          period: periodOf(now),
          quota:
            quota === undefined
              ? null
              : {
                  limit: quota.limit,
                  used: quota.used === null ? null : roundTokens(quota.used),
                  left:
                    quota.limit === null || quota.used === null
                      ? null
                      : roundTokens(quota.limit - quota.used),
                  source: quota.source,
                },
          ledger: ledger.map((p) => ({
            ...p,
            net_usd: tokensToUsd(p.net),
            this_key: p.key_fingerprint === fingerprint,
          })),
        },
        null,
        2,
      )}\n`,
    );
  } else {
    const out = (line = '') => io.stdout.write(`${line}\n`);
    out(
      balance === null
        ? `Balance: unknown (${balanceError})`
        : `Balance: ${fmtTokens(balance)} tokens (${fmtTokensAsUsd(balance)})${config.baseUrl ? ` at ${config.baseUrl}` : ''}`,
    );
    if (fingerprint !== null) out(`API key fingerprint: ${fingerprint}`);
    if (quota !== undefined) {
      out(
        quota.limit === null || quota.used === null
          ? `Quota: unknown; this key spent ${fmtTokens(roundTokens(quota.spent.net))} tokens in ${periodOf(now)} by the local ledger (set MEDIABATCH_QUOTA to check it)`
          : `Quota: ${fmtTokens(roundTokens(quota.used))} of ${fmtTokens(quota.limit)} tokens used in ${periodOf(now)}, ${fmtTokens(roundTokens(quota.limit - quota.used))} left (${quota.source})`,
      );
    }
    out();
    if (ledger.length === 0) {
      out(`Ledger: no charges recorded in ${ctx.statePath} yet.`);
    } else {
      out('Ledger (charges and refunds recorded by mediabatch, per month and API key):');
      out(
        table([
          ['  PERIOD', 'KEY', 'CHARGED', 'REFUNDED', 'NET', 'USD'],
          ...ledger.map((p) => [
            `  ${p.period}`,
            p.key_fingerprint === fingerprint ? `${p.key_fingerprint} (this key)` : p.key_fingerprint,
            fmtTokens(p.charged),
            fmtTokens(p.refunded),
            fmtTokens(p.net),
            fmtTokensAsUsd(p.net),
          ]),
        ]),
      );
    }
  }
  if (failure) throw failure;
  return EXIT.ok;
}
