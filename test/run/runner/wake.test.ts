// The submitter's waits for room: the loop waits for a slot or an answer while chained submissions wait for
// room for their exact price, all at once. One wake that reached only the last of them left the others
// waiting for ever: a worker holding claimed tasks it never sent, and every other worker of its fleet
// waiting for those claims (found by the fleet chaos torture).

import { describe, expect, it } from 'vitest';
import { DEFAULT_POLL_PROFILES } from '../../../src/run/polling.js';
import { RunCore } from '../../../src/run/runner/core.js';
import { createLogger } from '../../../src/util/log.js';
import { task } from '../../store/helpers.js';
import { fakeDownload, useRunnerSetup } from './fakes.js';

const setup = useRunnerSetup();

function core() {
  const s = setup([task('t1', {}, 0.2)]);
  return new RunCore(
    {
      store: s.store,
      client: s.api,
      keyFingerprint: 'fp0000000000',
      logger: createLogger(),
      download: fakeDownload(),
      now: s.clock.now,
      sleep: s.clock.sleep,
    },
    {
      runId: 'r1',
      runDir: s.dir,
      concurrency: 4,
      pollProfiles: DEFAULT_POLL_PROFILES,
      pollConcurrency: 1,
      downloadConcurrency: 1,
      maxDownloadBytes: 1024,
      downloadTimeoutMs: 1_000,
      submitRetries: 0,
      retryBaseMs: 1,
      retryCapMs: 1,
      giveUpAfterTasks: 3,
      stop: new AbortController().signal,
    },
  );
}

/** Which of `waits` have resolved, after the microtasks a wake schedules. */
async function woken(waits: Promise<void>[]): Promise<boolean[]> {
  const done = waits.map(() => false);
  waits.forEach((w, i) => void w.then(() => (done[i] = true)));
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe('waiting for room', () => {
  it('an answer (a freed slot) wakes every waiter, not only the last one to wait', async () => {
    const c = core();
    const waits = [c.waitForWake(), c.waitForWake(), c.waitForWake()];
    expect(await woken(waits)).toEqual([false, false, false]);
    c.wakeSubmitter();
    expect(await woken(waits)).toEqual([true, true, true]);
  });

  it('a stop wakes every waiter, so each sees submitting must end', async () => {
    const c = core();
    const waits = [c.waitForWake(), c.waitForWake()];
    c.requestStop('budget', 'the budget is spent');
    expect(await woken(waits)).toEqual([true, true]);
    const halted = [c.waitForWake(), c.waitForWake()];
    c.haltNow('interrupted', 'interrupted twice');
    expect(await woken(halted)).toEqual([true, true]);
  });

  it('a wake reaches only those already waiting: a later waiter waits for the next one', async () => {
    const c = core();
    const first = c.waitForWake();
    c.wakeSubmitter();
    const later = c.waitForWake();
    expect(await woken([first, later])).toEqual([true, false]);
    c.wakeSubmitter();
    expect(await woken([later])).toEqual([true]);
  });
});
