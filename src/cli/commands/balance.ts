// `balance`: the account balance from the API, and what the local ledger knows of spend per period and
// API-key fingerprint (and of the current key's quota). The ledger part works without credentials.

import type { Config } from '../../config.js';
import { stateInLine } from '../../results/invocation.js';
import { keyFingerprint, periodOf } from '../../store/index.js';
import { type QuotaStanding, quotaStanding } from '../../store/quota.js';
import { roundTokens, tokensToUsd } from '../../util/money.js';
import { fmtTokensWithUnit } from '../../util/numbers.js';
import { EXIT, ExitError, exitOf } from '../errors.js';
import { fmtTokens, fmtTokensAsUsd, table } from '../format.js';
import { openExistingStore, type ReadContext } from '../read.js';

export interface BalanceContext extends ReadContext {
  config: Pick<Config, 'apiKey' | 'baseUrl' | 'quota'>;
  /** From makeBalanceSource; undefined when no credentials are set. */
  balance?: () => Promise<number>;
  /** `--sandbox`: the embedded sandbox's account, kept across runs in its journal. */
  sandbox?: boolean;
}

interface LedgerRow {
  period: string;
  key_fingerprint: string;
  charged: number;
  refunded: number;
  net: number;
}

/** What the screen shows: the balance (or why not), the key, the quota and the ledger. */
interface BalanceView {
  balance: number | null;
  balanceError: string | null;
  fingerprint: string | null;
  period: string;
  quota: QuotaStanding | undefined;
  ledger: LedgerRow[];
}

export async function balanceCommand(opts: { json?: boolean }, ctx: BalanceContext): Promise<number> {
  const { io, config } = ctx;
  const now = io.now();
  const fingerprint = config.apiKey ? keyFingerprint(config.apiKey) : null;
  const { balance, failure, balanceError } = await askBalance(ctx);
  const store = openExistingStore(ctx);
  let view: BalanceView;
  try {
    view = {
      balance,
      balanceError,
      fingerprint,
      period: periodOf(now),
      ledger: (store?.ledger.spendByPeriod() ?? []).map((p) => ({
        period: p.period,
        key_fingerprint: p.keyFingerprint,
        charged: roundTokens(p.charged),
        refunded: roundTokens(p.refunded),
        net: roundTokens(p.net),
      })),
      quota: fingerprint === null ? undefined : quotaStanding(store, config.quota, fingerprint, now),
    };
  } finally {
    store?.close();
  }
  if (opts.json) io.stdout.write(`${balanceJson(view)}\n`);
  else {
    const where = ctx.sandbox ? 'in the embedded sandbox' : config.baseUrl ? `at ${config.baseUrl}` : '';
    io.stdout.write(`${balanceLines(view, where, ctx.statePath).join('\n')}\n`);
    if (ctx.sandbox && view.balance !== null) io.stdout.write(`${SANDBOX_NOTE}\n`);
  }
  if (failure) throw failure;
  return EXIT.ok;
}

/** The balance from the API; a failure is shown on the screen first, then ends the command. */
async function askBalance(
  ctx: BalanceContext,
): Promise<{ balance: number | null; balanceError: string | null; failure?: ExitError }> {
  if (ctx.balance === undefined) {
    return {
      balance: null,
      balanceError: 'no credentials: set MEDIABATCH_API_KEY and MEDIABATCH_BASE_URL to ask the API',
    };
  }
  try {
    return { balance: await ctx.balance(), balanceError: null };
  } catch (error) {
    const failure =
      exitOf(error, ctx.io.cwd) ??
      new ExitError(
        EXIT.invalid,
        `cannot read the balance from ${ctx.config.baseUrl ?? 'the API'} (${(error as Error).message}): check MEDIABATCH_BASE_URL and the network`,
      );
    return { balance: null, balanceError: failure.message, failure };
  }
}

function balanceJson(v: BalanceView): string {
  const { quota } = v;
  return JSON.stringify(
    {
      balance: v.balance,
      balance_usd: v.balance === null ? null : tokensToUsd(v.balance),
      balance_error: v.balanceError,
      key_fingerprint: v.fingerprint,
      period: v.period,
      quota:
        quota === undefined
          ? null
          : {
              limit: quota.limit,
              used: quota.used === null ? null : roundTokens(quota.used),
              left:
                quota.limit === null || quota.used === null ? null : roundTokens(quota.limit - quota.used),
              source: quota.source,
            },
      ledger: v.ledger.map((p) => ({
        ...p,
        net_usd: tokensToUsd(p.net),
        this_key: p.key_fingerprint === v.fingerprint,
      })),
    },
    null,
    2,
  );
}

/** What `balance --sandbox` says under its figures: where the pretend money comes from, and how to refill it. */
const SANDBOX_NOTE =
  'The embedded sandbox keeps its balance across sandbox runs (pretend money, starting at 1,000 tokens); `--sandbox-reset` on the next `run --sandbox` starts it afresh.';

/** What the quota leaves; past it (a quota lowered, or spent elsewhere), by how much, never a negative "left". */
function quotaLeft(left: number): string {
  return left >= 0
    ? `${fmtTokensWithUnit(roundTokens(left))} left`
    : `${fmtTokensWithUnit(roundTokens(-left))} over it`;
}

function balanceLines(v: BalanceView, where: string, statePath: string): string[] {
  const { balance, quota, fingerprint } = v;
  const lines = [
    balance === null
      ? `Balance: unknown (${v.balanceError})`
      : `Balance: ${fmtTokensWithUnit(balance)} (${fmtTokensAsUsd(balance)})${where ? ` ${where}` : ''}`,
  ];
  if (fingerprint !== null) lines.push(`API key fingerprint: ${fingerprint}`);
  if (quota !== undefined) {
    lines.push(
      quota.limit === null || quota.used === null
        ? `Quota: unknown; this key spent ${fmtTokensWithUnit(roundTokens(quota.spent.net))} in ${v.period} by the local ledger (set MEDIABATCH_QUOTA to check it)`
        : `Quota: ${fmtTokens(roundTokens(quota.used))} of ${fmtTokensWithUnit(quota.limit)} used in ${v.period}, ${quotaLeft(quota.limit - quota.used)} (${quota.source})`,
    );
  }
  lines.push('');
  if (v.ledger.length === 0) {
    lines.push(`Ledger: no charges recorded in ${stateInLine(statePath)} yet.`);
    return lines;
  }
  lines.push('Ledger (charges and refunds recorded by mediabatch, per month and API key):');
  lines.push(
    table([
      ['  PERIOD', 'KEY', 'CHARGED', 'REFUNDED', 'NET', 'USD'],
      ...v.ledger.map((p) => [
        `  ${p.period}`,
        p.key_fingerprint === fingerprint ? `${p.key_fingerprint} (this key)` : p.key_fingerprint,
        fmtTokens(p.charged),
        fmtTokens(p.refunded),
        fmtTokens(p.net),
        fmtTokensAsUsd(p.net),
      ]),
    ]),
  );
  return lines;
}
