// A run stopped by its budget, resumed after the manifest's budget was raised: the view names the budget the
// run works under now (the one the store holds every spend to), not the one it was first started with.
import { afterEach, describe, expect, it } from 'vitest';
import { startView, type ViewServer } from '../../src/view/server.js';
import { images, makeRunEnv, type RunEnv } from '../helpers/run-env.js';
import { raw } from './helpers.js';

let env: RunEnv | undefined;
let view: ViewServer | undefined;
afterEach(async () => {
  await view?.close();
  await env?.close();
  view = undefined;
  env = undefined;
});

interface RunDetail {
  run: { budget: number | null; state: string };
  spend_series: { budget: number | null };
}

async function detail(v: ViewServer): Promise<RunDetail> {
  const answer = await raw(v.port, '/api/runs/batch', { authorization: `Bearer ${v.token}` });
  expect(answer.status).toBe(200);
  return JSON.parse(answer.text) as RunDetail;
}

describe("the view of a resumed run whose manifest's budget changed", () => {
  it('shows the budget the run works under now, in its head and its spend chart', async () => {
    env = await makeRunEnv();
    const first = await env.run([
      'run',
      await env.manifest({ tasks: images(3), concurrency: 1, budget: 0.4 }),
      '--yes',
      '--allow-partial',
    ]);
    expect(first.code).toBe(4);
    view = await startView({ stateFile: env.db, cwd: env.dir });
    expect((await detail(view)).run.budget).toBe(0.4);
    await view.close();
    view = undefined;

    const again = await env.run([
      'run',
      await env.manifest({ tasks: images(3), concurrency: 1, budget: 5 }),
      '--yes',
    ]);
    expect(again.code).toBe(0);
    view = await startView({ stateFile: env.db, cwd: env.dir });
    const now = await detail(view);
    expect(now.run.state).toBe('finished');
    expect(now.run.budget).toBe(5);
    expect(now.spend_series.budget).toBe(5);
  });
});
