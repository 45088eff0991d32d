// The two charts of a run page as data: spend over time (charged, refunded, net) and tasks finished over
// time with the recent rate and an estimated end. The spend is kept from the ledger's per-second sums,
// read incrementally (the ledger only grows), with each model's charges beside it for the cost table.

import type { SpendBucket } from '../store/index.js';

export const MAX_POINTS = 400;
/** The rate is measured over this window before the newest finish (or the whole run when shorter). */
export const RATE_WINDOW_MS = 5 * 60_000;

export interface ModelSpend {
  charged: number;
  refunded: number;
  jobs: number;
}

/** Seconds of the store (`2026-01-05T09:00:00`, UTC) to milliseconds. */
function secondMs(second: string): number {
  return Date.parse(`${second}Z`);
}

/** Cumulative money per second of the ledger, and per model. */
export class SpendSeries {
  #lastId = 0;
  #charged = 0;
  #refunded = 0;
  /** second (ms) → cumulative [charged, refunded] at its end; seconds arrive in order within a read. */
  readonly #bySecond = new Map<number, [number, number]>();
  readonly byModel = new Map<string, ModelSpend>();

  get lastId(): number {
    return this.#lastId;
  }

  /** Every ledger row up to `id` has been read (a range of ids with none of this run's rows moves it too). */
  through(id: number): void {
    this.#lastId = Math.max(this.#lastId, id);
  }

  add(buckets: readonly SpendBucket[]): void {
    for (const b of buckets) {
      const model = this.byModel.get(b.model) ?? { charged: 0, refunded: 0, jobs: 0 };
      if (b.kind === 'charge') {
        this.#charged += b.tokens;
        model.charged += b.tokens;
        model.jobs += b.rows;
      } else {
        this.#refunded += b.tokens;
        model.refunded += b.tokens;
      }
      this.byModel.set(b.model, model);
      this.#bySecond.set(secondMs(b.second), [this.#charged, this.#refunded]);
      this.#lastId = Math.max(this.#lastId, b.lastId);
    }
  }

  /** [time ms, charged, refunded, net] rows, oldest first, at most MAX_POINTS (the last one kept). */
  points(): Array<[number, number, number, number]> {
    const rows = [...this.#bySecond.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([t, [c, r]]) => [t, round(c), round(r), round(c - r)] as [number, number, number, number]);
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

/** From the finishes per second (oldest first) and how many tasks are still to finish. */
export function finishedSeries(
  buckets: readonly { second: string; n: number }[],
  unfinished: number,
  now: Date,
): FinishedSeries {
  let finished = 0;
  const all: Array<[number, number]> = [];
  for (const b of buckets) {
    const t = secondMs(b.second);
    if (Number.isNaN(t)) continue;
    finished += b.n;
    all.push([t, finished]);
  }
  const first = all[0];
  const last = all.at(-1);
  let ratePerMinute: number | null = null;
  if (first !== undefined && last !== undefined && finished >= 2) {
    const from = Math.max(first[0], last[0] - RATE_WINDOW_MS);
    // Finished by the start of the window: the last point before it (0 when the window is the whole run).
    let before = 0;
    for (const [t, n] of all) if (t < from) before = n;
    const span = last[0] - from;
    ratePerMinute = span > 0 ? round(((finished - before) / span) * 60_000) : null;
  }
  const estimatedEnd =
    ratePerMinute !== null && ratePerMinute > 0 && unfinished > 0
      ? new Date(now.getTime() + (unfinished / ratePerMinute) * 60_000).toISOString()
      : null;
  return { points: thin(all), finished, ratePerMinute, estimatedEnd };
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
