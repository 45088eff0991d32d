// A small slice of `bench/postgres-plan.ts` (step 13: a run planned into PostgreSQL, a worker's memory), so
// that it keeps working: 300 tasks. Sanity only; the figures themselves are the bench's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { measurePlanInto } from '../../bench/postgres-plan.js';
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

describe('the PostgreSQL planning bench', () => {
  it('plans a run into PostgreSQL and into SQLite, then runs a worker on PostgreSQL and stops it', async () => {
    const f = await measurePlanInto(baseUrl, 300, { compiled: false, workerSeconds: 1 });
    expect(f.postgres.stored).toBe(300);
    for (const m of [f.postgres, f.sqlite]) {
      expect(m.seconds).toBeGreaterThan(0);
      expect(m.peakRssMb).toBeGreaterThan(0);
    }
    expect(f.postgres.serverCpuSeconds).toBeGreaterThan(0);
    // Ctrl-C leaves the run resumable (exit 4); a fast machine may finish 300 tasks first (exit 0).
    expect([0, 4], f.worker.stderr).toContain(f.worker.code);
    expect(f.worker.toFirstSubmitSeconds).toBeGreaterThan(0);
    expect(f.worker.peakRssMb).toBeGreaterThan(0);
  }, 120_000);
});
