import { describe, expect, it } from 'vitest';
import { CronSchedule } from '../../src/schedule/next.js';
import { formatInZone } from '../../src/schedule/zone.js';

function schedule(expression: string, timezone?: string): CronSchedule {
  const parsed = CronSchedule.parse(expression, timezone);
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.schedule;
}

const BERLIN = 'Europe/Berlin';

/** The next `n` firings after `from`, as Berlin wall times with their offset. */
function firings(expression: string, from: string, n: number, timezone = BERLIN): string[] {
  return schedule(expression, timezone)
    .upcoming(new Date(from), n)
    .map((d) => formatInZone(d, timezone));
}

describe('firing times across daylight-saving changes (Europe/Berlin, 2026)', () => {
  // Spring: 02:00 CET jumps to 03:00 CEST on 29 March. Autumn: 03:00 CEST falls back to 02:00 CET on 25 October.
  it.each([
    {
      what: 'daily 02:30, spring forward: the missing 02:30 fires once, at 03:00',
      expression: '30 2 * * *',
      from: '2026-03-27T12:00:00Z',
      expected: [
        '2026-03-28T02:30:00+01:00',
        '2026-03-29T03:00:00+02:00',
        '2026-03-30T02:30:00+02:00',
        '2026-03-31T02:30:00+02:00',
      ],
    },
    {
      what: 'daily 02:30, fall back: the doubled 02:30 fires once',
      expression: '30 2 * * *',
      from: '2026-10-23T12:00:00Z',
      expected: [
        '2026-10-24T02:30:00+02:00',
        '2026-10-25T02:30:00+02:00',
        '2026-10-26T02:30:00+01:00',
        '2026-10-27T02:30:00+01:00',
      ],
    },
    {
      what: 'hourly, spring forward: the hour that does not exist is not fired',
      expression: '0 * * * *',
      from: '2026-03-28T23:30:00Z',
      expected: ['2026-03-29T01:00:00+01:00', '2026-03-29T03:00:00+02:00', '2026-03-29T04:00:00+02:00'],
    },
    {
      what: 'hourly, fall back: every real hour fires once, the repeated 02:00 included',
      expression: '0 * * * *',
      from: '2026-10-24T22:30:00Z',
      expected: [
        '2026-10-25T01:00:00+02:00',
        '2026-10-25T02:00:00+02:00',
        '2026-10-25T02:00:00+01:00',
        '2026-10-25T03:00:00+01:00',
      ],
    },
  ])('$what', ({ expression, from, expected }) => {
    const got = firings(expression, from, expected.length);
    expect(got).toEqual(expected);
    expect(new Set(got).size).toBe(got.length);
  });

  it.each([
    {
      what: 'daily 02:30 restarted at 02:10 the second time round: not a second 02:30 that day',
      expression: '30 2 * * *',
      after: '2026-10-25T01:10:00Z',
      next: '2026-10-26T02:30:00+01:00',
    },
    {
      what: 'hourly restarted during the repeated hour: the next real hour',
      expression: '0 * * * *',
      after: '2026-10-25T01:10:00Z',
      next: '2026-10-25T03:00:00+01:00',
    },
    {
      what: 'hourly, from the first 02:00: the second 02:00 an hour later',
      expression: '0 * * * *',
      after: '2026-10-25T00:00:00Z',
      next: '2026-10-25T02:00:00+01:00',
    },
    {
      what: 'daily 02:30 restarted in the spring gap',
      expression: '30 2 * * *',
      after: '2026-03-29T00:59:00Z',
      next: '2026-03-29T03:00:00+02:00',
    },
  ])('$what', ({ expression, after, next }) => {
    expect(formatInZone(schedule(expression, BERLIN).next(new Date(after)), BERLIN)).toBe(next);
  });
});

describe('CronSchedule', () => {
  it('reads 6 fields with seconds first', () => {
    expect(firings('*/20 * * * * *', '2026-11-21T09:00:00.500Z', 3, 'UTC')).toEqual([
      '2026-11-21T09:00:20+00:00',
      '2026-11-21T09:00:40+00:00',
      '2026-11-21T09:01:00+00:00',
    ]);
  });

  it('uses UTC when the manifest names no timezone, whatever the machine says', () => {
    expect(schedule('0 3 * * *').next(new Date('2026-11-21T09:00:00Z')).toISOString()).toBe(
      '2026-11-22T03:00:00.000Z',
    );
  });

  it('fires strictly after the given moment', () => {
    const at = new Date('2026-11-22T03:00:00Z');
    expect(schedule('0 3 * * *').next(at).toISOString()).toBe('2026-11-23T03:00:00.000Z');
  });

  it.each([
    {
      expression: '0 3 * *',
      timezone: 'UTC',
      message: 'schedule: must be a cron expression of 5 or 6 fields',
    },
    { expression: '61 * * * *', timezone: 'UTC', message: 'schedule: must be a valid cron expression' },
    { expression: '0 0 3 * * * *', timezone: 'UTC', message: '(7 fields)' },
    { expression: '0 3 * * *', timezone: 'Mars/Olympus', message: 'timezone: must be an IANA time zone' },
  ])('refuses "$expression" in $timezone', ({ expression, timezone, message }) => {
    const parsed = CronSchedule.parse(expression, timezone);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.message).toContain(message);
  });

  it.each([
    {
      what: 'the latest of several missed',
      after: '2026-11-01T00:00:00Z',
      notAfter: '2026-11-21T09:00:00Z',
      latest: '2026-11-21T03:00:00.000Z',
    },
    {
      what: 'a firing exactly at the end counts',
      after: '2026-11-20T09:00:00Z',
      notAfter: '2026-11-21T03:00:00Z',
      latest: '2026-11-21T03:00:00.000Z',
    },
    {
      what: 'a firing exactly at the start does not',
      after: '2026-11-21T03:00:00Z',
      notAfter: '2026-11-22T02:59:59Z',
      latest: undefined,
    },
    {
      what: 'an empty interval',
      after: '2026-11-21T09:00:00Z',
      notAfter: '2026-11-21T09:00:00Z',
      latest: undefined,
    },
  ])('latest(): $what', ({ after, notAfter, latest }) => {
    const got = schedule('0 3 * * *').latest(new Date(after), new Date(notAfter));
    expect(got?.toISOString()).toBe(latest);
  });

  it('finds the latest of a per-second schedule missed for a month without stepping through it', () => {
    const started = performance.now();
    const got = schedule('* * * * * *').latest(
      new Date('2026-10-01T00:00:00Z'),
      new Date('2026-11-01T00:00:00.700Z'),
    );
    expect(got?.toISOString()).toBe('2026-11-01T00:00:00.000Z');
    expect(performance.now() - started).toBeLessThan(1000);
  });
});
