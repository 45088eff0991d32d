// A loopback proxy in front of a sandbox that knows which request created which job. The sandbox's
// state lists jobs without their request; the proxy sends submissions one at a time and compares the
// job list before and after each, so a job created by a submission whose answer was lost (or whose
// sender was killed) is still tied to the task that asked for it. Tests count charges per task with it.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import type { SandboxState } from '../../src/sandbox/server.js';
import { spawnSandbox } from './child.js';

export interface ChargeProxy {
  baseUrl: string;
  /** img_uuid -> what identifies the request (its `prompt` or `text`). */
  jobsByKey(): Map<string, string[]>;
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function sandboxJobs(upstream: string): Promise<Set<string>> {
  const res = await request(`${upstream}/_sandbox/state`);
  const state = (await res.body.json()) as SandboxState;
  return new Set(state.jobs.map((j) => j.img_uuid));
}

function keyOf(body: Buffer): string {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { prompt?: unknown; text?: unknown };
    return String(parsed.prompt ?? parsed.text ?? '?');
  } catch {
    return '?';
  }
}

export async function startChargeProxy(upstream: string): Promise<ChargeProxy> {
  const byKey = new Map<string, string[]>();
  let queue: Promise<unknown> = Promise.resolve();

  const forward = async (req: IncomingMessage, body: Buffer) => {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (['host', 'connection', 'content-length', 'keep-alive'].includes(name)) continue;
      if (typeof value === 'string') headers[name] = value;
    }
    const res = await request(`${upstream}${req.url ?? '/'}`, {
      method: req.method as 'GET' | 'POST',
      headers,
      ...(req.method === 'POST' ? { body } : {}),
    });
    return { status: res.statusCode, type: res.headers['content-type'], body: await res.body.text() };
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const body = await readBody(req);
    let answer: Awaited<ReturnType<typeof forward>> | undefined;
    if (req.method === 'POST' && req.url?.startsWith('/api/')) {
      // One submission at a time, so the jobs that appear belong to it, whatever happens to its sender.
      const turn = queue.then(async () => {
        const before = await sandboxJobs(upstream);
        try {
          answer = await forward(req, body);
        } catch {
          answer = undefined;
        }
        const after = await sandboxJobs(upstream);
        const key = keyOf(body);
        for (const id of after) {
          if (before.has(id)) continue;
          byKey.set(key, [...(byKey.get(key) ?? []), id]);
        }
      });
      queue = turn.catch(() => undefined);
      await turn;
    } else {
      answer = await forward(req, body).catch(() => undefined);
    }
    if (!answer) {
      // The sandbox dropped the connection: so does the proxy.
      req.socket.destroy();
      return;
    }
    res.writeHead(answer.status, typeof answer.type === 'string' ? { 'content-type': answer.type } : {});
    res.end(answer.body);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => req.socket.destroy());
  });
  server.keepAliveTimeout = 10_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    jobsByKey: () => new Map(byKey),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A sandbox in a process of its own with a charge proxy in front: what the kill -9 tests run against. */
export interface ProxiedSandbox {
  /** The sandbox itself: `/_sandbox/state` has its books. */
  sandboxUrl: string;
  proxy: ChargeProxy;
  /** The environment a CLI child needs to reach the sandbox through the proxy, polls a hundred times faster. */
  env(key?: string): Record<string, string>;
  close(): Promise<void>;
}

/** Starts `mediabatch sandbox <flags>` in a child process and a charge proxy in front of it. */
export async function startProxiedSandbox(flags: string[]): Promise<ProxiedSandbox> {
  const { child, baseUrl } = await spawnSandbox(flags);
  const proxy = await startChargeProxy(baseUrl).catch(async (error: unknown) => {
    child.proc.kill('SIGTERM');
    await child.exited;
    throw error;
  });
  return {
    sandboxUrl: baseUrl,
    proxy,
    env: (key = 'sandbox-key') => ({
      MEDIABATCH_API_KEY: key,
      MEDIABATCH_BASE_URL: proxy.baseUrl,
      MEDIABATCH_POLL_SCALE: '0.01',
    }),
    async close() {
      await proxy.close();
      child.proc.kill('SIGTERM');
      await child.exited;
    },
  };
}
