// @ts-check
// Every number the page shows, one way (the rules of src/util/numbers.ts, which the CLI, the report and
// the gallery use): counts whole with thousands separators (`1,500 tasks`), tokens separated with at most
// four decimals, rates at most one decimal, times in ISO like the rest of the page.
import { lists } from './lists.js';

const countFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
const tokenFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 4 });
const rateFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 });

/**
 * A count of things (tasks, jobs, files): `1,500`.
 * @param {number | null | undefined} n
 */
export function count(n) {
  return n === null || n === undefined ? '–' : countFormat.format(n);
}

/**
 * Tokens: `1,604.25`, float noise removed first.
 * @param {number | null | undefined} n
 */
export function tokens(n) {
  return n === null || n === undefined ? '–' : tokenFormat.format(Number(Number(n).toFixed(4)));
}

/**
 * Tokens with their unit: `1 token`, `0.2 tokens`, `1,604.25 tokens` (singular only for an amount that
 * reads 1, as numbers.ts' withTokenUnit).
 * @param {number | null | undefined} n
 */
export function tokensWithUnit(n) {
  if (n === null || n === undefined) return '–';
  const text = tokens(n);
  return `${text} ${text === '1' || text === '-1' ? 'token' : 'tokens'}`;
}

/**
 * A rate (tasks a minute): `1,175.2`.
 * @param {number} n
 */
export function rate(n) {
  return rateFormat.format(n);
}

/**
 * `2026-11-27 14:34:05`, the page's time format (UTC).
 * @param {string | number | null | undefined} iso
 */
export function time(iso) {
  if (iso === null || iso === undefined || iso === '') return '–';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toISOString().slice(0, 19).replace('T', ' ');
}

/** @param {number | null | undefined} ms */
export function duration(ms) {
  if (ms === null || ms === undefined) return '–';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${countFormat.format(Math.floor(m / 60))} h ${m % 60} min`;
}

/** @param {number} n */
export function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

/**
 * How a state reads, in the server's words (`status` says the same): `awaiting_review` is a task waiting
 * for a person's review of its upstream, worded apart from the reviewed result itself ("awaiting review",
 * a badge).
 * @param {string} state
 */
export function stateLabel(state) {
  return lists().state_labels[state] ?? state.replaceAll('_', ' ');
}
