// Token amounts are fractional (0.2 per image, 1.63 per song), and float sums of them drift: a budget
// loop once waited forever for an in-flight sum of -3.9e-16 to reach 0. Sums that decide anything are
// kept in micro-tokens, whole numbers that add and subtract exactly.

import { fmtTokens, fmtTokensExactWithUnit, fmtUsd } from './numbers.js';

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

/** Token amounts as every surface shows them (the rule is in src/util/numbers.ts): `1,234.5`. */
export const tokensText = fmtTokens;

/** Dollars as every surface shows them (src/util/numbers.ts): `$0.004`, `$0.86`, `$1,234.50`. */
export const usdText = fmtUsd;

/** The same as `tokensText`: report.md and index.html show tokens as the terminal does. */
export const tokensPlainText = fmtTokens;

/** The same as `usdText`; the gallery's in-page script `usd` repeats this rule. */
export const usdPlainText = fmtUsd;

/**
 * Tokens with their unit, to the micro-token, for the lines that say why a spend did not fit (budget, period
 * budget, quota, balance, re-roll): `1 token`, `0.2 tokens`, `1,604.25 tokens`.
 */
export function tokensOf(tokens: number): string {
  return fmtTokensExactWithUnit(tokens);
}

/**
 * What a limit leaves (`leaves 2 tokens`) or, once spending is past it, by how much (`is already 1.5 tokens
 * over`): "leaves 0" would hide that a budget lowered, or spent elsewhere, is overdrawn.
 */
export function roomText(leftMicro: number): string {
  return leftMicro >= 0
    ? `leaves ${tokensOf(fromMicro(leftMicro))}`
    : `is already ${tokensOf(fromMicro(-leftMicro))} over`;
}
