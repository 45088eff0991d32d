import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { cli } from '../helpers/cli.js';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('status shows scheduled manifests', () => {
  it('lists each scheduled manifest with its next firing, and flags one nobody fires', async () => {
    dir = mkdtempSync(join(tmpdir(), 'mediabatch-status-'));
    const db = join(dir, 'state.db');
    const store = openStore(db, { now: () => new Date('2026-11-21T08:00:00Z') });
    store.schedules.recordFiring(join(dir, 'nightly.yaml'), {
      firedAt: new Date('2026-11-21T02:30:00Z'),
      runId: null,
      nextFireAt: new Date('2026-11-22T02:30:00Z'),
    });
    store.schedules.recordFiring(join(dir, 'stale.yaml'), {
      firedAt: new Date('2026-11-19T02:30:00Z'),
      runId: null,
      nextFireAt: new Date('2026-11-20T02:30:00Z'),
    });
    store.close();

    const text = await cli(['--state', db, 'status'], { cwd: dir });
    expect(text.code).toBe(0);
    const lines = text.stdout.split('\n');
    expect(lines[0]).toMatch(/^SCHEDULED MANIFEST\s+NEXT FIRING\s+LAST FIRED\s+LAST RUN$/);
    expect(lines.find((l) => l.startsWith('nightly.yaml'))).toMatch(/2026-11-22 02:30/);
    // The command names the state it was asked about, so typing it fires that manifest on that state.
    expect(lines.find((l) => l.startsWith('stale.yaml'))).toContain(
      `overdue: is \`mediabatch schedule stale.yaml --state ${db}\` running?`,
    );

    const json = await cli(['--state', db, 'status', '--json'], { cwd: dir });
    const scheduled = JSON.parse(json.stdout).scheduled;
    expect(scheduled).toHaveLength(2);
    expect(scheduled.find((s: { manifest: string }) => s.manifest.endsWith('nightly.yaml'))).toMatchObject({
      next_fire_at: '2026-11-22T02:30:00.000Z',
      overdue: false,
    });
  });
});
