// The receiver of the service's status callbacks. A callback is only a hint of which job to look at:
// the body is never trusted (there is no signature), so the runner confirms with jobs/detail before it
// records anything. The receiver answers at once, checks the per-run token in constant time, caps the
// body, and drops what it cannot match to a task of this run.

import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from '../util/log.js';

export const CALLBACK_PATH = '/mediabatch/callback';
/** A job record with song lyrics is a few kB; nothing legitimate comes near this. */
export const CALLBACK_BODY_LIMIT = 256 * 1024;

export interface CallbackHint {
  taskId: string;
  /** As the body claims; the runner checks it against the task's own img_uuid. */
  imgUuid: string | undefined;
  status: string | undefined;
}

export interface CallbackStats {
  received: number;
  /** Wrong token, unknown task, malformed body, duplicate. */
  ignored: number;
  hints: number;
}

export interface CallbackReceiver {
  /** The receiver's own address, e.g. http://127.0.0.1:41234. */
  readonly localUrl: string;
  readonly stats: CallbackStats;
  close(): Promise<void>;
}

export interface ReceiverOptions {
  host: string;
  port: number;
  token: string;
  /** Maps the key in a callback path back to a task id of this run. */
  taskForKey: (key: string) => string | undefined;
  /**
   * Called after the answer is sent. It may answer, later, whether the claim is settled (confirmed, or
   * moot): false makes the receiver forget it, so that a forged claim for a job that has not got there
   * yet cannot swallow the genuine callback when it comes.
   */
  onHint: (hint: CallbackHint) => Promise<boolean> | undefined;
  logger?: Logger;
  bodyLimit?: number;
  /** Shorter limits for tests; the defaults suit a callback of a few kB from a nearby service. */
  timeouts?: Partial<ReceiverTimeouts>;
}

/** In milliseconds. A client that stalls is dropped, so it can hold neither a socket nor the run's exit. */
export interface ReceiverTimeouts {
  /** All headers must arrive within this. */
  headers: number;
  /** The whole request, body included. */
  request: number;
  /** A socket with no traffic at all. */
  idle: number;
  /** An idle kept-alive socket between requests. */
  keepAlive: number;
}

export const RECEIVER_TIMEOUTS: ReceiverTimeouts = {
  headers: 10_000,
  request: 30_000,
  idle: 30_000,
  keepAlive: 5_000,
};

/** A fresh unguessable token for a run (kept in the store so a restarted run accepts late callbacks). */
export function newCallbackToken(): string {
  return randomBytes(24).toString('base64url');
}

/** A short, URL-safe key per task: task ids may hold any character and need not appear in URLs. */
export function callbackKey(taskId: string): string {
  return createHash('sha256').update(taskId).digest('base64url').slice(0, 16);
}

/**
 * Why `value` cannot be the public base of callback URLs, or undefined when it can. Each task's URL is
 * this base plus a path, so a query or fragment would swallow the path.
 */
export function callbackBaseProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `must be an http or https URL such as https://hooks.example.com, got ${JSON.stringify(value)}`;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    return `must be an http or https URL such as https://hooks.example.com, got ${JSON.stringify(value)}`;
  }
  if (url.search !== '' || url.hash !== '') {
    return `must have no query or fragment (the task's path is appended to it), got ${JSON.stringify(value)}`;
  }
  return undefined;
}

/** The URL given to the service for one task: the public base, the run's token and the task's key. */
export function callbackUrlFor(publicBase: string, token: string, taskId: string): string {
  const base = publicBase.replace(/\/+$/, '');
  return `${base}${CALLBACK_PATH}/${token}/${callbackKey(taskId)}`;
}

function sameToken(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  // Compare equal-length buffers only; a length mismatch is answered the same way, after equal work.
  if (a.length !== b.length) {
    timingSafeEqual(b, b);
    return false;
  }
  return timingSafeEqual(a, b);
}

function field(body: unknown, name: string): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const data = (body as Record<string, unknown>)['data'];
  if (typeof data !== 'object' || data === null) return undefined;
  const value = (data as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : undefined;
}

/** The receiver's server: its limits and timeouts. */
function receiverApp(opts: ReceiverOptions): FastifyInstance {
  const t = { ...RECEIVER_TIMEOUTS, ...opts.timeouts };
  return Fastify({
    bodyLimit: opts.bodyLimit ?? CALLBACK_BODY_LIMIT,
    logger: false,
    connectionTimeout: t.idle,
    requestTimeout: t.request,
    keepAliveTimeout: t.keepAlive,
    // node checks header and request deadlines on this interval (30 s by default), so a deadline is
    // late by up to that much unless the check runs often.
    http: { headersTimeout: t.headers, connectionsCheckingInterval: Math.min(1_000, t.headers) },
    // close() destroys every socket, idle or mid-request: a finished run must exit at once even if a
    // client holds a connection open or trickles a request.
    forceCloseConnections: true,
  });
}

/** Listens for the service's callbacks: each one with our token is a hint, confirmed by a poll. */
export async function startCallbackReceiver(opts: ReceiverOptions): Promise<CallbackReceiver> {
  const stats: CallbackStats = { received: 0, ignored: 0, hints: 0 };
  const seen = new Set<string>();
  const app = receiverApp(opts);

  app.post<{ Params: { token: string; key: string } }>(
    `${CALLBACK_PATH}/:token/:key`,
    async (request, reply) => {
      stats.received++;
      const { token, key } = request.params;
      if (!sameToken(token, opts.token)) {
        stats.ignored++;
        opts.logger?.warn({ from: request.ip }, 'callback with a wrong token ignored');
        return reply.code(404).send({ code: 404, msg: 'not found' });
      }
      const taskId = opts.taskForKey(key);
      const imgUuid = field(request.body, 'img_uuid');
      const status = field(request.body, 'status');
      // Answer 200 to anything carrying our token, so the service does not retry what we chose to ignore.
      void reply.code(200).send({ code: 0, msg: 'ok' });
      if (taskId === undefined) {
        stats.ignored++;
        return reply;
      }
      // Per task as well: a body naming another task's job must not use up that job's genuine callback.
      const dedupe =
        imgUuid !== undefined && status !== undefined
          ? `${taskId}\u0000${imgUuid}\u0000${status}`
          : undefined;
      if (dedupe !== undefined) {
        if (seen.has(dedupe)) {
          stats.ignored++;
          return reply;
        }
        seen.add(dedupe);
      }
      stats.hints++;
      // After the answer is on its way: the hint triggers a confirming poll, never a direct change.
      setImmediate(() => {
        const settled = opts.onHint({ taskId, imgUuid, status });
        if (dedupe === undefined || settled === undefined) return;
        settled.then(
          (keep) => {
            if (!keep) seen.delete(dedupe);
          },
          () => seen.delete(dedupe),
        );
      });
      return reply;
    },
  );

  // Everything else, including the wrong method, gets the same bland 404.
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ code: 404, msg: 'not found' }));
  app.setErrorHandler((error, _request, reply) => {
    stats.received++;
    stats.ignored++;
    const status = (error as { statusCode?: number }).statusCode ?? 400;
    return reply.code(status >= 400 && status < 600 ? status : 400).send({ code: status, msg: 'refused' });
  });

  const address = await app.listen({ host: opts.host, port: opts.port });
  const url = new URL(address);
  return {
    localUrl: `${url.protocol}//${url.host}`,
    stats,
    close: () => app.close(),
  };
}

/** `host:port` as given to --listen; port 0 picks a free one. */
export function parseListen(value: string): { host: string; port: number } {
  const match = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(value.trim());
  const port = match ? Number(match[2]) : Number.NaN;
  if (!match || port > 65535) {
    throw new Error(
      `--listen: must be host:port such as 127.0.0.1:8080 (port 0 picks a free one), got ${JSON.stringify(value)}`,
    );
  }
  return { host: match[1]!.replace(/^\[|\]$/g, ''), port };
}
