// Token amounts are fractional (0.2 per image, 1.63 per song), and float sums of them drift: a budget
// loop once waited forever for an in-flight sum of -3.9e-16 to reach 0. Sums that decide anything are
// kept in micro-tokens, whole numbers that add and subtract exactly.

/** Micro-tokens in one token: prices have at most six decimals (the catalog rounds to 1e-6). */
export const MICRO = 1_000_000;

/** Tokens as whole micro-tokens. */
export function toMicro(tokens: number): number {
  if (!Number.isFinite(tokens)) throw new Error(`tokens: must be a finite number, got ${String(tokens)}`);
  return Math.round(tokens * MICRO);
}

/** Micro-tokens back as tokens, for display and storage. */
export function fromMicro(micro: number): number {
  return micro / MICRO;
}

/** USD per token, from the spec. */
export const USD_PER_TOKEN = 0.02;

/** Removes float noise: token amounts are fractional (0.2, 1.63, 4.81 x 1.1 ...). Round to 1e-6. */
export function roundTokens(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}

/** Dollars for a number of tokens, to a millionth of a dollar. */
export function tokensToUsd(tokens: number): number {
  return Math.round(tokens * USD_PER_TOKEN * 1e6) / 1e6;
}

// Built once: toLocaleString with options builds a formatter per call, which made a 100,000-task plan
// spend seconds formatting numbers.
const tokenFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 4 });
const centsFormat = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });
const smallUsdFormat = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 4 });

/**
 * Token amounts as the terminal shows them: enough digits to add up (four decimals), no float noise,
 * thousands grouped (`1,234.5`).
 */
export function tokensText(n: number): string {
  return tokenFormat.format(Number(n.toFixed(4)));
}

/** Dollars as the terminal shows them: cents, or up to four decimals under a dollar (`$0.004`), grouped. */
export function usdText(usd: number): string {
  const small = usd !== 0 && Math.abs(usd) < 1;
  const text = (small ? smallUsdFormat : centsFormat).format(Math.abs(usd));
  return `${usd < 0 ? '-' : ''}$${text}`;
}

/**
 * Token amounts as report.md and index.html show them: the same digits as `tokensText`, ungrouped,
 * because the gallery's in-page script (`tokens` in src/report/gallery-script.ts) must print the same.
 */
export function tokensPlainText(n: number): string {
  return String(Number(n.toFixed(4)));
}

/** Dollars as report.md and index.html show them; the in-page script's `usd` repeats this rule. */
export function usdPlainText(usd: number): string {
  const text = usd !== 0 && Math.abs(usd) < 1 ? usd.toFixed(4).replace(/0{1,2}$/, '') : usd.toFixed(2);
  return `$${text}`;
}
