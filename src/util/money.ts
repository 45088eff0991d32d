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
