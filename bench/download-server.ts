// The result server of the download figure, in a process of its own like a CDN: neither the bench's own
// event loop nor its garbage collector sits on the serving path, and both clients meet the same server.
// Serves GET /<bytes> with Content-Length, from 1 MB of random bytes repeated (nothing compresses or
// dedupes), in 1 MB writes with backpressure. Prints `port <n>` once listening; ends on SIGTERM.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const pattern = randomBytes(1024 * 1024);
const server = createServer((req, res) => {
  const total = Number((req.url ?? '').slice(1));
  if (!Number.isSafeInteger(total) || total < 0) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': String(total) });
  let sent = 0;
  const pump = (): void => {
    while (sent < total) {
      const piece = pattern.subarray(0, Math.min(pattern.length, total - sent));
      sent += piece.length;
      if (!res.write(piece)) return void res.once('drain', pump);
    }
    res.end();
  };
  pump();
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`port ${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
