import { describe, expect, it } from 'vitest';
import { describeProgress, etaText, ProgressView } from '../../src/cli/progress.js';
import type { TaskState } from '../../src/store/index.js';

const counts = (over: Partial<Record<TaskState, number>>): Record<TaskState, number> => ({
  pending: 0,
  awaiting_review: 0,
  submitting: 0,
  in_doubt: 0,
  submitted: 0,
  running: 0,
  stalled: 0,
  downloading: 0,
  unfetched: 0,
  lost: 0,
  done: 0,
  failed: 0,
  rejected: 0,
  blocked: 0,
  skipped: 0,
  ...over,
});

describe('etaText', () => {
  it.each([
    [10_000, 0, 10, ''],
    [10_000, 5, 0, ''],
    [10_000, 5, 5, ' · ETA 10s'],
    [10_000, 1, 7, ' · ETA 1m10s'],
    [3_000, 30, 1, ' · ETA 0s'],
  ])('%i ms for %i tasks, %i left: %j', (elapsed, done, left, text) => {
    expect(etaText(elapsed, done, left)).toBe(text);
  });
});

describe('progress without a terminal', () => {
  it('prints a plain line each time another tenth of the tasks has finished', () => {
    let out = '';
    const view = new ProgressView({
      out: { write: (s: string) => (out += s) },
      interactive: false,
      total: 20,
      estimate: 4,
    });
    const progress = (done: number, failed = 0) => ({
      counts: counts({ done, failed, pending: 20 - done - failed }),
      charged: (done + failed) * 0.2,
      refunded: failed * 0.2,
      inFlight: 0,
    });
    view.update(progress(0));
    view.update(progress(1)); // same tenth as 0: nothing new
    view.update(progress(2));
    view.update(progress(3, 1));
    view.close();
    expect(out.split('\n').filter(Boolean)).toEqual([
      '0/20 finished · 0 done · 0 of ~4 tokens',
      '2/20 finished · 2 done · 0.4 of ~4 tokens',
      '4/20 finished · 3 done · 1 failed · 0.6 of ~4 tokens',
    ]);
    expect(describeProgress(progress(20), 20, 4)).toBe('20/20 finished · 20 done · 4 of ~4 tokens');
  });
});
