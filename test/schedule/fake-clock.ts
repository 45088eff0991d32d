import type { Timers } from '../../src/schedule/timers.js';

interface Pending {
  at: number;
  seq: number;
  callback: () => void;
}

/** A clock and timers that move only when told, running due timers in order on the way. */
export class FakeClock implements Timers {
  #now: number;
  #seq = 0;
  readonly #pending = new Map<number, Pending>();

  constructor(start: Date) {
    this.#now = start.getTime();
  }

  readonly now = (): Date => new Date(this.#now);

  setTimeout(callback: () => void, ms: number): unknown {
    const id = ++this.#seq;
    this.#pending.set(id, { at: this.#now + Math.max(0, ms), seq: id, callback });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.#pending.delete(handle as number);
  }

  /** Timers armed and not yet run. */
  get pendingCount(): number {
    return this.#pending.size;
  }

  /** Moves to `to`, running every timer due on the way; lets promises settle after each. */
  async advanceTo(to: Date): Promise<void> {
    const target = to.getTime();
    for (;;) {
      let next: [number, Pending] | undefined;
      for (const entry of this.#pending) {
        const [, p] = entry;
        if (p.at > target) continue;
        if (!next || p.at < next[1].at || (p.at === next[1].at && p.seq < next[1].seq)) next = entry;
      }
      if (!next) break;
      this.#pending.delete(next[0]);
      this.#now = Math.max(this.#now, next[1].at);
      next[1].callback();
      await settle();
    }
    this.#now = Math.max(this.#now, target);
    await settle();
  }

  advance(ms: number): Promise<void> {
    return this.advanceTo(new Date(this.#now + ms));
  }
}

/** Lets pending promise chains run (one turn of the event loop). */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
