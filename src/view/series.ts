// The two charts of a run page as data: spend over time (charged, refunded, net, from the ledger, which
// only grows, so it is read incrementally) and tasks finished over time with the recent rate and an
// estimated end. Both are kept per second and thinned to at most MAX_POINTS for the page.

import type { LedgerPoint } from '../store/index.js';

export const MAX_POINTS = 400;
/** The rate is measured over this window before the newest finish (or the whole run when shorter). */
export const RATE_WINDOW_MS = 5 * 60_000;

/** Cumulative money per second of the ledger. */
export class SpendSeries {
  #lastId = 0;
  #charged = 0;
  #refunded = 0;
  /** second → cumulative [charged, refunded] at its end. */
  readonly #bySecond = new Map<number, [number, number]>();

  get lastId(): number {
    return this.#lastId;
  }

  add(points: readonly LedgerPoint[]): void {
    for (const p of points) {
      if (p.kind === 'charge') this.#charged += p.tokens;
      else this.#refunded += p.tokens;
      this.#bySecond.set(Math.floor(Date.parse(p.at) / 1000), [this.#charged, this.#refunded]);
      this.#lastId = p.id;
    }
  }

  /** [time ms, charged, refunded, net] rows, oldest first, at most MAX_POINTS (the last one kept). */
  points(): Array<[number, number, number, number]> {
    const rows = [...this.#bySecond.entries()].map(
      ([s, [c, r]]) => [s * 1000, round(c), round(r), round(c - r)] as [number, number, number, number],
    );
    return thin(rows);
  }
}

export interface FinishedSeries {
  /** [time ms, tasks finished so far] rows, oldest first. */
  points: Array<[number, number]>;
  finished: number;
  /** Tasks finished per minute over the recent window; null before two finishes. */
  ratePerMinute: number | null;
  /** When the unfinished tasks would be done at that rate (ISO); null without a rate or work left. */
  estimatedEnd: string | null;
}

/** From the finish times (ISO, oldest first) and how many tasks are still to finish. */
export function finishedSeries(times: Iterable<string>, unfinished: number, now: Date): FinishedSeries {
  const bySecond = new Map<number, number>();
  const recent: number[] = [];
  let finished = 0;
  let first: number | undefined;
  let last = 0;
  for (const iso of times) {
    const t = Date.parse(iso);
    if (Number.isNaN(t)) continue;
    finished++;
    first ??= t;
    last = Math.max(last, t);
    bySecond.set(Math.floor(t / 1000), finished);
    recent.push(t);
    if (recent.length > 4096) recent.splice(0, 2048);
  }
  const from = Math.max(first ?? 0, last - RATE_WINDOW_MS);
  const inWindow = recent.filter((t) => t >= from).length;
  const span = last - from;
  const ratePerMinute = finished >= 2 && span > 0 ? (inWindow / span) * 60_000 : null;
  const estimatedEnd =
    ratePerMinute !== null && ratePerMinute > 0 && unfinished > 0
      ? new Date(now.getTime() + (unfinished / ratePerMinute) * 60_000).toISOString()
      : null;
  const points = thin([...bySecond.entries()].map(([s, n]) => [s * 1000, n] as [number, number]));
  return {
    points,
    finished,
    ratePerMinute: ratePerMinute === null ? null : round(ratePerMinute),
    estimatedEnd,
  };
}

/** Every k-th row so that at most MAX_POINTS remain, always keeping the newest. */
function thin<T>(rows: T[]): T[] {
  if (rows.length <= MAX_POINTS) return rows;
  const step = Math.ceil(rows.length / MAX_POINTS);
  const out = rows.filter((_, i) => i % step === 0);
  const lastRow = rows[rows.length - 1];
  if (lastRow !== undefined && out[out.length - 1] !== lastRow) out.push(lastRow);
  return out;
}

function round(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}
