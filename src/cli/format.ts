import { tokensToUsd } from '../plan/plan.js';

/** Tokens are fractional (0.2 per image, 1.63 per song); show what matters without float noise. */
export function fmtTokens(n: number): string {
  return String(Number(n.toFixed(4)));
}

export function fmtUsd(tokens: number): string {
  const usd = tokensToUsd(tokens);
  const text = usd !== 0 && Math.abs(usd) < 1 ? usd.toFixed(4).replace(/0{1,2}$/, '') : usd.toFixed(2);
  return `$${text}`;
}

export function fmtRange(tokens: number, min: number, max: number): string {
  return min === max ? fmtTokens(tokens) : `${fmtTokens(min)}–${fmtTokens(max)}`;
}

/** A plain text table: columns padded to the widest cell; the last column is not padded. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, cell.length);
    });
  }
  return rows
    .map((row) =>
      row
        .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
