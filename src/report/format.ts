// Number and text formatting shared by report.md and index.html. Pure.

// Money is written the report's way (ungrouped, dollars in), by the rules in src/util/money.ts.
export { tokensPlainText as fmtTokens, usdPlainText as fmtUsd } from '../util/money.js';

export function fmtBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value >= 100 ? value.toFixed(0) : value.toFixed(1)} ${units[unit]}`;
}

export function fmtSeconds(seconds: number | null): string {
  if (seconds === null) return '';
  if (seconds < 60) return `${Number(seconds.toFixed(1))} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${Math.round(seconds % 60)} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** `2026-11-21 09:00:12 UTC`: readable, and the same wherever the report is opened. */
export function fmtTime(iso: string | null): string {
  if (iso === null) return '';
  return `${iso.slice(0, 19).replace('T', ' ')} UTC`;
}

export function fmtPercent(ratio: number | null): string {
  return ratio === null ? '' : `${Number((ratio * 100).toFixed(1))}%`;
}

export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}
