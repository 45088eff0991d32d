// When to look at a job next. A job is first looked at near the shortest time its model is expected to
// take, then every few seconds (never less often than the service's recommended 5 s) until it is well
// past its expected longest time; only then do the looks back off. The expected times start from the
// catalog and are learnt per model from the run's own jobs. Pure; the runner owns the timers.
import { type ExpectedSeconds, expectedJobSeconds, jobSizeFactor } from '../catalog/durations.js';
import type { CatalogEntry, RequestBody } from '../catalog/types.js';

export type JobKind = CatalogEntry['kind'];

export interface PollProfile {
  /** Between two looks while the job is within its expected time. */
  intervalMs: number;
  /** Once the job is late, each wait is `factor - 1` times how late it is, up to `capMs`. */
  factor: number;
  capMs: number;
  /** The first look never comes sooner than this after submission (with callbacks: the safety net). */
  firstAtLeastMs: number;
}

export type PollProfiles = Record<JobKind, PollProfile>;

/**
 * The service recommends a look every 5 s; images and audio end within seconds of each other, so they are
 * looked at more often than video. A job's delay from success to notice is at most one interval.
 */
export const DEFAULT_POLL_PROFILES: PollProfiles = {
  image: { intervalMs: 2_000, factor: 1.5, capMs: 10_000, firstAtLeastMs: 0 },
  audio: { intervalMs: 2_000, factor: 1.5, capMs: 15_000, firstAtLeastMs: 0 },
  video: { intervalMs: 5_000, factor: 1.5, capMs: 30_000, firstAtLeastMs: 0 },
};

/** A job is late once it has run this many times its expected longest time. */
export const LATE_AFTER = 1.5;

export interface ExpectedMs {
  lowMs: number;
  highMs: number;
}

/** Delay from now until the next look at a job that has been at the service for `elapsedMs`. */
export function nextLookDelay(profile: PollProfile, expected: ExpectedMs, elapsedMs: number): number {
  // Half an interval past the expected shortest time: a look right at it would find almost nothing done,
  // and a job ending just after waits no longer than at any other look.
  const first = Math.max(
    Math.min(expected.lowMs + profile.intervalMs / 2, expected.highMs),
    profile.firstAtLeastMs,
  );
  if (elapsedMs < first) return Math.round(first - elapsedMs);
  const lateAt = expected.highMs * LATE_AFTER;
  if (elapsedMs < lateAt) return Math.round(profile.intervalMs);
  const backedOff = (elapsedMs - lateAt) * (profile.factor - 1);
  return Math.round(Math.min(profile.capMs, Math.max(profile.intervalMs, backedOff)));
}

/** Every delay scaled by `factor` (tests and the sandbox demo use small factors). */
export function scaleProfiles(profiles: PollProfiles, factor: number): PollProfiles {
  const scale = (p: PollProfile): PollProfile => ({
    intervalMs: p.intervalMs * factor,
    factor: p.factor,
    capMs: p.capMs * factor,
    firstAtLeastMs: p.firstAtLeastMs * factor,
  });
  return { image: scale(profiles.image), audio: scale(profiles.audio), video: scale(profiles.video) };
}

/** With a callback receiver, polls become a slow safety net for callbacks that were dropped. */
export function fallbackProfiles(profiles: PollProfiles, fallbackMs: number): PollProfiles {
  const slow = (p: PollProfile): PollProfile => ({
    intervalMs: Math.max(p.intervalMs, fallbackMs),
    factor: 1,
    capMs: Math.max(p.capMs, fallbackMs),
    firstAtLeastMs: Math.max(p.firstAtLeastMs, fallbackMs),
  });
  return { image: slow(profiles.image), audio: slow(profiles.audio), video: slow(profiles.video) };
}

/** Observations kept per model: enough for a stable 5th and 95th percentile, bounded memory. */
const KEPT = 200;
/** Below this many observations of a model, the catalog's expectation stands. */
const LEARNT_FROM = 5;
/**
 * Below this many, what is learnt may bring the first look earlier than the catalog's but not later. A few
 * jobs say little of the shortest: five videos drawn evenly from 30-90 s are all over 46 s one time in five,
 * and the next 33 s video then waited for a first look at 44 s (one late video made the p95 of
 * success -> file 12.8 s in the 64-task bench, and the makespan vary between repetitions).
 */
const LEARNT_LOW_FROM = 20;

/**
 * Job durations learnt per model from this run's own jobs. Each observation is kept relative to its
 * request's size (a 10 s video counts half), so one model's mixed requests teach each other.
 */
export class JobDurations {
  readonly #timeScale: number;
  readonly #seen = new Map<string, { values: number[]; next: number }>();

  /** `timeScale`: the run's time scale (the sandbox demo's 0.1), applied to the catalog's expectation. */
  constructor(timeScale = 1) {
    this.#timeScale = timeScale;
  }

  expect(entry: CatalogEntry, body: RequestBody): ExpectedMs {
    const prior = expectedJobSeconds(entry, body);
    const unit = jobSizeFactor(entry, body) * this.#timeScale * 1000;
    const learnt = this.#learnt(entry.model);
    if (!learnt)
      return { lowMs: prior.low * 1000 * this.#timeScale, highMs: prior.high * 1000 * this.#timeScale };
    // The first jobs to finish are the short ones: what is learnt may only raise the longest expected time,
    // so a job still within the catalog's range is never looked at less often; it moves the first look
    // later than the catalog's only once enough jobs were seen (LEARNT_LOW_FROM).
    const priorHighMs = prior.high * 1000 * this.#timeScale;
    const priorLowMs = prior.low * 1000 * this.#timeScale;
    const lowMs =
      learnt.count < LEARNT_LOW_FROM ? Math.min(learnt.low * unit, priorLowMs) : learnt.low * unit;
    return { lowMs, highMs: Math.max(learnt.high * unit, priorHighMs) };
  }

  /** A job of this model took `ms` from submission to success. */
  observe(entry: CatalogEntry, body: RequestBody, ms: number): void {
    if (!(ms > 0) || !Number.isFinite(ms)) return;
    const unit = jobSizeFactor(entry, body) * this.#timeScale * 1000;
    let seen = this.#seen.get(entry.model);
    if (!seen) {
      seen = { values: [], next: 0 };
      this.#seen.set(entry.model, seen);
    }
    if (seen.values.length < KEPT) seen.values.push(ms / unit);
    else seen.values[seen.next] = ms / unit;
    seen.next = (seen.next + 1) % KEPT;
  }

  #learnt(model: string): (ExpectedSeconds & { count: number }) | undefined {
    const values = this.#seen.get(model)?.values;
    if (!values || values.length < LEARNT_FROM) return undefined;
    const sorted = [...values].sort((a, b) => a - b);
    const n = sorted.length;
    const at = (q: number) => sorted[Math.min(n - 1, Math.floor(q * n))] ?? 0;
    // Under the shortest seen, by the gap expected between it and the true shortest (for times spread
    // evenly: the range over n - 1), and by a tenth: the next job may be quicker than any so far.
    const shortest = (sorted[0] ?? 0) - ((sorted[n - 1] ?? 0) - (sorted[0] ?? 0)) / (n - 1);
    return { low: Math.max(0, Math.min(at(0.05) * 0.9, shortest)), high: at(0.95), count: n };
  }
}

/**
 * How long a job took, from what is known: it was not done at the last look (`notBeforeMs` after
 * submission), it was at this one (`byMs`); the service's own start and end times, where they fall
 * within those bounds, are the closer figure (its clock and ours need not agree, so they are clamped).
 */
export function observedJobMs(
  notBeforeMs: number,
  byMs: number,
  startTime: unknown,
  endTime: unknown,
): number {
  const start = typeof startTime === 'string' ? Date.parse(startTime) : Number.NaN;
  const end = typeof endTime === 'string' ? Date.parse(endTime) : Number.NaN;
  const service = end - start;
  if (Number.isFinite(service) && service > 0) return Math.min(byMs, Math.max(notBeforeMs, service));
  return (notBeforeMs + byMs) / 2;
}

/** A min-heap of (due time, key): which job to look at next, in O(log n) per change. */
export class DueQueue<K> {
  #heap: { at: number; key: K }[] = [];

  get size(): number {
    return this.#heap.length;
  }

  push(at: number, key: K): void {
    const heap = this.#heap;
    heap.push({ at, key });
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heap[parent]!.at <= heap[i]!.at) break;
      [heap[parent], heap[i]] = [heap[i]!, heap[parent]!];
      i = parent;
    }
  }

  peekAt(): number | undefined {
    return this.#heap[0]?.at;
  }

  /** Removes and returns every key due at or before `now`. */
  popDue(now: number): K[] {
    const due: K[] = [];
    while (this.#heap.length > 0 && this.#heap[0]!.at <= now) due.push(this.#pop());
    return due;
  }

  #pop(): K {
    const heap = this.#heap;
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && heap[l]!.at < heap[m]!.at) m = l;
        if (r < heap.length && heap[r]!.at < heap[m]!.at) m = r;
        if (m === i) break;
        [heap[m], heap[i]] = [heap[i]!, heap[m]!];
        i = m;
      }
    }
    return top.key;
  }
}
