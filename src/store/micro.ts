// Token amounts summed in SQL: each amount first in whole micro-tokens, then added as integers. The doubles
// themselves add up differently on the two backends (SQLite's sum() and total() compensate for rounding,
// PostgreSQL's add plainly, and the rows may come in another order), which at a half-micro tie is a whole
// micro-token apart; whole numbers add exactly, in any order, to what the kept sums of the account say.
// On PostgreSQL the rounding is micro() (src/store/pg/overrides.ts rewrites it), SQLite's round() exactly.

/** A column (or `?`) in whole micro-tokens, rounded as SQLite's round() does: ties away from zero. */
export function micro(column: string): string {
  return `CAST(round(${column} * 1000000) AS INTEGER)`;
}

/** A sum of whole micro-tokens (`total(…)`, never NULL) back as tokens. */
export function asTokens(microSum: string): string {
  return `(${microSum} / 1000000.0)`;
}

/** The sum of a token column over the rows, as tokens (0 over none), added in whole micro-tokens. */
export function tokensTotal(column: string, when?: string): string {
  const each = when === undefined ? micro(column) : `CASE WHEN ${when} THEN ${micro(column)} END`;
  return asTokens(`total(${each})`);
}
