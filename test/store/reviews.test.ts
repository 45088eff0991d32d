// The store's side of choosing results. A downstream of a reviewed upstream is ready only once
// the upstream is done AND approved, whoever moves what; rejection skips it (and its own downstreams);
// approval or a re-roll brings it back; a decision on a task that moved since is refused with what changed.
import { describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/index.js';
import { submit, task, useStoreWithRun } from './helpers.js';

const ctx = useStoreWithRun();

const by = 'ana';
const ready = (store: Store) =>
  store.tasks.nextPending('r1', 100, undefined, 'manifest').map((t) => t.taskId);

/** still (reviewed) → clip → poster; other (not reviewed) → side. */
function chain(store: Store): void {
  store.tasks.upsertTasks('r1', [
    { ...task('still'), review: true },
    { ...task('clip'), upstreams: [{ name: '', taskId: 'still' }] },
    { ...task('poster'), upstreams: [{ name: '', taskId: 'clip' }] },
    task('other'),
    { ...task('side'), upstreams: [{ name: '', taskId: 'other' }] },
  ]);
}

function finish(store: Store, taskId: string, uuid: string): void {
  submit(store, 'r1', taskId, uuid, 3);
  store.tasks.moveTask('r1', taskId, 'downloading', null);
  store.tasks.markDone('r1', taskId);
}

describe('review in the store', () => {
  it('releases a downstream only on approval; rejection skips down the chain; approval brings it back', () => {
    const store = ctx.store();
    chain(store);
    finish(store, 'still', 'u-still');
    finish(store, 'other', 'u-other');
    // An unreviewed upstream releases at once; the reviewed one does not.
    expect(ready(store)).toEqual(['side']);
    expect(store.reviews.awaiting('r1').map((t) => t.taskId)).toEqual(['still']);
    expect(store.reviews.waitingOnReview('r1')).toBe(1);

    const rejected = store.reviews.decide('r1', 'still', { verdict: 'reject', by, note: 'too dark' });
    expect(rejected).toMatchObject({ ok: true, verdict: 'reject', changed: true });
    expect(store.tasks.getTask('r1', 'clip')).toMatchObject({
      state: 'skipped',
      error:
        'waits for still, whose result was rejected by ana ("too dark"): never submitted, nothing charged; approve or re-roll still to send it on',
    });
    expect(store.tasks.getTask('r1', 'poster')?.state).toBe('skipped');
    expect(store.tasks.getTask('r1', 'poster')?.error).toMatch(/^waits for clip, which is skipped/);
    expect(ready(store)).toEqual(['side']);

    expect(store.reviews.decide('r1', 'still', { verdict: 'approve', by })).toMatchObject({ ok: true });
    expect(store.tasks.getTask('r1', 'clip')?.state).toBe('pending');
    expect(store.tasks.getTask('r1', 'poster')?.state).toBe('pending');
    expect(ready(store)).toEqual(['clip', 'side']);
    expect(store.reviews.reviewCounts('r1')).toEqual({ reviewed: 1, awaiting: 0, approved: 1, rejected: 0 });
  });

  it('a re-roll makes a new attempt whose downstream waits for its review; stale decisions are refused', () => {
    const store = ctx.store();
    chain(store);
    finish(store, 'still', 'u-still');
    const seen = store.tasks.getTask('r1', 'still')?.version as number;
    store.reviews.decide('r1', 'still', { verdict: 'approve', by, expectedVersion: seen });
    expect(ready(store)).toContain('clip');

    const stale = store.reviews.decide('r1', 'still', { verdict: 'reroll', by, expectedVersion: seen });
    expect(stale).toEqual({
      taskId: 'still',
      ok: false,
      version: seen + 1,
      reason: `still changed since you looked (version ${seen}, now ${seen + 1}): approved by ana at 2025-03-31T23:00:00.000Z; its result (attempt 1) is approved; look again and decide anew`,
    });

    const reroll = store.reviews.decide('r1', 'still', { verdict: 'reroll', by, expectedVersion: seen + 1 });
    expect(reroll).toMatchObject({ ok: true, attempt: 2 });
    expect(store.tasks.getTask('r1', 'still')).toMatchObject({
      state: 'pending',
      attempt: 2,
      verdict: null,
      imgUuid: null,
    });
    // The re-roll is ready; its downstream waits again.
    expect(ready(store)).toEqual(['still', 'other']);
    expect(store.reviews.queuedRerollMax('r1')).toBe(3);
    // Nothing can be decided on it until its new result is on disk.
    expect(store.reviews.decide('r1', 'still', { verdict: 'approve', by })).toMatchObject({
      ok: false,
      reason: 'still is pending, attempt 2: only a result on disk can be decided; wait for it',
    });
    finish(store, 'still', 'u-still-2');
    expect(ready(store)).toEqual(['other']);
    expect(store.reviews.awaiting('r1').map((t) => [t.taskId, t.attempt])).toEqual([['still', 2]]);
    expect(store.reviews.decisionsOf('r1', 'still').map((d) => [d.verdict, d.attempt])).toEqual([
      ['approve', 1],
      ['reroll', 1],
    ]);
    expect(store.reviews.rerollSpend('r1')).toEqual({ charged: 3, refunded: 0, jobs: 1 });
    expect(store.reviews.decide('r1', 'other', { verdict: 'approve', by })).toMatchObject({
      ok: false,
      reason: 'other is not reviewed (the manifest does not say review: true for it)',
    });
  });
});
