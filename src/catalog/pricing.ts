// Pure helpers shared by the price rules: rounding, billed seconds, and Estimate construction.
import { roundTokens } from '../util/money.js';
import type { Estimate } from './types.js';

// Token rounding is a money rule with its home in src/util/money.ts; the catalog's rules read it from there.
export { roundTokens } from '../util/money.js';

/** Whole seconds rounded up; float noise first, so that 30.0000000001 s bills 30, not 31. */
export function billedSeconds(seconds: number): number {
  return Math.ceil(roundTokens(seconds));
}

export function tokens(n: number): string {
  const r = roundTokens(n);
  return `${r} ${r === 1 ? 'token' : 'tokens'}`;
}

export function exact(amount: number, basis: string, assumedPrice = false): Estimate {
  const t = roundTokens(amount);
  return { tokens: t, min: t, max: t, basis, assumedPrice };
}

/** A range where the billed quantity is unknown; `tokens` is the maximum so budgets stay safe. */
export function range(min: number, max: number, basis: string, assumedPrice = false): Estimate {
  if (roundTokens(min) === roundTokens(max)) return exact(max, basis, assumedPrice);
  return { tokens: roundTokens(max), min: roundTokens(min), max: roundTokens(max), basis, assumedPrice };
}

/** A billed length and how we know it, for the basis sentence. */
export interface Billed {
  seconds: number;
  text: string;
}

/** `duration` set by the user: billed as written. */
export function fromDuration(duration: number): Billed {
  return { seconds: duration, text: `${duration} s` };
}

/** A measured or hinted length, rounded up to whole seconds. */
export function fromLength(raw: number, source: 'measured' | 'media_seconds'): Billed {
  const seconds = billedSeconds(raw);
  const rounded = seconds !== roundTokens(raw) ? `${roundTokens(raw)} s ${source}, rounded up` : source;
  return { seconds, text: `${seconds} s (${rounded})` };
}

/** A usable `media_seconds` hint, or undefined. */
export function usableHint(hint: number | undefined): number | undefined {
  return hint !== undefined && Number.isFinite(hint) && hint > 0 ? hint : undefined;
}
