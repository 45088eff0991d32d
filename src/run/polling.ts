// When to look at a job next. Adaptive per job: the first look after a delay that suits the kind
// (images are quick, video is slow), then growing by a factor up to a cap. Pure; the runner owns the timer.

export interface PollProfile {
  firstMs: number;
  factor: number;
  capMs: number;
}

export type PollProfiles = Record<'image' | 'audio' | 'video', PollProfile>;

/** The service's documentation recommends polling every 5 s; images finish in seconds, video in minutes. */
export const DEFAULT_POLL_PROFILES: PollProfiles = {
  image: { firstMs: 2_000, factor: 1.5, capMs: 10_000 },
  audio: { firstMs: 3_000, factor: 1.5, capMs: 15_000 },
  video: { firstMs: 8_000, factor: 1.5, capMs: 30_000 },
};

/** Delay before poll number `pollsSoFar + 1` of one job. */
export function nextPollDelay(profile: PollProfile, pollsSoFar: number): number {
  const grown = profile.firstMs * profile.factor ** Math.max(0, pollsSoFar - 1);
  return Math.round(Math.min(profile.capMs, pollsSoFar === 0 ? profile.firstMs : grown));
}

/** Every delay scaled by `factor` (tests and the sandbox demo use small factors). */
export function scaleProfiles(profiles: PollProfiles, factor: number): PollProfiles {
  const scale = (p: PollProfile): PollProfile => ({
    firstMs: p.firstMs * factor,
    factor: p.factor,
    capMs: p.capMs * factor,
  });
  return { image: scale(profiles.image), audio: scale(profiles.audio), video: scale(profiles.video) };
}

/** With a callback receiver, polls become a slow safety net for callbacks that were dropped. */
export function fallbackProfiles(profiles: PollProfiles, fallbackMs: number): PollProfiles {
  const slow = (p: PollProfile): PollProfile => ({
    firstMs: Math.max(p.firstMs, fallbackMs),
    factor: 1,
    capMs: Math.max(p.capMs, fallbackMs),
  });
  return { image: slow(profiles.image), audio: slow(profiles.audio), video: slow(profiles.video) };
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
