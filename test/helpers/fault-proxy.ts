// A loopback proxy in front of a sandbox that answers chosen requests with a 500 (nothing forwarded, so
// nothing charged): passing faults of the service, counted, in the order and number a test decides.
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';

export interface FaultProxy {
  baseUrl: string;
  /** Requests answered 500 so far. */
  readonly faults: number;
  close(): Promise<void>;
}

/** What the proxy knows of a request when it decides; `seenDone` tells whether a job was answered done. */
export interface Asked {
  method: string;
  path: string;
  imgUuid: string | null;
  seenDone(imgUuid: string): boolean;
}

/** Forwards everything to `upstream` except what `fault` picks, which is answered 500 at once. */
export async function startFaultProxy(
  upstream: string,
  fault: (asked: Asked) => boolean,
): Promise<FaultProxy> {
  const done = new Set<string>();
  let faults = 0;
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const url = new URL(req.url ?? '/', 'http://proxy');
      const imgUuid = url.searchParams.get('img_uuid');
      const asked = {
        method: req.method ?? 'GET',
        path: url.pathname,
        imgUuid,
        seenDone: (id: string) => done.has(id),
      };
      if (fault(asked)) {
        faults++;
        res.writeHead(500, { 'content-type': 'application/json' }).end('{"code":500,"msg":""}');
        return;
      }
      const answer = await request(`${upstream}${req.url ?? '/'}`, {
        method: (req.method ?? 'GET') as 'GET',
        headers: { authorization: req.headers.authorization ?? '', 'content-type': 'application/json' },
        ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
      });
      const body = Buffer.from(await answer.body.arrayBuffer());
      if (imgUuid && body.includes('"success"')) done.add(imgUuid);
      res.writeHead(answer.statusCode, { 'content-type': 'application/json' }).end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    get faults() {
      return faults;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
