import { describe, expect, it } from 'vitest';
import { openStore, StoreError } from '../../src/store/index.js';
import { stateFor, T0, useStoreWithRun } from './helpers.js';

const ctx = useStoreWithRun();
/** Who claims a firing, and how long the claim lives unless renewed. */
const CLAIM = { holder: '4242@elsewhere#a1', ttlMs: 60_000 };

describe('runs', () => {
  it('creates a running run and refuses a second one with the same id', () => {
    const store = ctx.store();
    expect(store.runs.getRun('r1')).toEqual({
      id: 'r1',
      manifestPath: '/m/spring.yaml',
      manifestName: 'spring',
      state: 'running',
      exitCode: null,
      settings: {},
      callbackToken: null,
      balanceBefore: null,
      balanceAfter: null,
      createdAt: T0,
      startedAt: T0,
      finishedAt: null,
      firstStartedAt: T0,
      activeMs: 0,
      api: null,
      planDigest: null,
      planTasks: null,
      planStoring: false,
    });
    expect(() =>
      store.runs.createRun({
        id: 'r1',
        manifestPath: '/m/spring.yaml',
        manifestName: 'spring',
        settings: {},
      }),
    ).toThrow(StoreError);
  });

  it('keeps the first reason a run stopped for, until it starts again or finishes', () => {
    const store = ctx.store();
    const clock = ctx.clock();
    clock.advance(1000);
    const budget = { reason: 'budget', message: '3 task(s) did not fit under the budget of 1 tokens' };
    expect(store.runs.recordStop('r1', budget)).toBe(true);
    // A second worker's reason (a signal) does not replace the first.
    expect(store.runs.recordStop('r1', { reason: 'interrupted', message: 'interrupted' })).toBe(false);
    expect(store.runs.markRunState('r1', 'interrupted', 4).stop).toEqual({ ...budget, at: clock.now() });
    expect(store.runs.markRunState('r1', 'running').stop).toBeUndefined();
    expect(store.runs.recordStop('r1', { reason: 'quota-exceeded', message: 'quota' })).toBe(true);
    expect(store.runs.getRun('r1')?.stop?.reason).toBe('quota-exceeded');
    expect(store.runs.markRunState('r1', 'finished', 0).stop).toBeUndefined();
    expect(() => store.runs.recordStop('nope', budget)).toThrow(StoreError);
  });

  it('ends, resumes and finishes a run, listing it as unfinished until it finishes', () => {
    const store = ctx.store();
    const clock = ctx.clock();
    clock.advance(1000);
    expect(store.runs.markRunState('r1', 'interrupted', 4)).toMatchObject({
      state: 'interrupted',
      exitCode: 4,
    });
    expect(store.runs.unfinishedRuns().map((r) => r.id)).toEqual(['r1']);
    clock.advance(1000);
    // The last end is kept while the run goes again; the first start never moves; each session's time adds up.
    expect(store.runs.markRunState('r1', 'running')).toMatchObject({
      state: 'running',
      exitCode: null,
      finishedAt: new Date(T0.getTime() + 1000),
      startedAt: clock.now(),
      firstStartedAt: T0,
      activeMs: 1000,
      createdAt: T0,
    });
    store.runs.setRunBalance('r1', { before: 1000 });
    store.runs.setRunBalance('r1', { after: 970.5 });
    expect(store.runs.markRunState('r1', 'finished', 0)).toMatchObject({
      state: 'finished',
      exitCode: 0,
      balanceBefore: 1000,
      balanceAfter: 970.5,
      finishedAt: clock.now(),
      activeMs: 1000,
    });
    expect(store.runs.unfinishedRuns()).toEqual([]);
  });

  it('ends a run without an exit code (null), and as finished clears its stop', () => {
    const store = ctx.store();
    store.runs.recordStop('r1', { reason: 'budget', message: 'budget' });
    expect(store.runs.markRunState('r1', 'interrupted')).toMatchObject({
      state: 'interrupted',
      exitCode: null,
    });
    expect(store.runs.getRun('r1')?.stop?.reason).toBe('budget');
    expect(store.runs.markRunState('r1', 'finished')).toMatchObject({ state: 'finished', exitCode: null });
    expect(store.runs.getRun('r1')?.stop).toBeUndefined();
  });

  it('keeps the callback token so a restarted run accepts late callbacks', () => {
    const store = ctx.store();
    store.runs.setCallbackToken('r1', 'tok-123');
    expect(store.runs.getRun('r1')?.callbackToken).toBe('tok-123');
  });

  it('lists runs newest first, or one manifest’s runs', () => {
    const store = ctx.store();
    ctx.clock().advance(1000);
    store.runs.createRun({
      id: 'r2',
      manifestPath: '/m/other.yaml',
      manifestName: 'other',
      settings: { budget: 5 },
    });
    expect(store.runs.listRuns().map((r) => r.id)).toEqual(['r2', 'r1']);
    expect(store.runs.listRuns({ manifestPath: '/m/spring.yaml' }).map((r) => r.id)).toEqual(['r1']);
  });

  it("keeps a plan's digest and count, marked while its tasks are still being stored, until they all are", () => {
    const store = ctx.store();
    const digest = 'ab'.repeat(32);
    store.runs.setPlan('r1', { tasks: 3, digest, storing: true });
    expect(store.runs.getRun('r1')).toMatchObject({ planDigest: digest, planTasks: 3, planStoring: true });
    store.runs.planStored('r1');
    expect(store.runs.getRun('r1')).toMatchObject({ planDigest: digest, planTasks: 3, planStoring: false });
    // A plan recorded whole from the start (or by a mediabatch from before) is never marked.
    store.runs.setPlan('r1', { tasks: 4, digest: null });
    store.runs.planStored('r1');
    expect(store.runs.getRun('r1')).toMatchObject({ planDigest: null, planTasks: 4, planStoring: false });
  });

  it('says which run is unknown', () => {
    expect(() => ctx.store().runs.markRunState('nope', 'finished', 0)).toThrow(
      'run nope: not found in the state database: the runs it holds are listed by `status` on the same state',
    );
  });
});

describe('schedules', () => {
  it('remembers the last firing and the next one per manifest, keeping the last run over a skipped firing', () => {
    const store = ctx.store();
    const next = new Date('2025-04-01T03:00:00.000Z');
    store.schedules.setNextFire('/m/nightly.yaml', next);
    expect(store.schedules.getSchedule('/m/nightly.yaml')).toMatchObject({
      lastFiredAt: null,
      nextFireAt: next,
    });
    store.schedules.recordFiring('/m/nightly.yaml', {
      firedAt: next,
      runId: 'nightly-2025-04-01',
      nextFireAt: null,
    });
    store.schedules.recordFiring('/m/nightly.yaml', { firedAt: next, runId: null, nextFireAt: next });
    expect(store.schedules.listSchedules()).toEqual([
      {
        manifestPath: '/m/nightly.yaml',
        lastFiredAt: next,
        lastRunId: 'nightly-2025-04-01',
        nextFireAt: next,
        updatedAt: T0,
      },
    ]);
  });

  it('gives a firing to exactly one of two connections, and never an older slot after a newer one', () => {
    const store = ctx.store();
    const other = openStore(stateFor(ctx.file()));
    try {
      const at = new Date('2025-04-01T03:00:00.000Z');
      const later = new Date('2025-04-02T03:00:00.000Z');
      const claims = [store, other, store].map((s) =>
        s.schedules.claimFiring('/m/nightly.yaml', { firedAt: at, nextFireAt: later, ...CLAIM }),
      );
      expect(claims).toEqual([true, false, false]);
      expect(
        other.schedules.claimFiring('/m/nightly.yaml', { firedAt: later, nextFireAt: null, ...CLAIM }),
      ).toBe(true);
      // A scheduler that stalled past a later slot cannot take the one before it.
      expect(
        store.schedules.claimFiring('/m/nightly.yaml', { firedAt: at, nextFireAt: later, ...CLAIM }),
      ).toBe(false);
      expect(store.schedules.getSchedule('/m/nightly.yaml')).toMatchObject({
        lastFiredAt: later,
        nextFireAt: null,
      });
      // Another manifest is its own row.
      expect(store.schedules.claimFiring('/m/weekly.yaml', { firedAt: at, nextFireAt: null, ...CLAIM })).toBe(
        true,
      );
    } finally {
      other.close();
    }
  });

  it('keeps a claim until its run is made, and lets one other take it over once it lapses', () => {
    const store = ctx.store();
    const other = openStore(stateFor(ctx.file()), { now: ctx.clock().now });
    const third = openStore(stateFor(ctx.file()), { now: ctx.clock().now });
    try {
      const path = '/m/hourly.yaml';
      const at = new Date('2025-04-01T03:00:00.000Z');
      const takeOver = (s: typeof store, holder: string, fromGone = false) =>
        s.schedules.takeOverFiring(path, {
          firedAt: at,
          from: CLAIM.holder,
          fromGone,
          holder,
          ttlMs: 60_000,
        });
      expect(store.schedules.claimFiring(path, { firedAt: at, nextFireAt: null, ...CLAIM })).toBe(true);
      expect(store.schedules.getSchedule(path)?.claim).toEqual({
        holder: CLAIM.holder,
        expiresAt: new Date(ctx.clock().now().getTime() + 60_000),
      });
      // Live: nobody takes it, unless its holder's process is known to be gone.
      expect(takeOver(other, 'b')).toBe(false);
      ctx.clock().advance(30_000);
      expect(store.schedules.renewClaim(path, { firedAt: at, ...CLAIM })).toBe(true);
      ctx.clock().advance(59_000);
      expect(takeOver(other, 'b')).toBe(false);
      // Lapsed: of two schedulers, one takes it over; the holder's renewal then fails.
      ctx.clock().advance(1_000);
      expect([takeOver(other, 'b'), takeOver(third, 'c')]).toEqual([true, false]);
      expect(store.schedules.renewClaim(path, { firedAt: at, ...CLAIM })).toBe(false);
      expect(store.schedules.getSchedule(path)?.claim?.holder).toBe('b');
      // The run made: the claim is settled, and nobody takes the slot over any more.
      store.schedules.recordFiring(path, { firedAt: at, runId: 'hourly-0300', nextFireAt: null });
      expect(store.schedules.getSchedule(path)).toMatchObject({ lastFiredAt: at, lastRunId: 'hourly-0300' });
      expect(store.schedules.getSchedule(path)?.claim).toBeUndefined();
      expect(takeOver(third, 'c', true)).toBe(false);

      // A holder known to be gone: taken over at once, expired or not.
      const next = new Date('2025-04-01T04:00:00.000Z');
      expect(store.schedules.claimFiring(path, { firedAt: next, nextFireAt: null, ...CLAIM })).toBe(true);
      expect(
        other.schedules.takeOverFiring(path, {
          firedAt: next,
          from: CLAIM.holder,
          fromGone: true,
          holder: 'b',
          ttlMs: 60_000,
        }),
      ).toBe(true);
      // Settled without a run (skipped, refused): nobody takes it over either.
      other.schedules.settleClaim(path, { firedAt: next, holder: 'b' });
      expect(other.schedules.getSchedule(path)?.claim).toBeUndefined();
    } finally {
      other.close();
      third.close();
    }
  });
});
