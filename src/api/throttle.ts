// How fast the client may talk to the API. Two mechanisms, both shared by every task of a client:
//
// - A gate per request class (submissions, reads): an answer with `Retry-After` closes the gate of
//   its class until then, so one throttled task holds back all of them instead of each finding out
//   for itself (and each earning another 429).
// - An AIMD limit on submissions per second: each 429 halves it, each quiet period raises it by a
//   step, and once 429s have stopped for a while it is lifted. Reads are not rate-limited here: the
//   runner's poll pool bounds them.
//
// Time comes only from the injected `now` and `sleep`, so the whole behaviour is a table in tests.

import { MediabatchError } from '../errors.js';

export type RequestClass = 'submit' | 'read';

export interface ThrottleOptions {
  /** Epoch milliseconds. */
  now: () => number;
  /** Resolves after `ms`, or rejects when `signal` aborts. */
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Lowest submission rate a run of 429s can push it to. Default 0.2 per second (one each 5 s). */
  minPerSecond?: number;
  /** Added to the rate after each quiet period. Default 0.5 per second. */
  stepPerSecond?: number;
  /** A period without a 429 that earns one step up. Default 10 s. */
  quietMs?: number;
  /** After this long without a 429 the limit is lifted. Default 60 s. */
  releaseMs?: number;
  /** How far back submissions are counted to know the rate a first 429 halves. Default 1 s. */
  windowMs?: number;
}

export interface ThrottleState {
  /** The current limit on submissions per second, or null when there is none. */
  submitsPerSecond: number | null;
  /** When the later of the two gates opens (epoch ms), or null when both are open. */
  until: number | null;
  submitUntil: number | null;
  readUntil: number | null;
}

/** When a request was let through; a 429 to a request let through before the last slowdown says nothing new. */
export interface Ticket {
  readonly startedAt: number;
}

export class ThrottleAbortedError extends MediabatchError {
  readonly code = 'MEDIABATCH_THROTTLE_ABORTED';
  constructor() {
    super('cancelled while waiting for the API to accept requests again');
    this.name = 'ThrottleAbortedError';
  }
}

export class Throttle {
  readonly #now: () => number;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly #min: number;
  readonly #step: number;
  readonly #quietMs: number;
  readonly #releaseMs: number;
  readonly #windowMs: number;
  readonly #gates: Record<RequestClass, number> = { submit: 0, read: 0 };
  /** Submissions per second, or null for no limit. */
  #rate: number | null = null;
  #lastLimitedAt = 0;
  #lastRaisedAt = 0;
  /** Earliest start of the next submission under the rate limit. */
  #nextSlot = 0;
  #recentSubmits: number[] = [];

  constructor(options: ThrottleOptions) {
    this.#now = options.now;
    this.#sleep = options.sleep;
    this.#min = options.minPerSecond ?? 0.2;
    this.#step = options.stepPerSecond ?? 0.5;
    this.#quietMs = options.quietMs ?? 10_000;
    this.#releaseMs = options.releaseMs ?? 60_000;
    this.#windowMs = options.windowMs ?? 1_000;
  }

  /**
   * Waits until a request of this class may be sent. Submissions also take the next slot of the
   * rate limit, reserved before waiting so that concurrent callers line up instead of bunching.
   */
  async acquire(kind: RequestClass, signal?: AbortSignal): Promise<Ticket> {
    let slot = 0;
    if (kind === 'submit') {
      this.#refresh();
      if (this.#rate !== null) {
        slot = Math.max(this.#now(), this.#nextSlot);
        this.#nextSlot = slot + 1000 / this.#rate;
      }
    }
    // The gate can move while we sleep (another answer with Retry-After): look again after each wait.
    for (;;) {
      if (signal?.aborted) throw new ThrottleAbortedError();
      const wait = Math.max(this.#gates[kind], slot) - this.#now();
      if (wait <= 0) break;
      try {
        await this.#sleep(wait, signal);
      } catch {
        throw new ThrottleAbortedError();
      }
    }
    const startedAt = this.#now();
    if (kind === 'submit') {
      this.#recentSubmits.push(startedAt);
      this.#recentSubmits = this.#recentSubmits.filter((t) => t > startedAt - this.#windowMs);
    }
    return { startedAt };
  }

  /** Learns from one answer: `Retry-After` closes the gate of its class; a throttled submission slows submissions. */
  observe(
    kind: RequestClass,
    ticket: Ticket,
    answer: { retryAfterMs?: number | undefined; throttled?: boolean | undefined },
  ): void {
    const now = this.#now();
    if (answer.retryAfterMs !== undefined) {
      this.#gates[kind] = Math.max(this.#gates[kind], now + answer.retryAfterMs);
    }
    if (kind !== 'submit' || !answer.throttled) return;
    this.#refresh();
    // Many requests in flight all get their 429 at about once: only those let through after the
    // last slowdown tell us the new rate is still too fast.
    if (this.#rate !== null && ticket.startedAt <= this.#lastLimitedAt) return;
    const from = this.#rate ?? this.#observedRate(now);
    this.#rate = Math.max(this.#min, from / 2);
    this.#lastLimitedAt = now;
    this.#lastRaisedAt = now;
    this.#nextSlot = Math.max(this.#nextSlot, now + 1000 / this.#rate);
  }

  state(): ThrottleState {
    this.#refresh();
    const now = this.#now();
    const open = (t: number) => (t > now ? t : null);
    const submitUntil = open(this.#gates.submit);
    const readUntil = open(this.#gates.read);
    const until =
      submitUntil === null ? readUntil : readUntil === null ? submitUntil : Math.max(submitUntil, readUntil);
    return { submitsPerSecond: this.#rate, until, submitUntil, readUntil };
  }

  /** Submissions per second over the last window, as seen by the clock now; at least one. */
  #observedRate(now: number): number {
    const count = this.#recentSubmits.filter((t) => t > now - this.#windowMs).length;
    return Math.max(1, count) / (this.#windowMs / 1000);
  }

  /** Applies the additive increases and the release that time has earned since the last look. */
  #refresh(): void {
    if (this.#rate === null) return;
    const now = this.#now();
    if (now - this.#lastLimitedAt >= this.#releaseMs) {
      this.#rate = null;
      this.#nextSlot = 0;
      return;
    }
    const steps = Math.floor((now - this.#lastRaisedAt) / this.#quietMs);
    if (steps > 0) {
      this.#rate += steps * this.#step;
      this.#lastRaisedAt += steps * this.#quietMs;
    }
  }
}

/** A real sleep that an AbortSignal cuts short. */
export function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
