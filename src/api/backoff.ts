// Capped exponential backoff with full jitter: the wait is uniform in [0, min(cap, base * 2^attempt)).
// Full jitter spreads the retries of many tasks that failed together (a 500 burst), so they do not
// come back in step.

export interface BackoffOptions {
  baseMs: number;
  capMs: number;
  /** Uniform in [0, 1), like Math.random; injected so tests are exact. */
  random: () => number;
}

function check(name: string, value: number, min: number): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min) {
    throw new Error(`${name}: must be a finite number >= ${min}, got ${String(value)}`);
  }
}

/** Milliseconds to wait before retry number `attempt + 1`; `attempt` counts from 0. */
export function backoffDelay(attempt: number, options: BackoffOptions): number {
  check('attempt', attempt, 0);
  if (!Number.isInteger(attempt)) throw new Error(`attempt: must be a whole number, got ${attempt}`);
  check('baseMs', options.baseMs, 0);
  check('capMs', options.capMs, 0);
  // 2^attempt overflows to Infinity for large attempts; the cap keeps the result finite.
  const grown = options.baseMs === 0 ? 0 : options.baseMs * 2 ** attempt;
  const ceiling = Math.min(options.capMs, grown);
  const r = options.random();
  const unit = Number.isFinite(r) ? Math.min(Math.max(r, 0), 1) : 0;
  return Math.floor(unit * ceiling);
}
