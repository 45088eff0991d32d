import { describe, expect, it } from 'vitest';
import { checkPeriodBudget } from '../../src/schedule/budget.js';
import { CronSchedule } from '../../src/schedule/next.js';
import { dueFiring, resumePoint } from '../../src/schedule/policy.js';

const parsed = CronSchedule.parse('0 3 * * *', 'UTC');
if (!parsed.ok) throw new Error(parsed.message);
const daily = parsed.schedule;
const t = (iso: string) => new Date(iso);

describe('dueFiring', () => {
  it.each([
    {
      what: 'nothing came due',
      since: '2026-11-21T03:00:00Z',
      now: '2026-11-21T09:00:00Z',
      catchUp: false,
      expected: { kind: 'none' },
    },
    {
      what: 'due now: fires on time',
      since: '2026-11-21T02:59:00Z',
      now: '2026-11-21T03:00:00.200Z',
      catchUp: false,
      expected: { kind: 'fire', at: t('2026-11-21T03:00:00Z'), late: false },
    },
    {
      what: 'within the grace: still on time',
      since: '2026-11-21T02:00:00Z',
      now: '2026-11-21T03:00:59Z',
      catchUp: false,
      expected: { kind: 'fire', at: t('2026-11-21T03:00:00Z'), late: false },
    },
    {
      what: 'down for three nights: missed, not replayed',
      since: '2026-11-18T03:00:00Z',
      now: '2026-11-21T09:00:00Z',
      catchUp: false,
      expected: { kind: 'missed', latest: t('2026-11-21T03:00:00Z') },
    },
    {
      what: 'down for three nights with --catch-up: only the latest runs',
      since: '2026-11-18T03:00:00Z',
      now: '2026-11-21T09:00:00Z',
      catchUp: true,
      expected: { kind: 'fire', at: t('2026-11-21T03:00:00Z'), late: true },
    },
  ])('$what', ({ since, now, catchUp, expected }) => {
    expect(dueFiring({ schedule: daily, since: t(since), now: t(now), catchUp, graceMs: 60_000 })).toEqual(
      expected,
    );
  });
});

describe('resumePoint', () => {
  const now = t('2026-11-21T09:00:00Z');
  it.each([
    { what: 'never scheduled: nothing was missed', record: undefined, expected: now },
    {
      what: 'fired before: from the last firing',
      record: { lastFiredAt: t('2026-11-19T03:00:00Z'), nextFireAt: t('2026-11-20T03:00:00Z') },
      expected: t('2026-11-19T03:00:00Z'),
    },
    {
      what: 'watched but never fired: from its next firing',
      record: { lastFiredAt: null, nextFireAt: t('2026-11-20T03:00:00Z') },
      expected: t('2026-11-20T02:59:59.999Z'),
    },
    {
      what: 'next firing still ahead: nothing missed',
      record: { lastFiredAt: null, nextFireAt: t('2026-11-22T03:00:00Z') },
      expected: now,
    },
  ])('$what', ({ record, expected }) => {
    expect(resumePoint(record, now)).toEqual(expected);
  });
});

describe('checkPeriodBudget', () => {
  it.each([
    { cap: 100, spent: 0, worstCase: 100, ok: true, remaining: 100 },
    { cap: 100, spent: 60, worstCase: 40, ok: true, remaining: 40 },
    { cap: 100, spent: 60, worstCase: 41, ok: false, remaining: 40, room: '40 tokens left' },
    { cap: 100, spent: 130, worstCase: 0, ok: true, remaining: 0 },
    // Spent past the cap: by how much, not "0 left".
    { cap: 100, spent: 130, worstCase: 1, ok: false, remaining: 0, room: 'already 30 tokens over' },
    // Float sums of 0.1s: 0.3 of 0.6 leaves exactly 0.3, which a worst case of 0.3 fits.
    { cap: 0.6, spent: 0.1 + 0.2, worstCase: 0.3, ok: true, remaining: 0.3 },
    { cap: 1.2, spent: 0.8, worstCase: 1, ok: false, remaining: 0.4, room: '0.4 tokens left' },
  ])(
    'cap $cap, spent $spent, worst case $worstCase: ok=$ok',
    ({ cap, spent, worstCase, ok, remaining, room }) => {
      const decision = checkPeriodBudget({ cap, spent, worstCase, period: '2026-11' });
      expect(decision).toMatchObject({ ok, remaining });
      if (!decision.ok) {
        const need = worstCase === 1 ? '1 token' : `${worstCase} tokens`;
        expect(decision.message).toBe(
          `budget_per_period: ${spent} of ${cap} tokens spent in 2026-11, ${room}, but the run can cost up to ${need}; raise budget_per_period or shrink the manifest`,
        );
      }
    },
  );
});
