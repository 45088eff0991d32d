import { describe, expect, it } from 'vitest';
import { type RequestClass, Throttle, type Ticket } from '../../src/api/throttle.js';

/** A throttle on a fake clock whose sleep moves time forward at once. */
function fake(start = 0) {
  const clock = { t: start };
  const throttle = new Throttle({
    now: () => clock.t,
    // Concurrent sleepers wake at their own deadlines, as with real timers.
    sleep: async (ms) => {
      const deadline = clock.t + ms;
      await Promise.resolve();
      clock.t = Math.max(clock.t, deadline);
    },
  });
  return { clock, throttle };
}

describe('Retry-After gate', () => {
  it('holds back every request of the class until the time given, not the other class', async () => {
    const { clock, throttle } = fake(1_000);
    const first = await throttle.acquire('submit');
    throttle.observe('submit', first, { retryAfterMs: 5_000 });
    expect(throttle.state()).toEqual({
      submitsPerSecond: null,
      until: 6_000,
      submitUntil: 6_000,
      readUntil: null,
    });

    await throttle.acquire('read');
    expect(clock.t).toBe(1_000);
    const [a, b] = await Promise.all([throttle.acquire('submit'), throttle.acquire('submit')]);
    expect([a.startedAt, b.startedAt]).toEqual([6_000, 6_000]);
    expect(throttle.state().until).toBeNull();
  });

  it('keeps the later of two Retry-After times', async () => {
    const { clock, throttle } = fake();
    const ticket = await throttle.acquire('read');
    throttle.observe('read', ticket, { retryAfterMs: 10_000 });
    throttle.observe('read', ticket, { retryAfterMs: 2_000 });
    await throttle.acquire('read');
    expect(clock.t).toBe(10_000);
  });

  it('waits again when the gate moves while it sleeps', async () => {
    const clock = { t: 0 };
    let once = true;
    const throttle: Throttle = new Throttle({
      now: () => clock.t,
      sleep: async (ms) => {
        clock.t += ms;
        // Another task's answer arrives during the wait and pushes the gate further.
        if (once) {
          once = false;
          throttle.observe('submit', { startedAt: clock.t }, { retryAfterMs: 3_000 });
        }
      },
    });
    throttle.observe('submit', { startedAt: 0 }, { retryAfterMs: 1_000 });
    const ticket = await throttle.acquire('submit');
    expect(ticket.startedAt).toBe(4_000);
  });

  it('gives up waiting when the signal aborts, and says so', async () => {
    const { throttle } = fake();
    throttle.observe('submit', { startedAt: 0 }, { retryAfterMs: 60_000 });
    const stop = new AbortController();
    stop.abort();
    await expect(throttle.acquire('submit', stop.signal)).rejects.toThrow(
      'cancelled while waiting for the API to accept requests again',
    );
  });
});

type Step =
  | { at: number; acquire: RequestClass; startsAt: number; as?: string }
  | { at: number; throttled: string; rate: number | null }
  | { at: number; rate: number | null };

describe('AIMD limit on submissions', () => {
  // Each step sets the clock (forward only), then acts, then checks the rate.
  const script: [string, Step[]][] = [
    [
      'halves the observed rate on a 429, once per burst of answers to earlier requests',
      [
        { at: 0, acquire: 'submit', startsAt: 0, as: 'a' },
        { at: 100, acquire: 'submit', startsAt: 100, as: 'b' },
        { at: 200, acquire: 'submit', startsAt: 200, as: 'c' },
        { at: 300, acquire: 'submit', startsAt: 300, as: 'd' },
        // 4 submissions in the last second: 4/s, halved to 2/s.
        { at: 500, throttled: 'a', rate: 2 },
        // b, c, d were sent before that slowdown: their 429s say nothing about the new rate.
        { at: 510, throttled: 'b', rate: 2 },
        { at: 520, throttled: 'd', rate: 2 },
        // The next slots are 500 ms apart from the slowdown on.
        { at: 520, acquire: 'submit', startsAt: 1_000, as: 'e' },
        { at: 1_000, acquire: 'submit', startsAt: 1_500, as: 'f' },
        // A 429 to a request sent at the new rate halves again.
        { at: 1_600, throttled: 'e', rate: 1 },
        { at: 1_600, acquire: 'submit', startsAt: 2_600 },
      ],
    ],
    [
      'raises the rate one step per quiet period, and lifts it after a minute without 429',
      [
        { at: 0, acquire: 'submit', startsAt: 0, as: 'a' },
        { at: 0, throttled: 'a', rate: 0.5 },
        { at: 9_999, rate: 0.5 },
        { at: 10_000, rate: 1 },
        { at: 20_000, rate: 1.5 },
        // 15 s after the last step: one more step, the remaining 5 s count toward the next.
        { at: 35_000, rate: 2 },
        { at: 40_000, rate: 2.5 },
        { at: 59_999, rate: 3 },
        { at: 60_000, rate: null },
        // Unlimited again: no spacing.
        { at: 60_000, acquire: 'submit', startsAt: 60_000 },
        { at: 60_000, acquire: 'submit', startsAt: 60_000 },
      ],
    ],
    [
      'never goes under one submission each 5 s',
      [
        { at: 0, acquire: 'submit', startsAt: 0, as: 'a' },
        { at: 0, throttled: 'a', rate: 0.5 },
        { at: 1, acquire: 'submit', startsAt: 2_000, as: 'b' },
        { at: 2_000, throttled: 'b', rate: 0.25 },
        { at: 2_000, acquire: 'submit', startsAt: 6_000, as: 'c' },
        { at: 6_000, throttled: 'c', rate: 0.2 },
        { at: 6_000, acquire: 'submit', startsAt: 11_000, as: 'd' },
        { at: 11_000, throttled: 'd', rate: 0.2 },
      ],
    ],
    [
      'a 429 counts again after the limit was lifted',
      [
        { at: 0, acquire: 'submit', startsAt: 0, as: 'a' },
        { at: 0, throttled: 'a', rate: 0.5 },
        { at: 70_000, rate: null },
        { at: 70_000, acquire: 'submit', startsAt: 70_000, as: 'b' },
        { at: 70_000, acquire: 'submit', startsAt: 70_000 },
        { at: 70_100, throttled: 'b', rate: 1 },
      ],
    ],
  ];

  it.each(script)('%s', async (_name, steps) => {
    const { clock, throttle } = fake();
    const tickets = new Map<string, Ticket>();
    for (const [i, step] of steps.entries()) {
      expect(step.at, `step ${i} goes back in time`).toBeGreaterThanOrEqual(clock.t);
      clock.t = step.at;
      if ('acquire' in step) {
        const ticket = await throttle.acquire(step.acquire);
        expect(ticket.startedAt, `step ${i}`).toBe(step.startsAt);
        if (step.as) tickets.set(step.as, ticket);
      } else {
        if ('throttled' in step) {
          const ticket = tickets.get(step.throttled);
          if (!ticket) throw new Error(`no ticket ${step.throttled}`);
          throttle.observe('submit', ticket, { throttled: true });
        }
        expect(throttle.state().submitsPerSecond, `step ${i}`).toBe(step.rate);
      }
    }
  });

  it('leaves reads alone when submissions are throttled', async () => {
    const { clock, throttle } = fake();
    const ticket = await throttle.acquire('submit');
    throttle.observe('submit', ticket, { throttled: true });
    for (let i = 0; i < 5; i++) expect((await throttle.acquire('read')).startedAt).toBe(0);
    expect(clock.t).toBe(0);
  });

  it('a throttled read does not slow submissions', async () => {
    const { throttle } = fake();
    const ticket = await throttle.acquire('read');
    throttle.observe('read', ticket, { throttled: true });
    expect(throttle.state().submitsPerSecond).toBeNull();
  });
});
