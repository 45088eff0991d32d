import { relative } from 'node:path';
import { isBucketLocation } from '../results/output.js';
import { tokensText, tokensToUsd, usdText } from '../util/money.js';

/** A path as the user sees it: relative to the working folder when inside it; a bucket location as it is. */
export function displayPath(cwd: string, path: string): string {
  // Not a path: relative() would resolve `s3://b/p` under the working folder and print `s3:/b/p`.
  if (isBucketLocation(path)) return path;
  const rel = relative(cwd, path);
  return rel.startsWith('..') ? path : rel || '.';
}

/** Tokens as the terminal shows them (grouped); the rule is in src/util/money.ts. */
export const fmtTokens = tokensText;

/** The dollar price of a number of TOKENS (not dollars), as the terminal shows it: `$0.004`, `$1,234.50`. */
export function fmtTokensAsUsd(tokens: number): string {
  return usdText(tokensToUsd(tokens));
}

/** @deprecated Same as `fmtTokensAsUsd` (it takes tokens); the name is kept for callers not yet switched. */
export const fmtUsd = fmtTokensAsUsd;

export function fmtRange(tokens: number, min: number, max: number): string {
  return min === max ? fmtTokens(tokens) : `${fmtTokens(min)}–${fmtTokens(max)}`;
}

export function fmtUsdRange(min: number, max: number): string {
  return min === max ? fmtTokensAsUsd(max) : `${fmtTokensAsUsd(min)}–${fmtTokensAsUsd(max)}`;
}

export type Align = 'left' | 'right';

/**
 * A plain text table: columns padded to the widest cell, numbers right-aligned where `align` says so.
 * The last column is not padded, so that a long last cell (a sentence) does not push trailing spaces.
 */
export function table(rows: readonly (readonly string[])[], align: readonly Align[] = []): string {
  return [...tableLines(() => rows, align)].join('\n');
}

/**
 * The same table a line at a time, from rows produced twice (once for the widths, once for the lines),
 * so that a table of a million rows is never held.
 */
export function* tableLines(
  rows: () => Iterable<readonly string[]>,
  align: readonly Align[] = [],
): Generator<string> {
  const widths: number[] = [];
  for (const row of rows()) {
    row.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, cell.length);
    });
  }
  for (const row of rows()) {
    yield row
      .map((cell, i) => {
        const width = widths[i] ?? 0;
        if (align[i] === 'right') return cell.padStart(width);
        return i === row.length - 1 ? cell : cell.padEnd(width);
      })
      .join('  ')
      .trimEnd();
  }
}
