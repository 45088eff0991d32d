// A re-roll is recorded before it is sent, like every submission. kill -9 while its POST is out
// (the service took it and charged) leaves it in doubt: the next runs never send it again, and it cannot be
// re-rolled again while its charge is unknown. The runner is a child process killed for real; the sandbox
// lives in the test process and outlives it; money from its /_sandbox/state.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnCli } from '../helpers/child.js';
import { FAST_POLLS, makeRunEnv, type RunEnv, SANDBOX_KEY, taskStates } from '../helpers/run-env.js';

let env: RunEnv | undefined;
let proxy: Server | undefined;
afterEach(async () => {
  proxy?.closeAllConnections();
  await new Promise((r) => proxy?.close(r) ?? r(undefined));
  await env?.close();
  env = undefined;
  proxy = undefined;
});

async function jobs(e: RunEnv): Promise<number> {
  const answer = await request(`${e.sandbox.baseUrl}/_sandbox/state`);
  return ((await answer.body.json()) as { jobs: unknown[] }).jobs.length;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Forwards everything; a submission is passed on (so it is charged) and its answer held forever. */
async function holdingProxy(upstream: string, held: () => boolean): Promise<{ server: Server; url: string }> {
  const server = createServer(async (req, res) => {
    const body = await readBody(req);
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (typeof value === 'string' && !['host', 'connection', 'content-length'].includes(name))
        headers[name] = value;
    }
    const answer = await request(`${upstream}${req.url ?? '/'}`, {
      method: req.method as 'GET' | 'POST',
      headers,
      ...(req.method === 'POST' ? { body } : {}),
    });
    const text = await answer.body.text();
    // Never answered while holding: the sender is killed while it waits.
    if (req.method === 'POST' && req.url?.startsWith('/api/') && held()) return;
    res.writeHead(answer.statusCode, {
      'content-type': String(answer.headers['content-type'] ?? 'application/json'),
    });
    res.end(text);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe('review: kill -9 during a re-roll', () => {
  it('leaves the re-roll in doubt, charged once, never sent again', async () => {
    env = await makeRunEnv();
    const file = await env.manifest({
      tasks: [{ id: 'still', model: 'flat-image', review: true, input: { prompt: 'a mug' } }],
    });
    let holding = false;
    let onHeld: () => void = () => {};
    const heldNow = new Promise<void>((r) => {
      onHeld = r;
    });
    const started = await holdingProxy(env.sandbox.baseUrl, () => {
      if (holding) onHeld();
      return holding;
    });
    proxy = started.server;
    // Every run goes through the proxy: a run is bound to the API it started with.
    const through = { env: { MEDIABATCH_BASE_URL: started.url } };
    const e = env;
    const run = (args: string[]) => e.run(args, through);
    expect((await run(['run', file, '--yes'])).code).toBe(4);
    expect((await run(['review', 'batch', '--reroll', 'still', '--yes'])).code).toBe(0);
    expect(await jobs(env)).toBe(1);

    holding = true;
    const child = spawnCli(['--state', env.db, 'run', file, '--yes'], {
      cwd: env.dir,
      env: {
        MEDIABATCH_API_KEY: SANDBOX_KEY,
        MEDIABATCH_BASE_URL: started.url,
        MEDIABATCH_POLL_SCALE: FAST_POLLS,
      },
    });
    const ended = await Promise.race([heldNow.then(() => 'held'), child.exited.then((c) => `exited ${c}`)]);
    expect(ended, child.stderr() + child.stdout()).toBe('held');
    // The service took it (and charged); the answer never came back; the intent is on record.
    expect(await jobs(env)).toBe(2);
    expect(taskStates(env).still).toBe('submitting');
    child.proc.kill('SIGKILL');
    expect(await child.exited).toBe('SIGKILL');
    holding = false;

    const next = await run(['run', file, '--yes']);
    expect(next.code).toBe(2);
    expect(taskStates(env).still).toBe('in_doubt');
    expect(await jobs(env)).toBe(2);
    expect((await run(['run', file, '--yes'])).code).toBe(2);
    expect(await jobs(env)).toBe(2);

    const again = await run(['review', 'batch', '--reroll', 'still', '--yes']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('still is in doubt, attempt 2: only a result on disk can be decided');
    expect(await jobs(env)).toBe(2);
    expect(
      env.query("SELECT attempt_no, outcome FROM attempts WHERE task_id = 'still' ORDER BY attempt_no"),
    ).toEqual([
      { attempt_no: 1, outcome: 'submitted' },
      { attempt_no: 2, outcome: 'in_doubt' },
    ]);
  });
});
