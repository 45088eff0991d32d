import { describe, expect, it } from 'vitest';
import { emptyAccount, type RunAccount } from '../../src/account/index.js';
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

describe('progress read from the account', () => {
  it("states the account at each frame, not the runner's counters", () => {
    let out = '';
    const accounts = [
      { finished: 0, done: 0, pending: 20, net: 0, estimate: 4 },
      { finished: 4, done: 3, pending: 16, net: 0.6, estimate: 4 },
      // A rejection in review took a downstream out: the estimate follows it.
      { finished: 10, done: 9, pending: 9, net: 1.8, estimate: 3.8 },
    ].map((f) => {
      const a = emptyAccount({ id: 'r', name: 'r', manifest: 'r.yaml', state: 'running', exit_code: null });
      a.tasks = 20;
      a.finished = f.finished;
      a.by_state = counts({ done: f.done, pending: f.pending, skipped: f.finished - f.done });
      a.money.net = f.net;
      a.estimate.tokens = f.estimate;
      return a;
    });
    let read = 0;
    const view = new ProgressView({
      out: { write: (s: string) => (out += s) },
      interactive: false,
      total: 20,
      estimate: 4,
      account: () => accounts[Math.min(read++, accounts.length - 1)] as RunAccount,
    });
    // The runner's own counters say nothing finished: the line never shows them.
    const stale = { counts: counts({ pending: 20 }), charged: 0, refunded: 0, inFlight: 0 };
    const sleep = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
    for (let i = 0; i < accounts.length; i++) {
      view.update(stale);
      sleep(20);
    }
    view.close();
    expect(read).toBe(3);
    expect(out.split('\n').filter(Boolean)).toEqual([
      '0/20 finished · 0 done · 0 of ~4 tokens',
      '4/20 finished · 3 done · 1 skipped · 0.6 of ~4 tokens',
      '10/20 finished · 9 done · 1 skipped · 1.8 of ~3.8 tokens',
    ]);
  });
});
