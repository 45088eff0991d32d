// kill -9 at random moments, then the same command again, until the run ends: no task is charged
// twice, and every task ends done with its files, failed with its refund, or reported in doubt.
// The runner is a child process; the sandbox lives in its own process and outlives every kill.
import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { SandboxState } from '../../src/sandbox/server.js';
import { type ProxiedSandbox, startProxiedSandbox } from '../helpers/charge-proxy.js';
import { runWithKills, seeded } from '../helpers/child.js';
import { type TaskRow, walk } from '../helpers/run-env.js';

const IMAGES = 24;
const LINES = 16;
const MAX_KILLS = 6;

let dir: string;
let sandbox: ProxiedSandbox;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mb-crash-'));
  sandbox = await startProxiedSandbox([
    '--speed',
    '0',
    '--fail-rate',
    '0.2',
    '--seed',
    '11',
    '--latency',
    '25',
  ]);
});

afterAll(async () => {
  await sandbox?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('run: kill -9 at random moments', () => {
  it('never charges a task twice and ends every task done, failed with its refund, or in doubt', async () => {
    const tasks = [
      ...Array.from({ length: IMAGES }, (_, i) => ({
        id: `shot-${i + 1}`,
        model: 'flat-image',
        input: { prompt: `crash test product shot ${i + 1}` },
      })),
      ...Array.from({ length: LINES }, (_, i) => ({
        id: `line-${i + 1}`,
        model: 'speech-v3',
        input: { text: `Crash test voice line number ${i + 1}.` },
      })),
    ];
    await writeFile(
      join(dir, 'crash.yaml'),
      stringify({ version: 1, name: 'crash', concurrency: 4, output: 'out', tasks }),
    );
    const env = {
      ...sandbox.env(),
      // Five tasks stored before the first submission, the rest while the run goes (a 1,000,000-task run submits within seconds): a kill may
      // land while rows are still being stored, and the next run stores what is missing.
      MEDIABATCH_STORE_FIRST: '5',
    };
    const random = seeded(20241011);
    const codes = await runWithKills({
      args: ['--state', 'state.db', 'run', 'crash.yaml', '--yes'],
      cwd: dir,
      env,
      random,
      maxKills: MAX_KILLS,
      maxDelayMs: 500,
    });
    expect(codes.filter((c) => c === 'SIGKILL').length).toBeGreaterThanOrEqual(3);

    const db = new Database(join(dir, 'state.db'), { readonly: true, fileMustExist: true });
    let rows: TaskRow[];
    let files: { task_id: string; path: string; bytes: number }[];
    try {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      rows = db.prepare('SELECT * FROM tasks WHERE run_id = ? ORDER BY seq').all('crash') as TaskRow[];
      files = db
        .prepare('SELECT task_id, path, bytes FROM files WHERE run_id = ?')
        .all('crash') as typeof files;
    } finally {
      db.close();
    }
    const state = (await (await request(`${sandbox.sandboxUrl}/_sandbox/state`)).body.json()) as SandboxState;
    const jobs = new Map(state.jobs.map((j) => [j.img_uuid, j]));
    const byKey = sandbox.proxy.jobsByKey();
    expect([...byKey.values()].flat().sort()).toEqual([...jobs.keys()].sort());

    expect(rows).toHaveLength(IMAGES + LINES);
    for (const task of rows) {
      const body = JSON.parse(task.body) as { prompt?: string; text?: string };
      const charges = byKey.get(body.prompt ?? body.text ?? '') ?? [];
      // At most one charge per task, whatever happened.
      expect(charges.length, task.task_id).toBeLessThanOrEqual(1);
      const job = charges[0] === undefined ? undefined : jobs.get(charges[0]);
      switch (task.state) {
        case 'done': {
          expect(job?.status, task.task_id).toBe('success');
          expect(task.img_uuid).toBe(job?.img_uuid);
          const own = files.filter((f) => f.task_id === task.task_id);
          expect(own.length, task.task_id).toBeGreaterThan(0);
          for (const f of own) expect((await stat(f.path)).size).toBe(f.bytes);
          expect(existsSync(join(dir, 'out', 'crash', task.task_id, 'job.json'))).toBe(true);
          break;
        }
        case 'failed':
          expect(job?.status, task.task_id).toBe('failed');
          expect(job?.refunded).toBe(job?.cost);
          expect(task.refunded).toBe(job?.cost);
          break;
        case 'in_doubt':
          // Reported and left alone; the sandbox may or may not have charged it (once at most, above).
          break;
        default:
          throw new Error(`${task.task_id} ended ${task.state}`);
      }
    }
    const leftovers = (await walk(dir)).filter((f) => f.endsWith('.part'));
    expect(leftovers).toEqual([]);
  }, 90_000);
});
