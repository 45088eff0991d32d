// A small slice of `bench/million.ts` (the 1,000,000-task figures), so that it keeps working: 3,000 tasks against 1,000.
// Sanity only; the figures themselves are the bench's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { measureMillion } from '../../bench/million.js';
import { type Child, spawnSandbox } from '../helpers/child.js';

let sandbox: Child;
let baseUrl: string;
beforeAll(async () => {
  const started = await spawnSandbox(['--speed', '0', '--balance', '1e9', '--seed', '7']);
  sandbox = started.child;
  baseUrl = started.baseUrl;
});
afterAll(async () => {
  sandbox?.proc.kill('SIGTERM');
  await sandbox?.exited;
});

describe('the scale bench', () => {
  it('plans, runs and interrupts a big and a small batch, then reads the big one', async () => {
    const f = await measureMillion(baseUrl, { big: 3_000, small: 1_000, rateSeconds: 1, compiled: false });
    expect(f.validateSeconds).toBeGreaterThan(0);
    expect(f.plan).toMatchObject({ tasks: 3_000 });
    for (const r of [f.small, f.big]) {
      // Ctrl-C leaves the run resumable (exit 4); a fast machine may finish the small batch first (exit 0).
      expect([0, 4]).toContain(r.code);
      expect(r.toFirstSubmitSeconds).toBeGreaterThan(0);
      expect(r.submitsPerSecond).toBeGreaterThan(0);
      expect(r.exitSeconds).toBeGreaterThanOrEqual(0);
    }
    expect(f.rateRatio).toBeGreaterThan(0);
    expect(f.status.seconds).toBeGreaterThan(0);
  }, 120_000);
});
