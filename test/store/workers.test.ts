import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { leaseHolder } from '../../src/store/index.js';
import { useStoreWithRun } from './helpers.js';

const s = useStoreWithRun();
const TTL = 30_000;

describe('workers of a run', () => {
  it('lists each worker with its counts, the first started first, and keeps it alive by heartbeats', () => {
    const store = s.store();
    const clock = s.clock();
    const a = leaseHolder(101, 'host-a', 'n1');
    const b = leaseHolder(202, 'host-b', 'n2');
    expect(store.workers.join('r1', a, 'host-a', 101, TTL)).toBe(true);
    const started = clock.now();
    clock.advance(1000);
    expect(store.workers.join('r1', b, 'host-b', 202, TTL)).toBe(true);
    clock.advance(TTL - 1000);
    expect(store.workers.heartbeat('r1', a, { inFlight: 7, submitted: 12 }, TTL)).toBe(true);

    const [first, second] = store.workers.list('r1');
    expect(first).toEqual({
      workerId: a,
      host: 'host-a',
      pid: 101,
      startedAt: started,
      heartbeatAt: clock.now(),
      expiresAt: new Date(clock.now().getTime() + TTL),
      inFlight: 7,
      submitted: 12,
      lost: false,
    });
    expect(second).toMatchObject({ workerId: b, inFlight: 0, submitted: 0, lost: false });
    clock.advance(1000);
    // b did not beat: it expired and shows lost before any sweep declared it so.
    expect(store.workers.list('r1').map((w) => [w.workerId, w.lost])).toEqual([
      [a, false],
      [b, true],
    ]);
  });

  it('refuses the heartbeat of a worker declared lost, and its joining again', () => {
    const store = s.store();
    const a = leaseHolder(101, 'host-a', 'n1');
    store.workers.join('r1', a, 'host-a', 101, TTL);
    expect(store.workers.markLost('r1', a)).toBe(true);
    expect(store.workers.markLost('r1', a)).toBe(false);
    expect(store.workers.heartbeat('r1', a, { inFlight: 1, submitted: 1 }, TTL)).toBe(false);
    expect(store.workers.join('r1', a, 'host-a', 101, TTL)).toBe(false);
    expect(store.workers.list('r1')[0]).toMatchObject({ lost: true, lostAt: s.clock().now() });
  });

  it('shows a worker that left as stopped, never lost, however long ago', () => {
    const store = s.store();
    const clock = s.clock();
    const a = leaseHolder(101, 'host-a', 'n1');
    store.workers.join('r1', a, 'host-a', 101, TTL);
    store.workers.heartbeat('r1', a, { inFlight: 3, submitted: 3 }, TTL);
    expect(store.workers.leave('r1', a)).toBe(true);
    expect(store.workers.leave('r1', a)).toBe(false);
    expect(store.workers.heartbeat('r1', a, { inFlight: 0, submitted: 3 }, TTL)).toBe(false);
    expect(store.workers.markLost('r1', a)).toBe(false);
    clock.advance(10 * TTL);
    expect(store.workers.list('r1')[0]).toMatchObject({
      stoppedAt: new Date(clock.now().getTime() - 10 * TTL),
      inFlight: 0,
      submitted: 3,
      lost: false,
    });
  });

  it('shows lost at once a worker of this host whose process is gone, before it expires', () => {
    const store = s.store();
    const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
    const deadPid = Number(child.stdout.toString());
    const dead = leaseHolder(deadPid, hostname(), 'gone');
    const alive = leaseHolder(process.pid, hostname(), 'me');
    store.workers.join('r1', dead, hostname(), deadPid, TTL);
    store.workers.join('r1', alive, hostname(), process.pid, TTL);
    const lost = new Map(store.workers.list('r1').map((w) => [w.pid, w.lost]));
    expect(lost).toEqual(
      new Map([
        [deadPid, true],
        [process.pid, false],
      ]),
    );
  });

  it('keeps the workers of each run apart', () => {
    const store = s.store();
    store.runs.createRun({ id: 'r2', manifestPath: '/m/b.yaml', manifestName: 'b', settings: {} });
    store.workers.join('r1', leaseHolder(1, 'h', 'a'), 'h', 1, TTL);
    store.workers.join('r2', leaseHolder(2, 'h', 'b'), 'h', 2, TTL);
    expect(store.workers.list('r2').map((w) => w.pid)).toEqual([2]);
    expect(() => store.workers.join('r1', 'x', 'h', 1, 0)).toThrow(/ttlMs/);
  });
});
