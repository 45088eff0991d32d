// A loopback forwarder in front of the sandbox that notes when the first submission arrives: the
// resume figure is "from `run` start to the first new POST", seen from the wire, not from our logs.
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';

export interface Tap {
  baseUrl: string;
  /** performance.now() of the first POST to /api/, or undefined. */
  firstSubmitAt(): number | undefined;
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function startTap(upstream: string): Promise<Tap> {
  let first: number | undefined;
  const server = createServer((req, res) => {
    if (req.method === 'POST' && req.url?.startsWith('/api/') && first === undefined)
      first = performance.now();
    readBody(req)
      .then(async (body) => {
        const headers: Record<string, string> = {};
        for (const [name, value] of Object.entries(req.headers)) {
          if (['host', 'connection', 'content-length', 'keep-alive'].includes(name)) continue;
          if (typeof value === 'string') headers[name] = value;
        }
        const answer = await request(`${upstream}${req.url ?? '/'}`, {
          method: req.method as 'GET' | 'POST',
          headers,
          ...(req.method === 'POST' ? { body } : {}),
        });
        const type = answer.headers['content-type'];
        res.writeHead(answer.statusCode, typeof type === 'string' ? { 'content-type': type } : {});
        res.end(Buffer.from(await answer.body.arrayBuffer()));
      })
      .catch(() => req.socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    firstSubmitAt: () => first,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A port that was free a moment ago (for `--listen` with a matching `--callback-url`). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
