// Every number a person reads, one way, on every surface (the CLI, status, report.md, the gallery,
// review). The rules, which the pages' scripts repeat (assets/view, the gallery's in-page script):
//   counts  whole, thousands separated:                        1,604
//   tokens  thousands separated, at most 4 decimals, no trailing zeros: 1,604.25 · 0.2
//           with their unit, singular only for an amount that reads 1: 1 token · 0.2 tokens
//           (a line saying why a sum did not fit keeps 6, the micro-token: 6.999999 · 1,604.000125)
//   USD     `$`, thousands separated, cents; a non-zero amount under a cent keeps up to 4 decimals
//           so it never reads $0.00:                           $2.05 · $0.86 · $0.004 · -$1.20
//   rates   thousands separated, at most 1 decimal:            1,175.2 tasks/min
//   percent at most 1 decimal:                                 12.5%
// Intl.NumberFormat in en-US, built once: building one per call made a 100,000-task plan spend seconds.

const countFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
const tokenFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 4 });
const microTokenFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 6 });
const centsFormat = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });
const underCentFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 4 });
const rateFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 });

/** A count of things (tasks, jobs, files): `1,604`. */
export function fmtCount(n: number): string {
  return countFormat.format(n);
}

/** Tokens: `1,604.25`, at most four decimals (float noise removed first). */
export function fmtTokens(n: number): string {
  return tokenFormat.format(Number(n.toFixed(4)));
}

/**
 * Tokens to the micro-token, `6.999999`: the unit money is compared in. A refusal rounded to four decimals
 * would read "may cost up to 2 tokens and the budget leaves 2 tokens" for 1.999999 left.
 */
export function fmtTokensExact(n: number): string {
  return microTokenFormat.format(Number(n.toFixed(6)));
}

/**
 * A token amount as formatted here, with its unit: `1 token`, `0.2 tokens`, `1,604.25 tokens`,
 * `0.2–0.4 tokens`. The unit is singular only when the amount reads 1, as printed (0.99999 reads 1).
 */
export function withTokenUnit(text: string): string {
  return `${text} ${text === '1' || text === '-1' ? 'token' : 'tokens'}`;
}

/** Tokens with their unit: `1 token`, `1,604.25 tokens`. */
export function fmtTokensWithUnit(n: number): string {
  return withTokenUnit(fmtTokens(n));
}

/** Tokens to the micro-token with their unit: `1 token`, `6.999999 tokens`. */
export function fmtTokensExactWithUnit(n: number): string {
  return withTokenUnit(fmtTokensExact(n));
}

/** Dollars (not tokens): `$2.05`, `$0.86`, `$0.004`, `-$1.20`. */
export function fmtUsd(usd: number): string {
  const abs = Math.abs(usd);
  const text = abs !== 0 && abs < 0.005 ? underCentFormat.format(abs) : centsFormat.format(abs);
  return `${usd < 0 && text !== '0.00' ? '-' : ''}$${text}`;
}

/** A rate (tasks a minute, tokens an hour): `1,175.2`. */
export function fmtRate(n: number): string {
  return rateFormat.format(n);
}

/** A ratio as a percentage: `0.125` → `12.5%`. */
export function fmtPercentOf(ratio: number): string {
  return `${rateFormat.format(ratio * 100)}%`;
}

/** `1 task`, `1,604 tasks`: a count and its noun, the noun plural unless the count is one. */
export function countOf(n: number, word: string, plural = `${word}s`): string {
  return `${fmtCount(n)} ${n === 1 ? word : plural}`;
}
