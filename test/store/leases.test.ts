import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { leaseHolder } from '../../src/store/index.js';
import { FakeClock, useTempDirs } from './helpers.js';

const temp = useTempDirs();
const TTL = 30_000;

/** Two processes on one state file: two connections, one shared clock. */
function twoProcesses() {
  const clock = new FakeClock();
  const file = join(temp.dir(), 'state', 'mediabatch.db');
  return { clock, first: temp.open(file, { now: clock.now }), second: temp.open(file, { now: clock.now }) };
}

describe('run leases', () => {
  it('lets only one holder drive a run until its lease expires', () => {
    const { clock, first, second } = twoProcesses();
    const a = leaseHolder(101, 'host-a', 'n1');
    const b = leaseHolder(202, 'host-b', 'n2');
    const expiresAt = new Date(clock.now().getTime() + TTL);

    expect(first.leases.acquireLease('spring-2025', a, TTL)).toEqual({
      acquired: true,
      holder: a,
      expiresAt,
    });
    expect(second.leases.acquireLease('spring-2025', b, TTL)).toEqual({
      acquired: false,
      holder: a,
      expiresAt,
    });

    clock.advance(TTL - 1);
    expect(second.leases.acquireLease('spring-2025', b, TTL).acquired).toBe(false);
    clock.advance(1);
    expect(second.leases.acquireLease('spring-2025', b, TTL)).toMatchObject({ acquired: true, holder: b });
    // The first holder finds out at its next heartbeat and must stop.
    expect(first.leases.renewLease('spring-2025', a, TTL)).toBe(false);
    expect(first.leases.releaseLease('spring-2025', a)).toBe(false);
    expect(first.leases.getLease('spring-2025')?.holder).toBe(b);
  });

  it('keeps a lease alive with heartbeats, and frees it on release', () => {
    const { clock, first, second } = twoProcesses();
    const a = leaseHolder(101, 'host-a', 'n1');
    const b = leaseHolder(202, 'host-b', 'n2');
    first.leases.acquireLease('r', a, TTL);
    for (let i = 0; i < 5; i++) {
      clock.advance(TTL / 2);
      expect(first.leases.renewLease('r', a, TTL)).toBe(true);
      expect(second.leases.acquireLease('r', b, TTL).acquired).toBe(false);
    }
    expect(first.leases.releaseLease('r', a)).toBe(true);
    expect(second.leases.acquireLease('r', b, TTL).acquired).toBe(true);
  });

  it('lets the holder take its own lease again (a resumed run in the same process)', () => {
    const { clock, first } = twoProcesses();
    const a = leaseHolder(101, 'host-a', 'n1');
    const acquiredAt = clock.now();
    first.leases.acquireLease('r', a, TTL);
    clock.advance(1_000);
    expect(first.leases.acquireLease('r', a, TTL).acquired).toBe(true);
    expect(first.leases.getLease('r')).toMatchObject({ acquiredAt, heartbeatAt: clock.now() });
  });

  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY])('refuses a ttl of %s', (ttl) => {
    const { first } = twoProcesses();
    expect(() => first.leases.acquireLease('r', 'x', ttl)).toThrow(
      `lease ttlMs: must be a finite number > 0, got ${ttl}`,
    );
  });
});
