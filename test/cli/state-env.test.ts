// MEDIABATCH_STATE_URL names where a fleet's real runs live. A sandbox run keeps to its own state file
// even where that variable is set (only --state moves it), and the library's run() reads the variable as
// the CLI does: a worker built on the library finds the fleet's state, not a new state of its own, which
// would run (and pay for) the whole manifest again. A SQLite file stands for the fleet's database here:
// the variable takes either.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { run } from '../../src/index.js';
import { startSandbox } from '../../src/sandbox/server.js';
import { cli } from '../helpers/cli.js';
import { folder } from './helpers.js';

const MANIFEST = `version: 1
name: envstate
output: out
tasks:
  - id: "still-{{index}}"
    model: flat-image
    repeat: 2
    input: { prompt: "a still" }
`;

const saved = process.env['MEDIABATCH_STATE_URL'];
afterEach(() => {
  if (saved === undefined) delete process.env['MEDIABATCH_STATE_URL'];
  else process.env['MEDIABATCH_STATE_URL'] = saved;
});

describe('MEDIABATCH_STATE_URL', () => {
  it('does not take sandbox runs: they go to state/sandbox.db unless --state says otherwise', async () => {
    const dir = await folder({ 'm.yaml': MANIFEST });
    const env = { MEDIABATCH_STATE_URL: 'fleet.db' };
    const ran = await cli(['run', 'm.yaml', '--sandbox', '--sandbox-speed', '0', '--yes', '--no-probe'], {
      cwd: dir,
      env,
    });
    expect([ran.code, ran.stderr]).toEqual([0, '']);
    expect(existsSync(join(dir, 'state', 'sandbox.db'))).toBe(true);
    expect(existsSync(join(dir, 'fleet.db'))).toBe(false);
    const sandboxRuns = await cli(['status', '--sandbox'], { cwd: dir, env });
    expect(sandboxRuns.stdout).toMatch(/^envstate {2}.* finished /m);
    const real = await cli(['status'], { cwd: dir, env });
    expect(real.stdout).toBe(
      'No runs yet in fleet.db: start one with `mediabatch run <manifest> --state fleet.db`.\n',
    );
  });

  it("is the library's run() state when stateFile is not given, as it is the CLI's", async () => {
    const dir = await folder({ 'm.yaml': MANIFEST });
    const sandbox = await startSandbox({ port: 0, speed: 0, seed: 3, apiKey: 'sandbox-key' });
    try {
      process.env['MEDIABATCH_STATE_URL'] = 'fleet.db';
      const outcome = await run('m.yaml', {
        cwd: dir,
        baseUrl: sandbox.baseUrl,
        apiKey: 'sandbox-key',
        probe: false,
      });
      expect(outcome.kind).toBe('ran');
      expect(existsSync(join(dir, 'fleet.db'))).toBe(true);
      expect(existsSync(join(dir, 'state', 'mediabatch.db'))).toBe(false);
      // The CLI reading the same variable finds the run the library made.
      const status = await cli(['status', 'envstate'], {
        cwd: dir,
        env: { MEDIABATCH_STATE_URL: 'fleet.db' },
      });
      expect(status.stdout).toContain('Tasks: 2 (2 done)');
      expect(sandbox.state().jobs).toHaveLength(2);
    } finally {
      await sandbox.close();
    }
  });
});
