import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

export const fixtures = join(import.meta.dirname, '..', 'fixtures', 'media');

export interface Served {
  /** http://127.0.0.1:<port> */
  base: string;
  /** Every request seen: path and Range header. */
  requests: { path: string; range: string | undefined }[];
  /** Body bytes sent, over all requests. */
  bytesSent(): number;
  close(): Promise<void>;
}

export interface ServeOptions {
  /** Honour Range requests (206) or ignore them (always 200 with the whole file). */
  ranges: boolean;
  /** Extra routes, tried before the fixture files. Return true when handled. */
  routes?: (req: IncomingMessage, res: ServerResponse) => boolean;
  /** Files served from memory, by path. */
  files?: Record<string, Uint8Array>;
}

/** A loopback file server over test/fixtures/media, with or without Range support. */
export async function serveFixtures(opts: ServeOptions): Promise<Served> {
  const requests: Served['requests'] = [];
  let sent = 0;
  const server = createServer(async (req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    requests.push({ path, range: req.headers.range });
    if (opts.routes?.(req, res)) return;
    let body: Uint8Array;
    try {
      body =
        opts.files?.[path] ?? (await readFile(join(fixtures, path.replace(/^\/+/, '').replace(/\.\./g, ''))));
    } catch {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    const match = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    if (opts.ranges && match) {
      const start = Number(match[1]);
      const end = Math.min(match[2] ? Number(match[2]) : body.length - 1, body.length - 1);
      if (start >= body.length) {
        res.writeHead(416, { 'content-range': `bytes */${body.length}` }).end();
        return;
      }
      const part = body.subarray(start, end + 1);
      sent += part.length;
      res
        .writeHead(206, {
          'content-range': `bytes ${start}-${end}/${body.length}`,
          'content-length': part.length,
          'accept-ranges': 'bytes',
        })
        .end(part);
      return;
    }
    sent += body.length;
    res.writeHead(200, { 'content-length': body.length }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    base: `http://127.0.0.1:${port}`,
    requests,
    bytesSent: () => sent,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
