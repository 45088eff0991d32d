import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import type { Estimate } from '../../src/catalog/types.js';
import { type NewTask, openStore, type Store, type StoreOptions } from '../../src/store/index.js';

export const T0 = new Date('2025-03-31T23:00:00.000Z');

/** A clock that only moves when told to. */
export class FakeClock {
  #ms: number;
  constructor(start: Date = T0) {
    this.#ms = start.getTime();
  }
  readonly now = (): Date => new Date(this.#ms);
  advance(ms: number): void {
    this.#ms += ms;
  }
  set(date: Date): void {
    this.#ms = date.getTime();
  }
}

/** Temp folders and stores opened by a test, removed after it. */
export function useTempDirs(): { dir(): string; open(file: string, opts?: StoreOptions): Store } {
  const dirs: string[] = [];
  const stores: Store[] = [];
  afterEach(() => {
    for (const store of stores.splice(0)) store.close();
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  return {
    dir() {
      const dir = mkdtempSync(join(tmpdir(), 'mediabatch-store-'));
      dirs.push(dir);
      return dir;
    },
    open(file, opts) {
      const store = openStore(file, opts);
      stores.push(store);
      return store;
    },
  };
}

/** A fresh store in a fresh folder, with a fake clock and one run `r1`. */
export function useStoreWithRun(): { store(): Store; clock(): FakeClock; file(): string } {
  const temp = useTempDirs();
  let current: { store: Store; clock: FakeClock; file: string } | undefined;
  afterEach(() => {
    current = undefined;
  });
  const get = () => {
    if (current === undefined) {
      const clock = new FakeClock();
      const file = join(temp.dir(), 'state', 'mediabatch.db');
      const store = temp.open(file, { now: clock.now });
      store.createRun({ id: 'r1', manifestPath: '/m/spring.yaml', manifestName: 'spring', settings: {} });
      current = { store, clock, file };
    }
    return current;
  };
  return { store: () => get().store, clock: () => get().clock, file: () => get().file };
}

export function estimate(tokens: number, over: Partial<Estimate> = {}): Estimate {
  return {
    tokens,
    min: tokens,
    max: tokens,
    basis: `${tokens} tokens per image`,
    assumedPrice: false,
    ...over,
  };
}

export function task(taskId: string, body: Record<string, unknown> = {}, tokens = 3): NewTask {
  return {
    taskId,
    model: 'flat-image',
    endpoint: '/api/v1/images/generations',
    wireBody: JSON.stringify({ model: 'flat-image', prompt: `a photo of ${taskId}`, ...body }),
    estimate: estimate(tokens),
  };
}

/** Brings a task from pending to submitted with the given job id and cost. */
export function submit(
  store: Store,
  runId: string,
  taskId: string,
  imgUuid: string,
  cost: number,
  fp = 'fp0000000000',
) {
  const attemptNo = store.recordSubmitIntent(runId, taskId);
  store.recordSubmitted(runId, taskId, attemptNo, { imgUuid, cost, keyFingerprint: fp });
  return attemptNo;
}
