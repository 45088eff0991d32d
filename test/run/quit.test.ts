// Ctrl-C twice quits at once, in a real process: the intent rows make that safe, and the next run
// finishes without charging any task twice.

import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { SandboxState } from '../../src/sandbox/server.js';
import { type Child, spawnCli, spawnSandbox } from '../helpers/child.js';
import { shellWords } from '../helpers/shell-words.js';

let dir: string;
let sandbox: Child;
let sandboxUrl: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mb-quit-'));
  // Slow answers, so that submissions are in flight when Ctrl-C comes.
  const started = await spawnSandbox([
    '--speed',
    '0',
    '--latency',
    String(LATENCY_MS),
    '--seed',
    '3',
    '--balance',
    '1e9',
  ]);
  sandbox = started.child;
  sandboxUrl = started.baseUrl;
});

afterAll(async () => {
  sandbox?.proc.kill('SIGKILL');
  await sandbox?.exited;
  await rm(dir, { recursive: true, force: true });
});

async function sandboxState(): Promise<SandboxState> {
  const res = await request(`${sandboxUrl}/_sandbox/state`);
  return (await res.body.json()) as SandboxState;
}

const LATENCY_MS = 400;
// Long enough that a loaded machine still sends both Ctrl-Cs before the sandbox answers any.
const HELD_MS = 6_000;

/** Tasks whose submission was recorded as about to be sent (read from the state file, read-only). */
function intents(file: string): number {
  if (!existsSync(file)) return 0;
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const row = db.prepare("SELECT count(*) AS n FROM tasks WHERE state = 'submitting'").get() as {
      n: number;
    };
    return row.n;
  } catch {
    return 0; // not migrated yet
  } finally {
    db.close();
  }
}

async function configure(settings: { latencyMs: number }): Promise<void> {
  const res = await request(`${sandboxUrl}/_sandbox/config`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(settings),
  });
  expect(res.statusCode).toBe(200);
  await res.body.dump();
}

const env = () => ({
  MEDIABATCH_API_KEY: 'sandbox-key',
  MEDIABATCH_BASE_URL: sandboxUrl,
  MEDIABATCH_POLL_SCALE: '0.01',
});

describe('run: Ctrl-C twice', () => {
  it('quits at once with exit 4; the same command then finishes, no task charged twice', async () => {
    const tasks = Array.from({ length: 8 }, (_, i) => ({
      id: `img-${i + 1}`,
      model: 'flat-image',
      input: { prompt: `quit test ${i + 1}` },
    }));
    await writeFile(
      join(dir, 'm.yaml'),
      stringify({ version: 1, name: 'quit', concurrency: 4, output: 'out', tasks }),
    );
    const args = ['--state', join(dir, 'state.db'), 'run', 'm.yaml', '--yes'];
    // Every answer takes 6 s: the first submissions are still unanswered when Ctrl-C comes twice.
    await configure({ latencyMs: HELD_MS });
    const child = spawnCli(args, { cwd: dir, env: env() });
    const deadline = Date.now() + 30_000;
    while (intents(join(dir, 'state.db')) === 0) {
      if (Date.now() > deadline) throw new Error(`no submission seen: ${child.stderr()}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    child.proc.kill('SIGINT');
    await new Promise((r) => setTimeout(r, 30));
    child.proc.kill('SIGINT');
    const exited = await child.exited;
    if (exited !== 4) throw new Error(`exit ${exited}\nstdout: ${child.stdout()}\nstderr: ${child.stderr()}`);
    // At once: it did not wait for the answers it had asked for, none of which the sandbox had given.
    expect((await sandboxState()).requests.submit).toBe(0);
    expect(child.stderr()).toContain('Quit at once: tasks whose answer was not recorded are in doubt');
    await configure({ latencyMs: 0 });

    const again = spawnCli(args, { cwd: dir, env: env() });
    const code = await again.exited;
    // Tasks whose answer was cut off are in doubt (exit 2) or, if none were, everything is done (exit 0).
    expect([0, 2]).toContain(code);
    const jobs = (await sandboxState()).jobs;
    expect(jobs.length).toBeLessThanOrEqual(tasks.length);
    expect(again.stdout()).toMatch(/Run quit: \d+ done/);
    await configure({ latencyMs: LATENCY_MS });
  });
});

describe('run: Ctrl-C once on a large run', () => {
  it('prints the outcome at once and leaves the report to `mediabatch report`, which writes it', async () => {
    await writeFile(
      join(dir, 'big.yaml'),
      stringify({
        version: 1,
        name: 'big',
        concurrency: 4,
        output: 'out',
        tasks: [
          {
            id: 'img-{{index}}',
            model: 'flat-image',
            repeat: 20_001,
            input: { prompt: 'large run {{index}}' },
          },
        ],
      }),
    );
    const state = join(dir, 'big.db');
    // --allow-partial: 20,001 images are expected to need 80 GB, more than some machines have free.
    const child = spawnCli(['--state', state, 'run', 'big.yaml', '--yes', '--no-probe', '--allow-partial'], {
      cwd: dir,
      env: env(),
    });
    const before = (await sandboxState()).requests.submit;
    const deadline = Date.now() + 30_000;
    while ((await sandboxState()).requests.submit === before) {
      if (Date.now() > deadline) throw new Error(`no submission seen: ${child.stderr()}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    child.proc.kill('SIGINT');
    expect(await child.exited).toBe(4);
    expect(child.stdout()).toMatch(/^Run big: .*\n {2}Charged /m);
    expect(child.stdout()).toContain(
      `  Report: not written on an interrupt (20,001 tasks take a while); \`mediabatch report big --state ${state}\` or the next run writes it`,
    );
    expect(existsSync(join(dir, 'out/big/report.json'))).toBe(false);

    // The printed command, typed as printed: split by the shell, run as its own process.
    const printed = /`(mediabatch report [^`]*)`/.exec(child.stdout())?.[1] ?? '';
    const report = spawnCli(shellWords(printed).slice(1), { cwd: dir, env: env() });
    expect(await report.exited).toBe(0);
    expect(existsSync(join(dir, 'out/big/report.json'))).toBe(true);
  }, 60_000);
});
