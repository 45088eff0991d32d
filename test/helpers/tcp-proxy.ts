// A TCP proxy on loopback (node:net) between a client and a server, for tests of a network that fails:
// it passes bytes both ways, drops them (a blackhole: nothing forwarded, nothing closed, as a dead route
// or a hung middlebox behaves), or cuts every connection at once (a reset, as a restarted NAT does).
import { spawn } from 'node:child_process';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';

export type ProxyMode = 'pass' | 'drop';

export interface TcpProxy {
  /** The proxy's own port on 127.0.0.1. */
  readonly port: number;
  /** `url` with its host and port replaced by the proxy's (for a postgres:// URL or any other). */
  through(url: string): string;
  mode(): ProxyMode;
  /** Forwards bytes again (connections made while dropping are connected to the server now). */
  pass(): void;
  /** Stops forwarding in both directions without closing anything; what arrives is thrown away. */
  drop(): void;
  /** Destroys every open connection on both sides; new connections are accepted as the mode says. */
  cut(): void;
  /**
   * Once: passes a server's bytes up to the end of the first `pattern` in them, then closes that connection
   * (a FIN after those bytes): its client reads everything before the cut and nothing after.
   */
  cutAfter(pattern: Buffer): void;
  /** Connections accepted so far, and those still open. */
  counts(): { accepted: number; open: number };
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  server: Socket | undefined;
  /** The server's last bytes, where a pattern of cutAfter may have begun. */
  tail?: Buffer;
  /** Closed by cutAfter: the client side ends after its last bytes instead of being destroyed. */
  cutting?: true;
}

/**
 * `delayMs`: each chunk is passed on that much later, in order, each way (a server a network hop away: a
 * round trip costs twice it).
 */
export async function startTcpProxy(target: {
  host?: string;
  port: number;
  delayMs?: number;
}): Promise<TcpProxy> {
  const host = target.host ?? '127.0.0.1';
  const delayMs = target.delayMs ?? 0;
  // Timers of one delay fire in the order they were set: the stream keeps its order.
  const forward = (to: Socket, chunk: Buffer) => {
    if (delayMs === 0) to.write(chunk);
    else setTimeout(() => to.destroyed || to.write(chunk), delayMs);
  };
  let mode: ProxyMode = 'pass';
  let cutAt: Buffer | undefined;
  let accepted = 0;
  const pairs = new Set<Pair>();
  /** Every socket on either side, so close() ends them all whatever state their pair is in. */
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  };

  const link = (pair: Pair): void => {
    const server = connect({ host, port: target.port });
    track(server);
    pair.server = server;
    server.setNoDelay(true);
    server.on('data', (chunk: Buffer) => {
      if (mode !== 'pass' || pair.cutting) return;
      if (cutAt === undefined) {
        forward(pair.client, chunk);
        return;
      }
      const tail = pair.tail ?? Buffer.alloc(0);
      const seen = Buffer.concat([tail, chunk]);
      const at = seen.indexOf(cutAt);
      if (at < 0) {
        forward(pair.client, chunk);
        pair.tail = seen.subarray(Math.max(0, seen.length - cutAt.length + 1));
        return;
      }
      pair.cutting = true;
      // After any chunk still delayed, as every other byte: the client reads all before the cut.
      const last = chunk.subarray(0, at + cutAt.length - tail.length);
      if (delayMs === 0) pair.client.end(last);
      else setTimeout(() => pair.client.end(last), delayMs);
      cutAt = undefined;
      server.destroy();
    });
    const end = () => {
      // A cut ends the client side itself, after its last bytes.
      if (!pair.cutting) pair.client.destroy();
      server.destroy();
      pairs.delete(pair);
    };
    server.on('error', end);
    server.on('close', end);
  };

  const proxy: Server = createServer((client) => {
    accepted += 1;
    track(client);
    client.setNoDelay(true);
    const pair: Pair = { client, server: undefined };
    pairs.add(pair);
    // Bytes a client sends before its server side exists (or while dropping) are not forwarded later:
    // a blackhole loses them, as the network would.
    client.on('data', (chunk: Buffer) => {
      if (mode === 'pass' && pair.server !== undefined) forward(pair.server, chunk);
    });
    const end = () => {
      client.destroy();
      pair.server?.destroy();
      pairs.delete(pair);
    };
    client.on('error', end);
    client.on('close', end);
    if (mode === 'pass') link(pair);
  });
  await new Promise<void>((resolve, reject) => {
    proxy.once('error', reject);
    proxy.listen(0, '127.0.0.1', () => resolve());
  });
  const address = proxy.address();
  if (typeof address !== 'object' || address === null) throw new Error('the TCP proxy has no port');
  const port = address.port;

  return {
    port,
    through(url) {
      const parsed = new URL(url);
      parsed.hostname = '127.0.0.1';
      parsed.port = String(port);
      return parsed.toString();
    },
    mode: () => mode,
    pass() {
      mode = 'pass';
      for (const pair of pairs) if (pair.server === undefined) link(pair);
    },
    drop() {
      mode = 'drop';
    },
    cut() {
      for (const pair of [...pairs]) {
        pair.client.resetAndDestroy();
        pair.server?.resetAndDestroy();
        pairs.delete(pair);
      }
    },
    cutAfter(pattern) {
      cutAt = pattern;
    },
    counts: () => ({ accepted, open: pairs.size }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        pairs.clear();
        proxy.close(() => resolve());
      }),
  };
}

/** The proxy in a child process (tcp-proxy-child.ts): each command resolves once the proxy has done it. */
export interface TcpProxyProcess {
  readonly port: number;
  through(url: string): string;
  pass(): Promise<void>;
  drop(): Promise<void>;
  cut(): Promise<void>;
  /** Drops for `ms`, then cuts every connection and passes again, timed by the proxy's own process. */
  hole(ms: number): Promise<void>;
  /** TcpProxy#cutAfter. */
  cutAfter(pattern: Buffer): Promise<void>;
  counts(): Promise<{ accepted: number; open: number }>;
  close(): Promise<void>;
}

const CHILD = fileURLToPath(new URL('./tcp-proxy-child.ts', import.meta.url));
const TSX = pathToFileURL(
  fileURLToPath(new URL('../../node_modules/tsx/dist/loader.mjs', import.meta.url)),
).href;

export async function spawnTcpProxy(target: { port: number }): Promise<TcpProxyProcess> {
  const child = spawn(process.execPath, ['--import', TSX, CHILD, String(target.port)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async (): Promise<string> => {
    const line = await lines.next();
    if (line.done === true) throw new Error('the TCP proxy process ended');
    return line.value;
  };
  const port = Number(await next());
  // One command at a time, each with its answer, in order.
  let turn: Promise<unknown> = Promise.resolve();
  const ask = (command: string): Promise<string> => {
    const answer = turn.then(async () => {
      child.stdin.write(`${command}\n`);
      return next();
    });
    turn = answer.catch(() => undefined);
    return answer;
  };
  return {
    port,
    through(url) {
      const parsed = new URL(url);
      parsed.hostname = '127.0.0.1';
      parsed.port = String(port);
      return parsed.toString();
    },
    pass: async () => void (await ask('pass')),
    drop: async () => void (await ask('drop')),
    cut: async () => void (await ask('cut')),
    hole: async (ms) => void (await ask(`hole ${ms}`)),
    cutAfter: async (pattern) => void (await ask(`cutafter ${pattern.toString('hex')}`)),
    counts: async () => JSON.parse(await ask('counts')) as { accepted: number; open: number },
    close: async () => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.stdin.end();
      child.kill('SIGTERM');
      await exited;
    },
  };
}
