// Shared by the sandbox tests: a fake clock, a small HTTP client, and a loopback server for the media fixtures.
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import type { SandboxOptions } from '../../src/sandbox/options.js';
import { type Sandbox, startSandbox } from '../../src/sandbox/server.js';

export const T0 = Date.parse('2024-10-11T10:00:00.000Z');
export const KEY = 'sandbox-key';
const FIXTURES = fileURLToPath(new URL('../fixtures/media/', import.meta.url));

export class FakeClock {
  t = T0;
  readonly now = (): number => this.t;
  advance(seconds: number): void {
    this.t += seconds * 1000;
  }
}

export interface Answer {
  status: number;
  // Answers are JSON of varying shape; tests read the fields they assert on.
  // biome-ignore lint/suspicious/noExplicitAny: the tests assert on the shape, so a looser type is the point
  body: any;
}

export interface Client {
  post(path: string, body: unknown, key?: string | null): Promise<Answer>;
  get(path: string, key?: string | null): Promise<Answer>;
  submit(path: string, body: unknown): Promise<Answer>;
  poll(id: string): Promise<Answer>;
}

export function clientFor(baseUrl: string): Client {
  const headers = (key: string | null | undefined): Record<string, string> =>
    key === null ? {} : { authorization: `Bearer ${key ?? KEY}` };
  const read = async (res: Awaited<ReturnType<typeof request>>): Promise<Answer> => {
    const text = await res.body.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {}
    return { status: res.statusCode, body };
  };
  const client: Client = {
    post: async (path, body, key) =>
      read(
        await request(`${baseUrl}${path}`, {
          method: 'POST',
          headers: { ...headers(key), 'content-type': 'application/json' },
          body: typeof body === 'string' ? body : JSON.stringify(body),
        }),
      ),
    get: async (path, key) => read(await request(`${baseUrl}${path}`, { headers: headers(key) })),
    submit: (path, body) => client.post(path, body),
    poll: (id) => client.get(`/api/v1/jobs/detail?img_uuid=${encodeURIComponent(id)}`),
  };
  return client;
}

const open: Array<() => Promise<void>> = [];

/** Closes everything the test opened; call from afterEach. */
export async function closeAll(): Promise<void> {
  await Promise.all(open.splice(0).map((close) => close()));
}

/** Starts a sandbox on a free loopback port with a fake clock, and a client for it; closed by closeAll. */
export async function openSandbox(
  opts: SandboxOptions = {},
): Promise<{ sandbox: Sandbox; api: Client; clock: FakeClock }> {
  const clock = new FakeClock();
  const sandbox = await startSandbox({ port: 0, now: clock.now, callbackRetryDelayMs: 10, ...opts });
  open.push(() => sandbox.close());
  return { sandbox, api: clientFor(sandbox.baseUrl), clock };
}

export interface MediaServer {
  url(name: string): string;
}

/** Serves test/fixtures/media over loopback HTTP, as a user's media host would; closed by closeAll. */
export async function serveFixtures(): Promise<MediaServer> {
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const name = decodeURIComponent((req.url ?? '/').slice(1).split('?')[0] ?? '');
    if (!/^[\w.-]+$/.test(name)) return void res.writeHead(404).end();
    // `big-<bytes>.png`: a file of that size, to test size limits without committing one.
    const big = /^big-(\d+)\.png$/.exec(name);
    if (big)
      return void res.writeHead(200, { 'content-length': Number(big[1]) }).end(Buffer.alloc(Number(big[1])));
    readFile(join(FIXTURES, name)).then(
      (bytes) => res.writeHead(200, { 'content-length': bytes.length }).end(bytes),
      () => res.writeHead(404).end('not found'),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  open.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return {
    url: (name) => `http://127.0.0.1:${port}/${name}`,
  };
}

export const PATHS = {
  videos: '/api/v1/videos/generations',
  images: '/api/v1/images/generations',
  audio: '/api/v1/audio/generations',
  faceSwap: '/api/v1/videofaceswap/generate',
} as const;
