// One seeded generator for every random choice the sandbox makes, so that the same seed and the
// same sequence of requests give the same job ids, failures and faults.

export interface Random {
  /** A float in [0, 1). */
  next(): number;
  /** An integer in [min, max], both included. */
  int(min: number, max: number): number;
  /** A float in [min, max). */
  between(min: number, max: number): number;
  pick<T>(items: readonly T[]): T;
  /** A version-4 shaped UUID built from the generator, not from the system's entropy. */
  uuid(): string;
  /** A 32-bit integer to seed a child generator with. */
  seed(): number;
}

/** mulberry32: tiny, fast and good enough to spread faults; not for secrets. */
export function createRandom(seed: number): Random {
  return new Mulberry32(seed);
}

// A class rather than an object of closures: a sandbox makes two generators for every job it accepts.
class Mulberry32 implements Random {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  between(min: number, max: number): number {
    return min + this.next() * (max - min);
  }

  pick<T>(items: readonly T[]): T {
    const item = items[Math.floor(this.next() * items.length)];
    if (item === undefined) throw new Error('pick: needs at least one item');
    return item;
  }

  uuid(): string {
    const bytes = Array.from({ length: 16 }, () => Math.floor(this.next() * 256));
    bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x40;
    bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80;
    const hex = bytes.map((b) => b.toString(16).padStart(2, '0')).join('');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  seed(): number {
    return Math.floor(this.next() * 4294967296) >>> 0;
  }
}
