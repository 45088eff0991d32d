// The library's run() with `sandbox`: the same embedded sandbox as `mediabatch run --sandbox`
// (src/sandbox/embedded.ts), its `{{sandbox}}` var, and its own state file.
import { existsSync } from 'node:fs';
import { cp, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunEvent, readReport, run } from '../../src/index.js';
import { openStore } from '../../src/store/index.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mb-lib-sandbox-'));
  await cp('manifests/song-section.yaml', join(dir, 'song.yaml'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('run() with sandbox', () => {
  it('starts the embedded sandbox, fills in {{sandbox}}, keeps its runs in state/sandbox.db', async () => {
    const events: RunEvent[] = [];
    const outcome = await run('song.yaml', {
      cwd: dir,
      sandbox: { speed: 0 },
      timeScale: 0.01,
      onEvent: (e) => events.push(e),
    });
    expect(outcome.kind).toBe('ran');
    expect(outcome.exitCode).toBe(0);
    // The sandbox's sample song was reached at the address it was given: the task was charged and done.
    const report = await readReport(join(dir, 'out', outcome.runId));
    expect(report.tasks.map((t) => t.status)).toEqual(report.tasks.map(() => 'done'));
    expect(report.tasks.length).toBeGreaterThan(0);
    expect(events.some((e) => e.event === 'done')).toBe(true);
    const files = await readdir(join(dir, 'out', outcome.runId), { recursive: true });
    expect(files.some((f) => String(f).endsWith('.mp3'))).toBe(true);
    expect(existsSync(join(dir, 'state', 'sandbox.db'))).toBe(true);
    expect(existsSync(join(dir, 'state', 'mediabatch.db'))).toBe(false);
    // Bound to "the embedded sandbox", as `run --sandbox` binds it: a new port at each start is the same API.
    const store = openStore(join(dir, 'state', 'sandbox.db'));
    try {
      expect(store.runs.getRun(outcome.runId)?.api?.baseUrl).toBe('the embedded sandbox (--sandbox)');
    } finally {
      store.close();
    }
  });

  it('without sandbox still needs an API and a key, naming both', async () => {
    const saved = { url: process.env['MEDIABATCH_BASE_URL'], key: process.env['MEDIABATCH_API_KEY'] };
    delete process.env['MEDIABATCH_BASE_URL'];
    delete process.env['MEDIABATCH_API_KEY'];
    try {
      await expect(run('song.yaml', { cwd: dir })).rejects.toThrow(
        'run: give baseUrl and apiKey (or set MEDIABATCH_BASE_URL and MEDIABATCH_API_KEY)',
      );
    } finally {
      if (saved.url !== undefined) process.env['MEDIABATCH_BASE_URL'] = saved.url;
      if (saved.key !== undefined) process.env['MEDIABATCH_API_KEY'] = saved.key;
    }
  });

  it('runs local file: inputs with no bucket: the sandbox keeps them, and output: storage goes to out/', async () => {
    const local = await mkdtemp(join(tmpdir(), 'mb-lib-local-'));
    try {
      await cp('manifests/local-inputs.yaml', join(local, 'local-inputs.yaml'));
      await cp('manifests/local', join(local, 'local'), { recursive: true });
      const outcome = await run('local-inputs.yaml', { cwd: local, sandbox: { speed: 0 }, timeScale: 0.01 });
      expect({ kind: outcome.kind, exitCode: outcome.exitCode }).toEqual({ kind: 'ran', exitCode: 0 });
      const report = await readReport(join(local, 'out', 'local-inputs'));
      expect(report.tasks.map((t) => [t.id, t.status]).sort()).toEqual([
        ['jingle-narrator', 'done'],
        ['mascot-dance', 'done'],
        ['swap-ana', 'done'],
        ['swap-ben', 'done'],
      ]);
    } finally {
      await rm(local, { recursive: true, force: true });
    }
  });
});
