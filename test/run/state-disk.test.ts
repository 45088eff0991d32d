// A state disk that fills up mid-run stops the run cleanly: exit 4, one line, no stack trace,
// and what was committed stays consistent (nothing charged twice on the next run). Real tmpfs; root only.

import { execFileSync } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnCli } from '../helpers/child.js';
import { cli } from '../helpers/cli.js';
import { images, makeRunEnv, type RunEnv, SANDBOX_KEY } from '../helpers/run-env.js';
import { cannotMount, mountTmpfs } from '../util/mount.js';

let env: RunEnv | undefined;
let unmount: (() => void) | undefined;
afterEach(async () => {
  unmount?.();
  unmount = undefined;
  await env?.close();
  env = undefined;
});

describe.skipIf(cannotMount !== undefined)('run: a full state disk', () => {
  it.each([
    ['every task stored before the first submission', {}],
    // The first 20 stored, the rest while the run goes; the disk fills while they are stored.
    ['the tasks stored while the run goes', { MEDIABATCH_STORE_FIRST: '20' }],
  ])(
    'stops the run with exit 4 and one line, never a stack; after room is made nothing is charged twice (%s)',
    async (_, extraEnv: Record<string, string>) => {
      env = await makeRunEnv();
      const stateDir = join(env.dir, 'state');
      await mkdir(stateDir);
      unmount = mountTmpfs(stateDir, 640);
      const file = await env.manifest({
        tasks: images(400, 'shot'),
        concurrency: 8,
      });
      const run = (args: string[]) =>
        cli(['--state', join(stateDir, 'state.db'), ...args], {
          env: {
            MEDIABATCH_API_KEY: SANDBOX_KEY,
            MEDIABATCH_BASE_URL: env?.sandbox.baseUrl ?? '',
            MEDIABATCH_POLL_SCALE: '0.01',
          },
          cwd: env?.dir ?? '',
          now: () => new Date(),
        });
      // Its own process: a run that stops on a full disk cannot write the release of its lease either, and
      // the next run takes the lease over from a holder that is gone (as after any crash), not from itself.
      const first = spawnCli(['--state', join(stateDir, 'state.db'), 'run', file, '--yes'], {
        cwd: env.dir,
        env: {
          MEDIABATCH_API_KEY: SANDBOX_KEY,
          MEDIABATCH_BASE_URL: env.sandbox.baseUrl,
          MEDIABATCH_POLL_SCALE: '0.01',
          ...extraEnv,
        },
      });
      expect(await first.exited).toBe(4);
      // Filled while the tasks are stored (the CLI's mapping) or while they are driven (the runner's stop):
      // the same one line either way, naming the state file.
      const lines = first.stderr().trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        /^mediabatch: state file (state\/state\.db|\/.*\/state\/state\.db) cannot be written: the disk is full; free some space and run again$/,
      );
      execFileSync('mount', ['-o', 'remount,size=65536k', stateDir]);
      const second = await run(['run', file, '--yes']);
      expect([0, 2]).toContain(second.code);
      const jobs = env.state().jobs;
      const perPrompt = new Map<string, number>();
      for (const j of jobs) {
        const prompt = (j.request as { prompt?: string }).prompt ?? '';
        perPrompt.set(prompt, (perPrompt.get(prompt) ?? 0) + (j.cost - j.refunded > 0 ? 1 : 0));
      }
      for (const n of perPrompt.values()) expect(n).toBeLessThanOrEqual(1);
      const db = new Database(join(stateDir, 'state.db'), { readonly: true });
      expect(db.prepare('SELECT count(*) FROM tasks').pluck().get()).toBe(400);
      db.close();
    },
    60_000,
  );
});
