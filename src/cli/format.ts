import { tokensToUsd } from '../plan/plan.js';

// Built once: toLocaleString with options builds a formatter per call, which made a 100,000-task plan
// spend seconds formatting numbers.
const tokenFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 4 });
const centsFormat = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });
const smallUsdFormat = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 4 });

/** Tokens are fractional (0.2 per image, 1.63 per song): enough digits to add up, no float noise, 1,000s grouped. */
export function fmtTokens(n: number): string {
  return tokenFormat.format(Number(n.toFixed(4)));
}

/** Dollars for a number of tokens: cents, or up to four decimals under a dollar ($0.004 for an image). */
export function fmtUsd(tokens: number): string {
  const usd = tokensToUsd(tokens);
  const small = usd !== 0 && Math.abs(usd) < 1;
  const text = (small ? smallUsdFormat : centsFormat).format(Math.abs(usd));
  return `${usd < 0 ? '-' : ''}$${text}`;
}

export function fmtRange(tokens: number, min: number, max: number): string {
  return min === max ? fmtTokens(tokens) : `${fmtTokens(min)}–${fmtTokens(max)}`;
}

export function fmtUsdRange(min: number, max: number): string {
  return min === max ? fmtUsd(max) : `${fmtUsd(min)}–${fmtUsd(max)}`;
}

export type Align = 'left' | 'right';

/**
 * A plain text table: columns padded to the widest cell, numbers right-aligned where `align` says so.
 * The last column is not padded, so that a long last cell (a sentence) does not push trailing spaces.
 */
export function table(rows: readonly (readonly string[])[], align: readonly Align[] = []): string {
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, cell.length);
    });
  }
  return rows
    .map((row) =>
      row
        .map((cell, i) => {
          const width = widths[i] ?? 0;
          if (align[i] === 'right') return cell.padStart(width);
          return i === row.length - 1 ? cell : cell.padEnd(width);
        })
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
