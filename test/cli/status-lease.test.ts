// After kill -9 a run is recorded as `running` forever; status shows it as `interrupted` when no
// live process holds its lease (which is what the next `run` treats it as).
import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { leaseHolder, openStore } from '../../src/store/index.js';
import { cli } from '../helpers/cli.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function stateWithRun(holder: string | undefined): { dir: string; db: string } {
  const dir = mkdtempSync(join(tmpdir(), 'mb-status-lease-'));
  dirs.push(dir);
  const db = join(dir, 'state.db');
  const store = openStore(db);
  store.runs.createRun({ id: 'r1', manifestPath: join(dir, 'm.yaml'), manifestName: 'm', settings: {} });
  if (holder) store.leases.acquireLease('run:r1', holder, 60 * 60_000);
  store.close();
  return { dir, db };
}

describe('status of a run recorded as running', () => {
  it('is interrupted when its lease holder is a process that no longer exists', async () => {
    // A pid far above any this machine hands out: no such process.
    const { dir, db } = stateWithRun(leaseHolder(4_000_000, hostname(), 'dead'));
    const list = await cli(['--state', db, 'status', '--json'], { cwd: dir, now: () => new Date() });
    expect(JSON.parse(list.stdout).runs[0].state).toBe('interrupted');
    const one = await cli(['--state', db, 'status', 'r1'], { cwd: dir, now: () => new Date() });
    expect(one.stdout).toMatch(/^ {2}State: interrupted/m);
  });

  it('is interrupted when nobody holds a lease at all', async () => {
    const { dir, db } = stateWithRun(undefined);
    const list = await cli(['--state', db, 'status', '--json'], { cwd: dir, now: () => new Date() });
    expect(JSON.parse(list.stdout).runs[0].state).toBe('interrupted');
  });

  it('stays running while a live process (this one) holds the lease', async () => {
    const { dir, db } = stateWithRun(leaseHolder(process.pid, hostname(), 'alive'));
    const list = await cli(['--state', db, 'status', '--json'], { cwd: dir, now: () => new Date() });
    expect(JSON.parse(list.stdout).runs[0].state).toBe('running');
  });
});
