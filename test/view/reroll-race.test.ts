// Three re-roll requests sent to the view at once, as an attacker (or three open tabs) would: a run with a
// budget of 1.2 and 0.4 left, four results awaiting review, `[still-mug-1, still-mug-2]`, `[still-mug-3]`
// and `[still-mug-4]` at the same moment. Each ask reserves its worst cases in the store in one
// transaction, so at most the budget's worth is recorded and the rest is refused with the reason; the next
// `run` sends what was recorded and is not stuck. Real HTTP to the view and the sandbox, a real state file.
import { request as httpRequest } from 'node:http';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startView, type ViewServer } from '../../src/view/server.js';
import { makeRunEnv, type RunEnv, taskStates } from '../helpers/run-env.js';

let env: RunEnv;
let view: ViewServer;
let file: string;

const STILLS = [
  {
    id: 'still-{{product}}-{{index}}',
    model: 'flat-image',
    matrix: { product: ['mug'] },
    repeat: 4,
    review: true,
    input: { prompt: 'A {{product}}, variant {{index}}' },
  },
];

async function sandboxState(): Promise<{ balance: number; jobs: Array<{ model: string }> }> {
  const answer = await request(`${env.sandbox.baseUrl}/_sandbox/state`);
  return (await answer.body.json()) as { balance: number; jobs: Array<{ model: string }> };
}

interface Outcome {
  task: string;
  ok: boolean;
  reason?: string;
}

/** A re-roll POST as the page sends it (token header, same origin). */
function reroll(taskIds: string[]): Promise<{ status: number; outcomes: Outcome[] }> {
  const text = JSON.stringify({ taskIds, verdict: 'reroll' });
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: view.port,
        path: '/api/runs/batch/decisions',
        method: 'POST',
        headers: {
          host: `127.0.0.1:${view.port}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(text),
          authorization: `Bearer ${view.token}`,
          'x-mediabatch-token': view.token,
          origin: `http://127.0.0.1:${view.port}`,
          'sec-fetch-site': 'same-origin',
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { outcomes?: Outcome[] };
          resolve({ status: res.statusCode ?? 0, outcomes: body.outcomes ?? [] });
        });
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

beforeAll(async () => {
  env = await makeRunEnv();
  file = await env.manifest({ tasks: STILLS, concurrency: 4, budget: 1.2 });
  const first = await env.run(['run', file, '--yes']);
  if (first.code !== 4) throw new Error(`run exited ${first.code}: ${first.stderr}`);
  view = await startView({ stateFile: env.db, cwd: env.dir });
}, 60_000);

afterAll(async () => {
  await view?.close();
  await env?.close();
});

describe('three re-roll requests at once against 0.4 left of a budget of 1.2', () => {
  it('records at most the budget’s worth, refuses the rest with the reason, and the next run is not stuck', async () => {
    const start = await sandboxState();
    expect(start.jobs).toHaveLength(4);

    const answers = await Promise.all([
      reroll(['still-mug-1', 'still-mug-2']),
      reroll(['still-mug-3']),
      reroll(['still-mug-4']),
    ]);
    const outcomes = answers.flatMap((a) => a.outcomes);
    expect(outcomes).toHaveLength(4);
    const accepted = outcomes.filter((o) => o.ok).map((o) => o.task);
    const refused = outcomes.filter((o) => !o.ok);
    // 0.4 left holds two re-rolls of 0.2 at most: whichever asks came first, never three.
    expect(accepted.length).toBe(2);
    expect(refused.length).toBe(2);
    for (const r of refused) {
      expect(r.reason).toMatch(
        /^re-rolling \d task\(s\) may cost up to 0\.\d+ tokens and the budget of 1\.2 tokens leaves 0(\.\d+)? tokens: nothing was sent; raise budget in the manifest to re-roll$/,
      );
    }
    // An ask is all or nothing: the pair is accepted together or refused together.
    const pair = accepted.filter((id) => id === 'still-mug-1' || id === 'still-mug-2');
    expect([0, 2]).toContain(pair.length);
    // Recorded: exactly the accepted ones, as decisions and as reservations of their worst case.
    const decided = env.query(
      "SELECT task_id FROM decisions WHERE verdict = 'reroll' ORDER BY task_id",
    ) as Array<{
      task_id: string;
    }>;
    expect(decided.map((d) => d.task_id)).toEqual([...accepted].sort());
    expect(env.query("SELECT sum(amount) AS held FROM reservations WHERE state = 'held'")).toEqual([
      { held: 400_000 },
    ]);
    expect((await sandboxState()).jobs).toHaveLength(4);

    // The next run sends what was recorded, within the budget, and ends as a run awaiting review does.
    const next = await env.run(['run', file, '--yes']);
    expect(next.code).toBe(4);
    const end = await sandboxState();
    expect(end.jobs).toHaveLength(6);
    // 0.8 before, 0.4 now: the sandbox charged the run 1.2, its budget, and no more.
    expect(start.balance - end.balance).toBeCloseTo(0.4, 9);
    expect(env.query("SELECT sum(tokens) AS charged FROM ledger WHERE kind = 'charge'")).toEqual([
      { charged: expect.closeTo(1.2, 9) },
    ]);
    const states = taskStates(env);
    for (const id of accepted) expect(states[id]).toBe('done');
    expect(env.query("SELECT count(*) AS open FROM reservations WHERE state IN ('held', 'doubt')")).toEqual([
      { open: 0 },
    ]);
  });
});
