import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CronSchedule } from '../../src/schedule/next.js';
import { type Firing, type FiringResult, Scheduler } from '../../src/schedule/scheduler.js';
import { scheduledManifests } from '../../src/schedule/status.js';
import { formatInZone } from '../../src/schedule/zone.js';
import { openStore, type Store } from '../../src/store/index.js';
import { createLogger } from '../../src/util/log.js';
import { FakeClock, settle } from './fake-clock.js';

const MANIFEST = '/srv/manifests/nightly.yaml';

let dir: string;
const stores: Store[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mediabatch-schedule-'));
});
afterEach(() => {
  for (const s of stores.splice(0)) s.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Harness {
  scheduler: Scheduler;
  store: Store;
  lines: string[];
  fired: Firing[];
  /** Ends the run of firing `i` with `result` (finished by default). */
  end(i: number, result?: Partial<FiringResult>): Promise<void>;
}

function harness(
  clock: FakeClock,
  opts: {
    expression?: string;
    timezone?: string;
    catchUp?: boolean;
    instant?: boolean;
    holder?: string;
    /** The firing's run is never made: it waits for the scheduler to stop, then says it did not start. */
    neverOpened?: boolean;
  } = {},
): Harness {
  const parsed = CronSchedule.parse(opts.expression ?? '0 3 * * *', opts.timezone ?? 'UTC');
  if (!parsed.ok) throw new Error(parsed.message);
  const store = openStore(join(dir, 'state.db'), { now: clock.now });
  stores.push(store);
  const lines: string[] = [];
  const fired: Firing[] = [];
  const enders: Array<(r: FiringResult) => void> = [];
  const scheduler = new Scheduler(
    [{ path: MANIFEST, label: 'nightly.yaml', schedule: parsed.schedule }],
    {
      store,
      now: clock.now,
      timers: clock,
      logger: createLogger(),
      out: (line) => lines.push(line),
      holder: opts.holder ?? 'holder-a',
      fire: (firing) => {
        fired.push(firing);
        const runId = `nightly-${firing.at.toISOString()}`;
        if (opts.neverOpened) {
          return new Promise<FiringResult>((resolve) =>
            firing.stopping.addEventListener('abort', () =>
              resolve({
                outcome: 'not-started',
                runId,
                message: 'not started: mediabatch schedule is stopping',
              }),
            ),
          );
        }
        firing.started(runId);
        if (opts.instant) return Promise.resolve({ outcome: 'finished', runId, message: 'ok' });
        return new Promise<FiringResult>((resolve) => enders.push(resolve)).then((r) => ({ runId, ...r }));
      },
    },
    { catchUp: opts.catchUp ?? false, maxSleepMs: 24 * 3_600_000 },
  );
  return {
    scheduler,
    store,
    lines,
    fired,
    end: async (i, result = {}) => {
      enders[i]?.({ outcome: 'finished', message: 'every task succeeded', ...result });
      await settle();
    },
  };
}

describe('Scheduler', () => {
  it('fires a daily 02:30 in Berlin once per day across both daylight-saving changes', async () => {
    for (const [from, to, expected] of [
      [
        '2026-03-27T12:00:00Z',
        '2026-03-31T12:00:00Z',
        [
          '2026-03-28T02:30:00+01:00',
          '2026-03-29T03:00:00+02:00',
          '2026-03-30T02:30:00+02:00',
          '2026-03-31T02:30:00+02:00',
        ],
      ],
      [
        '2026-10-23T12:00:00Z',
        '2026-10-27T12:00:00Z',
        [
          '2026-10-24T02:30:00+02:00',
          '2026-10-25T02:30:00+02:00',
          '2026-10-26T02:30:00+01:00',
          '2026-10-27T02:30:00+01:00',
        ],
      ],
    ] as const) {
      const clock = new FakeClock(new Date(from));
      const h = harness(clock, {
        expression: '30 2 * * *',
        timezone: 'Europe/Berlin',
        instant: true,
        holder: from,
      });
      h.scheduler.start();
      await clock.advanceTo(new Date(to));
      expect(h.fired.map((f) => formatInZone(f.at, 'Europe/Berlin'))).toEqual(expected);
      h.scheduler.stop();
      await h.scheduler.finished();
    }
  });

  it('fires an hourly schedule in Berlin once per real hour through the autumn change', async () => {
    const clock = new FakeClock(new Date('2026-10-24T22:30:00Z'));
    const h = harness(clock, { expression: '0 * * * *', timezone: 'Europe/Berlin', instant: true });
    h.scheduler.start();
    await clock.advanceTo(new Date('2026-10-25T02:30:00Z'));
    expect(h.fired.map((f) => formatInZone(f.at, 'Europe/Berlin'))).toEqual([
      '2026-10-25T01:00:00+02:00',
      '2026-10-25T02:00:00+02:00',
      '2026-10-25T02:00:00+01:00',
      '2026-10-25T03:00:00+01:00',
    ]);
    expect(new Set(h.fired.map((f) => f.at.getTime())).size).toBe(4);
  });

  it('skips a firing while the previous run of the manifest is still going, and says so', async () => {
    const clock = new FakeClock(new Date('2026-11-21T00:00:00Z'));
    const h = harness(clock, { expression: '0 * * * *' });
    h.scheduler.start();
    await clock.advanceTo(new Date('2026-11-21T01:00:00Z'));
    expect(h.fired).toHaveLength(1);
    await clock.advanceTo(new Date('2026-11-21T02:30:00Z'));
    expect(h.fired).toHaveLength(1);
    expect(h.lines).toContain(
      'nightly.yaml: skipped the firing due 2026-11-21T02:00:00+00:00: the previous run (nightly-2026-11-21T01:00:00.000Z) is still going; next firing 2026-11-21T03:00:00+00:00',
    );
    // The skipped firing is recorded; the last run stays the one that is going.
    expect(h.store.schedules.getSchedule(MANIFEST)).toMatchObject({
      lastFiredAt: new Date('2026-11-21T02:00:00Z'),
      lastRunId: 'nightly-2026-11-21T01:00:00.000Z',
    });
    await h.end(0);
    expect(h.lines.at(-1)).toBe('nightly.yaml: next firing 2026-11-21T03:00:00+00:00');
    await clock.advanceTo(new Date('2026-11-21T03:00:00Z'));
    expect(h.fired.map((f) => f.at.toISOString())).toEqual([
      '2026-11-21T01:00:00.000Z',
      '2026-11-21T03:00:00.000Z',
    ]);
  });

  it('skips a firing while a run of the manifest started by hand holds its run lease', async () => {
    const clock = new FakeClock(new Date('2026-11-21T00:00:00Z'));
    const h = harness(clock, { expression: '0 * * * *', instant: true });
    h.store.runs.createRun({ id: 'by-hand', manifestPath: MANIFEST, manifestName: 'nightly', settings: {} });
    h.store.leases.acquireLease('run:by-hand', 'someone-else', 3 * 3_600_000);
    h.scheduler.start();
    await clock.advanceTo(new Date('2026-11-21T01:00:00Z'));
    expect(h.fired).toHaveLength(0);
    expect(h.lines.join('\n')).toContain('its run by-hand is still going');
  });

  it.each([
    { what: 'while the first one is still running', instant: false },
    { what: 'after the first one finished', instant: true },
  ])('a second scheduler on the same state does not double-run ($what)', async ({ instant }) => {
    const clock = new FakeClock(new Date('2026-11-21T00:00:00Z'));
    const a = harness(clock, { expression: '0 * * * *', holder: 'scheduler-a', instant });
    const b = harness(clock, { expression: '0 * * * *', holder: 'scheduler-b', instant });
    a.scheduler.start();
    b.scheduler.start();
    await clock.advanceTo(new Date('2026-11-21T01:00:30Z'));
    expect(a.fired.length + b.fired.length).toBe(1);
    await a.end(0);
    await b.end(0);
    await clock.advanceTo(new Date('2026-11-21T02:00:30Z'));
    const all = [...a.fired, ...b.fired].map((f) => f.at.toISOString()).sort();
    expect(all).toEqual(['2026-11-21T01:00:00.000Z', '2026-11-21T02:00:00.000Z']);
  });

  it.each([
    { catchUp: false, fired: [] as string[], line: 'not replayed' },
    {
      catchUp: true,
      fired: ['2026-11-21T03:00:00.000Z'],
      line: 'catching up the firing due 2026-11-21T03:00:00+00:00',
    },
  ])(
    'after three nights down, catch-up=$catchUp runs $fired.length firing(s)',
    async ({ catchUp, fired, line }) => {
      const setup = new FakeClock(new Date('2026-11-18T03:00:00Z'));
      const before = harness(setup, { instant: true });
      before.store.schedules.recordFiring(MANIFEST, {
        firedAt: new Date('2026-11-18T03:00:00Z'),
        runId: 'nightly-2026-11-18',
        nextFireAt: new Date('2026-11-19T03:00:00Z'),
      });
      const clock = new FakeClock(new Date('2026-11-21T09:00:00Z'));
      const h = harness(clock, { catchUp, instant: true, holder: 'restarted' });
      h.scheduler.start();
      await settle();
      expect(h.fired.map((f) => f.at.toISOString())).toEqual(fired);
      expect(h.fired.every((f) => f.late)).toBe(true);
      expect(h.lines.join('\n')).toContain(line);
      expect(h.store.schedules.getSchedule(MANIFEST)?.nextFireAt).toEqual(new Date('2026-11-22T03:00:00Z'));
    },
  );

  it('never fires on its first start for slots before it existed', async () => {
    const clock = new FakeClock(new Date('2026-11-21T09:00:00Z'));
    const h = harness(clock, { catchUp: true, instant: true });
    h.scheduler.start();
    await settle();
    expect(h.fired).toHaveLength(0);
    expect(h.lines).toEqual(['nightly.yaml: "0 3 * * *" in UTC, next firing 2026-11-22T03:00:00+00:00']);
  });

  it('on SIGTERM stops firing, passes the signal to the running run, and reports it interrupted', async () => {
    const clock = new FakeClock(new Date('2026-11-21T02:59:00Z'));
    const h = harness(clock);
    h.scheduler.start();
    await clock.advanceTo(new Date('2026-11-21T03:00:00Z'));
    expect(h.fired).toHaveLength(1);
    const run = h.fired[0]!;
    h.scheduler.stop('SIGTERM');
    expect(run.stopping.aborted).toBe(true);
    // The run listens only once it is past its preflight: the signal waits for it.
    const got: string[] = [];
    run.signals.on('SIGTERM', () => got.push('SIGTERM'));
    await settle();
    expect(got).toEqual(['SIGTERM']);
    await h.end(0, { outcome: 'interrupted', message: 'stopped; run the same command again to continue' });
    expect(await h.scheduler.finished()).toEqual({ interrupted: ['nightly-2026-11-21T03:00:00.000Z'] });
    expect(clock.pendingCount).toBe(0);
    await clock.advanceTo(new Date('2026-11-23T00:00:00Z'));
    expect(h.fired).toHaveLength(1);
    // The schedule lease is free again for the next scheduler.
    expect(h.store.leases.getLease(`schedule:${MANIFEST}`)).toBeUndefined();
  });

  it('says a firing once its run exists, and gives back one a stop cut before its run was made', async () => {
    const clock = new FakeClock(new Date('2026-11-20T02:59:00Z'));
    const first = harness(clock, { holder: 'scheduler-a' });
    first.scheduler.start();
    await clock.advanceTo(new Date('2026-11-20T03:00:00Z'));
    expect(first.lines).toContain(
      'nightly.yaml: firing (due 2026-11-20T03:00:00+00:00): run nightly-2026-11-20T03:00:00.000Z',
    );
    await first.end(0);
    first.scheduler.stop();
    await first.scheduler.finished();

    // The next night's firing is claimed, then SIGTERM comes before its run is made (still planning).
    const cut = harness(clock, { holder: 'scheduler-b', neverOpened: true });
    cut.scheduler.start();
    await clock.advanceTo(new Date('2026-11-21T03:00:00Z'));
    expect(cut.fired).toHaveLength(1);
    cut.scheduler.stop('SIGTERM');
    expect(await cut.scheduler.finished()).toEqual({ interrupted: [] });
    expect(cut.lines.filter((l) => l.includes('firing (due'))).toEqual([]);
    expect(cut.lines).toContain(
      'nightly.yaml: the firing due 2026-11-21T03:00:00+00:00 was stopped before its run was made: not counted as fired',
    );
    // The schedule row is as the last real firing left it.
    const row = cut.store.schedules.getSchedule(MANIFEST);
    expect(row?.lastFiredAt).toEqual(new Date('2026-11-20T03:00:00Z'));
    expect(row?.lastRunId).toBe('nightly-2026-11-20T03:00:00.000Z');

    // A scheduler started again with --catch-up fires that slot: it was never counted as fired.
    await clock.advanceTo(new Date('2026-11-21T03:20:00Z'));
    const again = harness(clock, { holder: 'scheduler-c', catchUp: true, instant: true });
    again.scheduler.start();
    await settle();
    expect(again.fired.map((f) => f.at.toISOString())).toEqual(['2026-11-21T03:00:00.000Z']);
    expect(again.lines).toContain(
      'nightly.yaml: catching up the firing due 2026-11-21T03:00:00+00:00: run nightly-2026-11-21T03:00:00.000Z',
    );
    again.scheduler.stop();
    await again.scheduler.finished();
  });

  it('a replica fires, within the grace, a slot the replica that claimed it gave back', async () => {
    const clock = new FakeClock(new Date('2026-11-21T02:59:00Z'));
    const cut = harness(clock, { holder: 'scheduler-a', neverOpened: true });
    const other = harness(clock, { holder: 'scheduler-b' });
    cut.scheduler.start();
    other.scheduler.start();
    await clock.advanceTo(new Date('2026-11-21T03:00:00Z'));
    expect(cut.fired).toHaveLength(1);
    expect(other.lines).toContain(
      'nightly.yaml: the firing due 2026-11-21T03:00:00+00:00 was already handled by another mediabatch schedule',
    );
    // The claimer is stopped while still planning, 15 s in: it gives the slot back.
    await clock.advanceTo(new Date('2026-11-21T03:00:15Z'));
    cut.scheduler.stop('SIGTERM');
    await cut.scheduler.finished();
    await clock.advanceTo(new Date('2026-11-21T03:00:30Z'));
    expect(other.fired.map((f) => [f.at.toISOString(), f.late])).toEqual([
      ['2026-11-21T03:00:00.000Z', false],
    ]);
    expect(other.lines.slice(-2)).toEqual([
      'nightly.yaml: the firing due 2026-11-21T03:00:00+00:00 was given back before its run was made: taking it',
      'nightly.yaml: firing (due 2026-11-21T03:00:00+00:00): run nightly-2026-11-21T03:00:00.000Z',
    ]);
    await other.end(0);
    other.scheduler.stop();
    await other.scheduler.finished();
    expect(clock.pendingCount).toBe(0);
    expect(other.store.schedules.getSchedule(MANIFEST)?.lastRunId).toBe('nightly-2026-11-21T03:00:00.000Z');
  });

  it('a replica takes over, once its claim lapses, a slot whose claimer died before making its run', async () => {
    const clock = new FakeClock(new Date('2026-11-21T02:59:00Z'));
    // The claimer's clock stops at the claim: its timers never run again, as after kill -9 (on another
    // machine: its process cannot be looked up, so its claim must expire).
    const frozen = new FakeClock(new Date('2026-11-21T02:59:00Z'));
    const dead = harness(frozen, { holder: '999@elsewhere#dead', neverOpened: true });
    const other = harness(clock, { holder: 'scheduler-b' });
    dead.scheduler.start();
    other.scheduler.start();
    await frozen.advanceTo(new Date('2026-11-21T03:00:00Z'));
    await clock.advanceTo(new Date('2026-11-21T03:00:00Z'));
    expect(dead.fired).toHaveLength(1);
    expect(other.fired).toEqual([]);
    // The claim lives 60 s unless renewed: the other replica waits, then takes it, once.
    await clock.advanceTo(new Date('2026-11-21T03:00:58Z'));
    expect(other.fired).toEqual([]);
    await clock.advanceTo(new Date('2026-11-21T03:01:30Z'));
    // It expired at 03:01:00, the end of the grace: still on time.
    expect(other.fired.map((f) => [f.at.toISOString(), f.late])).toEqual([
      ['2026-11-21T03:00:00.000Z', false],
    ]);
    expect(other.lines.slice(-2)).toEqual([
      'nightly.yaml: the firing due 2026-11-21T03:00:00+00:00 was claimed by 999@elsewhere#dead, which let its claim expire without making its run: taking it',
      'nightly.yaml: firing (due 2026-11-21T03:00:00+00:00): run nightly-2026-11-21T03:00:00.000Z',
    ]);
    expect(other.store.schedules.getSchedule(MANIFEST)).toMatchObject({
      lastFiredAt: new Date('2026-11-21T03:00:00Z'),
      lastRunId: 'nightly-2026-11-21T03:00:00.000Z',
    });
    expect(other.store.schedules.getSchedule(MANIFEST)?.claim).toBeUndefined();
    await other.end(0);
    // The next day fires as usual, once.
    await clock.advanceTo(new Date('2026-11-22T03:00:01Z'));
    expect(other.fired.map((f) => f.at.toISOString())).toEqual([
      '2026-11-21T03:00:00.000Z',
      '2026-11-22T03:00:00.000Z',
    ]);
    await other.end(1);
    other.scheduler.stop();
    await other.scheduler.finished();
  });

  it('a replica started while another holds a slot on time takes it over once that claimer dies', async () => {
    const clock = new FakeClock(new Date('2026-11-21T02:59:00Z'));
    const frozen = new FakeClock(new Date('2026-11-21T02:59:00Z'));
    const dead = harness(frozen, { holder: '999@elsewhere#dead', neverOpened: true });
    dead.scheduler.start();
    await frozen.advanceTo(new Date('2026-11-21T03:00:00Z'));
    expect(dead.fired).toHaveLength(1);
    // The other replica starts after the slot's time, while the claim is live (its holder still plans).
    await clock.advanceTo(new Date('2026-11-21T03:00:10Z'));
    const late = harness(clock, { holder: 'scheduler-b' });
    late.scheduler.start();
    expect(late.fired).toEqual([]);
    // The claim lives 60 s unless renewed: once it lapses, the slot is still on time, and taken once.
    await clock.advanceTo(new Date('2026-11-21T03:01:30Z'));
    expect(late.fired.map((f) => [f.at.toISOString(), f.late])).toEqual([
      ['2026-11-21T03:00:00.000Z', false],
    ]);
    expect(late.lines.slice(-2)).toEqual([
      'nightly.yaml: the firing due 2026-11-21T03:00:00+00:00 was claimed by 999@elsewhere#dead, which let its claim expire without making its run: taking it',
      'nightly.yaml: firing (due 2026-11-21T03:00:00+00:00): run nightly-2026-11-21T03:00:00.000Z',
    ]);
    await late.end(0);
    late.scheduler.stop();
    await late.scheduler.finished();
  });

  it('a scheduler started after the claimer died fires its lapsed slot with --catch-up, or says it was missed', async () => {
    const frozen = new FakeClock(new Date('2026-11-21T02:59:00Z'));
    const dead = harness(frozen, { holder: '999@elsewhere#dead', neverOpened: true });
    dead.scheduler.start();
    await frozen.advanceTo(new Date('2026-11-21T03:00:00Z'));
    expect(dead.fired).toHaveLength(1);

    const clock = new FakeClock(new Date('2026-11-21T03:05:00Z'));
    const plain = harness(clock, { holder: 'scheduler-b', instant: true });
    plain.scheduler.start();
    await settle();
    expect(plain.fired).toEqual([]);
    expect(plain.lines).toContain(
      'nightly.yaml: missed the firing due 2026-11-21T03:00:00+00:00 while mediabatch schedule was not running; not replayed (--catch-up runs the latest missed firing); next firing 2026-11-22T03:00:00+00:00',
    );
    plain.scheduler.stop();
    await plain.scheduler.finished();

    const again = harness(clock, { holder: 'scheduler-c', catchUp: true, instant: true });
    again.scheduler.start();
    await settle();
    expect(again.fired.map((f) => [f.at.toISOString(), f.late])).toEqual([
      ['2026-11-21T03:00:00.000Z', true],
    ]);
    expect(again.lines).toContain(
      'nightly.yaml: catching up the firing due 2026-11-21T03:00:00+00:00: run nightly-2026-11-21T03:00:00.000Z',
    );
    again.scheduler.stop();
    await again.scheduler.finished();
  });

  it('keeps the schedule lease alive while a long run goes on', async () => {
    const clock = new FakeClock(new Date('2026-11-21T02:59:00Z'));
    const a = harness(clock, { holder: 'scheduler-a' });
    a.scheduler.start();
    await clock.advanceTo(new Date('2026-11-21T05:00:00Z'));
    const lease = a.store.leases.getLease(`schedule:${MANIFEST}`);
    expect(lease?.holder).toBe('scheduler-a');
    expect(lease!.expiresAt.getTime()).toBeGreaterThan(clock.now().getTime());
  });
});

describe('scheduledManifests (for `status`)', () => {
  it('shows each scheduled manifest with its next firing, its last run, and whether a scheduler still watches it', async () => {
    const clock = new FakeClock(new Date('2026-11-21T02:59:00Z'));
    const h = harness(clock);
    h.scheduler.start();
    await clock.advanceTo(new Date('2026-11-21T03:00:00Z'));
    h.store.runs.createRun({
      id: 'nightly-2026-11-21T03:00:00.000Z',
      manifestPath: MANIFEST,
      manifestName: 'nightly',
      settings: {},
    });
    expect(scheduledManifests(h.store, clock.now())).toEqual([
      {
        manifestPath: MANIFEST,
        nextFireAt: new Date('2026-11-22T03:00:00Z'),
        lastFiredAt: new Date('2026-11-21T03:00:00Z'),
        lastRunId: 'nightly-2026-11-21T03:00:00.000Z',
        lastRunState: 'running',
        firing: true,
        overdue: false,
      },
    ]);
    await h.end(0);
    h.scheduler.stop();
    // Two days later nobody has fired it: status can say no scheduler is watching.
    expect(scheduledManifests(h.store, new Date('2026-11-23T09:00:00Z'))[0]).toMatchObject({
      firing: false,
      overdue: true,
    });
  });
});
