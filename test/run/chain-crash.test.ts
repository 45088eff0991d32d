// Kill -9 anywhere in chains, then the same command again, until the run ends: no task is
// charged twice, no downstream is submitted before its upstream is done, each gets its upstream's own
// result, and a downstream of an upstream that did not succeed is blocked with nothing charged.
// The runner is a child process; the sandbox lives in its own process and outlives every kill.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { SandboxState } from '../../src/sandbox/server.js';
import { type ChargeProxy, startChargeProxy } from '../helpers/charge-proxy.js';
import { type Child, runWithKills, seeded, spawnSandbox } from '../helpers/child.js';
import type { TaskRow } from '../helpers/run-env.js';

const PAIRS = 10;
const SHEETS = 4;
const MAX_KILLS = 6;

let dir: string;
let sandbox: Child;
let sandboxUrl: string;
let proxy: ChargeProxy;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mb-chain-crash-'));
  const started = await spawnSandbox([
    '--speed',
    '0',
    '--fail-rate',
    '0.2',
    '--seed',
    '5',
    '--latency',
    '25',
  ]);
  sandbox = started.child;
  sandboxUrl = started.baseUrl;
  proxy = await startChargeProxy(sandboxUrl);
});

afterAll(async () => {
  await proxy?.close();
  sandbox?.proc.kill('SIGTERM');
  await sandbox?.exited;
  await rm(dir, { recursive: true, force: true });
});

describe('chains: kill -9 at random moments', () => {
  it('never charges twice, never submits a downstream before its upstream is done, blocks what cannot go', async () => {
    const tasks = [
      {
        id: 'still-{{index}}',
        model: 'flat-image',
        repeat: PAIRS,
        input: { prompt: 'chain still {{index}}' },
      },
      {
        id: 'clip-{{index}}',
        model: 'studio-2-6',
        repeat: PAIRS,
        after: 'still-{{index}}',
        input: {
          prompt: 'chain clip {{index}}',
          image_url: '{{after.image}}',
          duration: 5,
          resolution: '720p',
        },
      },
      {
        id: 'hero-{{index}}',
        model: 'oc-maker',
        repeat: SHEETS,
        input: {
          prompt: 'chain hero {{index}}: answer a JSON object with name and oc_prompt',
          image_render_model: 'render-a',
        },
      },
      {
        id: 'poster-{{index}}',
        model: 'flat-image',
        repeat: SHEETS,
        after: { hero: 'hero-{{index}}' },
        input: { prompt: 'chain poster {{index}} of {{after.hero.sheet.name}}' },
      },
    ];
    await writeFile(
      join(dir, 'chain.yaml'),
      stringify({ version: 1, name: 'chain', concurrency: 4, output: 'out', tasks }),
    );
    const env = {
      MEDIABATCH_API_KEY: 'sandbox-key',
      MEDIABATCH_BASE_URL: proxy.baseUrl,
      MEDIABATCH_POLL_SCALE: '0.01',
    };
    const random = seeded(20261125);
    const codes = await runWithKills({
      args: ['--state', 'state.db', 'run', 'chain.yaml', '--yes'],
      cwd: dir,
      env,
      random,
      maxKills: MAX_KILLS,
      maxDelayMs: 700,
    });
    expect(codes.filter((c) => c === 'SIGKILL').length).toBeGreaterThanOrEqual(3);

    const db = new Database(join(dir, 'state.db'), { readonly: true, fileMustExist: true });
    let rows: Array<TaskRow & { planned_body: string | null }>;
    try {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      rows = db.prepare('SELECT * FROM tasks WHERE run_id = ? ORDER BY seq').all('chain') as typeof rows;
    } finally {
      db.close();
    }
    const state = (await (await request(`${sandboxUrl}/_sandbox/state`)).body.json()) as SandboxState;
    const jobs = new Map(state.jobs.map((j) => [j.img_uuid, j]));
    const byKey = proxy.jobsByKey();
    const byId = new Map(rows.map((r) => [r.task_id, r]));
    expect(rows).toHaveLength(2 * PAIRS + 2 * SHEETS);

    const keyOf = (task: TaskRow) => {
      const body = JSON.parse(task.body) as { prompt?: string };
      return body.prompt ?? '';
    };
    const upstreamOf = (id: string) =>
      id.startsWith('clip-')
        ? `still-${id.slice(5)}`
        : id.startsWith('poster-')
          ? `hero-${id.slice(7)}`
          : undefined;
    const itemsOf = (id: string) =>
      (
        JSON.parse(readFileSync(join(dir, 'out', 'chain', id, 'job.json'), 'utf8')) as {
          job: { json: Array<Record<string, unknown>> };
        }
      ).job.json;
    let chainedDone = 0;
    for (const task of rows) {
      // At most one charge per task, whatever happened (a downstream's key is its filled-in prompt).
      const charges = byKey.get(keyOf(task)) ?? [];
      expect(charges.length, task.task_id).toBeLessThanOrEqual(1);
      const up = upstreamOf(task.task_id);
      expect(['done', 'failed', 'in_doubt', 'blocked'], task.task_id).toContain(task.state);
      if (up === undefined) continue;
      const upstream = byId.get(up);
      if (task.state === 'blocked') {
        expect(charges, task.task_id).toEqual([]);
        expect(['failed', 'in_doubt', 'rejected', 'lost', 'unfetched'], task.task_id).toContain(
          upstream?.state,
        );
        continue;
      }
      // Sent: only after its upstream's job ended, and with that job's own result.
      const job = charges[0] === undefined ? undefined : jobs.get(charges[0]);
      if (job === undefined) continue;
      expect(upstream?.state, task.task_id).toBe('done');
      const upJob = jobs.get(upstream?.img_uuid ?? '');
      expect(Date.parse(job.created_at), task.task_id).toBeGreaterThanOrEqual(
        Date.parse(upJob?.ends_at ?? ''),
      );
      const sent = job.request as { image_url?: string; prompt?: string };
      if (task.task_id.startsWith('clip-')) {
        expect(sent.image_url?.split('?')[0]).toBe(String(itemsOf(up)[0]?.value).split('?')[0]);
      } else {
        const sheet = itemsOf(up).find((i) => i.type === 'json')?.value as { name: string };
        expect(sent.prompt).toBe(`chain poster ${task.task_id.slice(7)} of ${sheet.name}`);
      }
      if (task.state === 'done') chainedDone++;
    }
    expect(chainedDone).toBeGreaterThan(0);
  }, 120_000);
});
