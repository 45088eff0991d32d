// Fakes for driving the Runner directly: an ApiClient whose answers the test scripts, a download that
// writes bytes, and one virtual clock shared by the store, the runner and its sleeps.

import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ApiClient } from '../../../src/api/client.js';
import type { DownloadResult } from '../../../src/api/download.js';
import type { BalanceOutcome, PollOutcome, SubmitOutcome } from '../../../src/api/outcome.js';
import type { JobRecord } from '../../../src/api/schemas.js';
import type { ThrottleState } from '../../../src/api/throttle.js';
import type { RunEvent } from '../../../src/run/events.js';
import { DEFAULT_POLL_PROFILES } from '../../../src/run/polling.js';
import { Runner, type RunnerDeps, type RunnerOptions } from '../../../src/run/runner.js';
import type { NewTask, Store } from '../../../src/store/index.js';
import { createLogger } from '../../../src/util/log.js';
import { T0, useTempDirs } from '../../store/helpers.js';

/** Virtual time: moves only when the runner sleeps (each sleep advances it and yields a turn). */
export class VirtualClock {
  ms = T0.getTime();
  readonly now = (): number => this.ms;
  readonly date = (): Date => new Date(this.ms);
  readonly sleep = (ms: number): Promise<void> => {
    this.ms += Math.max(0, ms);
    return new Promise((resolve) => setImmediate(resolve));
  };
}

export const accepted = (imgUuid: string, cost?: number): SubmitOutcome => ({
  type: 'accepted',
  imgUuid,
  cost,
  mayHaveCharged: true,
  retrySafe: false,
});

export const retryable = (reason: string, throttled = false): SubmitOutcome => ({
  type: 'retryable',
  reason,
  ...(throttled ? { throttled: true, retryAfterMs: 1_000 } : {}),
  mayHaveCharged: false,
  retrySafe: true,
});

export function job(imgUuid: string, status: string, files = 0): PollOutcome {
  const record: JobRecord = {
    img_uuid: imgUuid,
    status,
    ...(files > 0
      ? {
          json: Array.from({ length: files }, (_, i) => ({
            type: 'image',
            value: `https://cdn.test/${imgUuid}/${i}.png`,
          })),
        }
      : {}),
  };
  return { type: 'ok', value: record };
}

/** Resolves when the test says so. */
export function gate<T>(): { promise: Promise<T>; open(value: T): void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/**
 * The scripted API. `answers` per task id (read from the request's prompt "a photo of <id>"): one per
 * submission, the last repeated. `jobs` per img_uuid: one per poll, the last repeated.
 */
export class FakeApi implements ApiClient {
  readonly baseUrl = 'http://fake.test';
  readonly answers = new Map<string, Array<SubmitOutcome | Promise<SubmitOutcome>>>();
  readonly jobs = new Map<string, PollOutcome[]>();
  /** Task ids in the order their submissions were sent. */
  readonly submitted: string[] = [];
  /** img_uuids in the order they were looked at. */
  readonly polled: string[] = [];

  async submit(_endpoint: string, body: Record<string, unknown>): Promise<SubmitOutcome> {
    const taskId = String(body['prompt']).replace('a photo of ', '');
    this.submitted.push(taskId);
    const list = this.answers.get(taskId) ?? [];
    const next = list.length > 1 ? list.shift() : list[0];
    if (next === undefined) throw new Error(`no answer scripted for ${taskId}`);
    return next;
  }

  async getJob(imgUuid: string): Promise<PollOutcome> {
    this.polled.push(imgUuid);
    const list = this.jobs.get(imgUuid) ?? [];
    const next = list.length > 1 ? list.shift() : list[0];
    return next ?? { type: 'not-found', message: `no job ${imgUuid}` };
  }

  async getBalance(): Promise<BalanceOutcome> {
    return { type: 'ok', value: 100 };
  }

  throttleState(): ThrottleState {
    return { submitsPerSecond: null, until: null, submitUntil: null, readUntil: null };
  }

  async close(): Promise<void> {}
}

/** Writes a few bytes where the runner asks, as a successful download would; or fails as `fail` says. */
export function fakeDownload(fail?: (url: string) => DownloadResult | undefined): RunnerDeps['download'] {
  return async (url, dest) => {
    const failed = fail?.(url);
    if (failed) return failed;
    const bytes = Buffer.from(`bytes of ${url}`);
    mkdirSync(dirname(dest), { recursive: true });
    writeFileSync(dest, bytes);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    return { ok: true, bytes: bytes.length, sha256, path: dest, kind: 'image', ext: '.png' };
  };
}

/** Waits (in real turns of the event loop, not time) until `ready` holds. */
export async function until(ready: () => boolean, what = 'the condition'): Promise<void> {
  for (let i = 0; i < 20_000; i++) {
    if (ready()) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error(`timed out waiting for ${what}`);
}

export interface Harness {
  runner: Runner;
  events: RunEvent[];
  runDir: string;
}

/** A Runner on run `r1` of `store`, with fast image polls and small retry delays. */
export function makeRunner(
  setup: { store: Store; api: FakeApi; clock: VirtualClock; dir: string; download?: RunnerDeps['download'] },
  opts: Partial<RunnerOptions> = {},
): Harness {
  const events: RunEvent[] = [];
  const runDir = join(setup.dir, 'out', 'r1');
  mkdirSync(runDir, { recursive: true });
  const runner = new Runner(
    {
      store: setup.store,
      client: setup.api,
      keyFingerprint: 'fp0000000000',
      logger: createLogger(),
      download: setup.download ?? fakeDownload(),
      now: setup.clock.now,
      random: () => 0.5,
      sleep: setup.clock.sleep,
      onEvent: (event) => events.push(event),
    },
    {
      runId: 'r1',
      runDir,
      concurrency: 4,
      // Images are first looked at after 1 s (3 s expected, at a third of the time), then every second.
      pollProfiles: {
        ...DEFAULT_POLL_PROFILES,
        image: { intervalMs: 1_000, factor: 1, capMs: 1_000, firstAtLeastMs: 0 },
      },
      jobTimeScale: 1 / 3,
      pollConcurrency: 4,
      downloadConcurrency: 2,
      maxDownloadBytes: 1024 ** 2,
      downloadTimeoutMs: 10_000,
      submitRetries: 5,
      retryBaseMs: 100,
      retryCapMs: 1_000,
      giveUpAfterTasks: 3,
      stop: new AbortController().signal,
      ...opts,
    },
  );
  return { runner, events, runDir };
}

/** The events as `<event> <task>` lines, the way a reader scans them. */
export function eventLines(events: RunEvent[]): string[] {
  return events.map((e) => ('task' in e ? `${e.event} ${e.task}` : e.event));
}

/**
 * A temporary store with run `r1` holding `tasks`, a virtual clock and a scripted API, per test. Call at a
 * test file's top level: the folders are removed after each test.
 */
export function useRunnerSetup(): (tasks: NewTask[]) => {
  clock: VirtualClock;
  dir: string;
  store: Store;
  api: FakeApi;
} {
  const temp = useTempDirs();
  return (tasks) => {
    const clock = new VirtualClock();
    const dir = temp.dir();
    const store = temp.open(join(dir, 'state', 'mediabatch.db'), { now: clock.date });
    store.runs.createRun({ id: 'r1', manifestPath: '/m/spring.yaml', manifestName: 'spring', settings: {} });
    store.tasks.upsertTasks('r1', tasks);
    return { clock, dir, store, api: new FakeApi() };
  };
}

/** A task's state in run `r1`. */
export const stateOf = (store: Store, id: string) => store.tasks.getTask('r1', id)?.state;
