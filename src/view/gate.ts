// The first thing every request meets, before fastify's router sees it: whatever the router goes on to
// answer (a path too long, 404, a method it has no route for, a URL it cannot read), the answer carries
// the security headers, and only a request with a known Host and a capability gets that far. The address
// `mediabatch view` prints (`/?token=`) is answered here too: the page with the token for its writes, and
// the cookie with the read key only (docs/view.md, "Threat model").

import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  cookieHoldsKey,
  hostAllowed,
  type RequestHeaders,
  readAccess,
  readCookie,
  sameSecret,
  writeRefusal,
} from './security.js';

export interface GateOptions {
  token: string;
  /** Filled in once the server listens (the port is known then). */
  hosts: ReadonlySet<string>;
  port(): number;
  /** Headers of every answer (CSP and the rest). */
  headers: Readonly<Record<string, string>>;
  /** The page that holds the token, served only to the printed address. */
  bootPage: Buffer;
}

/** Whether the request may go on to the router; when not, the answer has been sent. */
export function passGate(g: GateOptions, req: IncomingMessage, res: ServerResponse): boolean {
  for (const [name, value] of Object.entries(g.headers)) res.setHeader(name, value);
  const headers = req.headers as RequestHeaders;
  if (!hostAllowed(headers.host, g.hosts)) {
    plain(res, 403, forbiddenHost(g.port()));
    return false;
  }
  const reading = req.method === 'GET' || req.method === 'HEAD';
  const url = parseUrl(req.url);
  const given = reading ? url?.searchParams.get('token') : undefined;
  if (url !== undefined && given !== undefined && given !== null) {
    if (!sameSecret(given, g.token)) {
      plain(res, 401, NEEDS_TOKEN);
      return false;
    }
    res.setHeader('set-cookie', readCookie(g.port(), g.token));
    res.setHeader('cache-control', 'no-store');
    if (url.pathname === '/') {
      // The page itself, not a redirect: its script keeps the token (never in a cookie) and takes it
      // out of the address bar.
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-length': g.bootPage.length });
      res.end(req.method === 'HEAD' ? undefined : g.bootPage);
      return false;
    }
    url.searchParams.delete('token');
    const rest = url.searchParams.toString();
    // One leading slash: `//host/…` (or `/\host`, which the URL parser turns into it) would send the
    // browser to another site.
    const path = `/${url.pathname.replace(/^\/+/, '')}`;
    res.writeHead(303, { location: `${path}${rest === '' ? '' : `?${rest}`}` });
    res.end();
    return false;
  }
  if (readAccess(headers, { hosts: g.hosts, token: g.token, port: g.port() }) !== 'ok') {
    plain(res, 401, NEEDS_TOKEN);
    return false;
  }
  if (
    sameSecret(headers['x-mediabatch-token'], g.token) &&
    !cookieHoldsKey(headers, { token: g.token, port: g.port() })
  ) {
    // The page holds the token but its cookie is gone or was overwritten by another local program (one
    // of the same name and path replaces ours): the page's next read gives its images the cookie back.
    res.setHeader('set-cookie', readCookie(g.port(), g.token));
  }
  if (!reading) {
    const refusal = writeRefusal(headers, { hosts: g.hosts, token: g.token });
    if (refusal !== undefined) {
      const body = JSON.stringify({ v: 1, error: refusal });
      res.writeHead(403, { 'content-type': 'application/json; charset=utf-8' });
      res.end(body);
      return false;
    }
  }
  return true;
}

/**
 * Node's answer to a request it cannot read at all (headers over its limit, a broken request line),
 * which never reaches the gate: the same headers, no echo of what was sent.
 */
export function clientErrorAnswer(headers: Readonly<Record<string, string>>) {
  return (error: Error & { code?: string }, socket: Duplex): void => {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const status =
      error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    const body = `${STATUS_CODES[status] ?? 'Bad Request'}\n`;
    const lines = Object.entries({
      ...headers,
      'content-type': 'text/plain; charset=utf-8',
      'content-length': String(Buffer.byteLength(body)),
      connection: 'close',
    }).map(([name, value]) => `${name}: ${value}\r\n`);
    if (socket.writable)
      socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${lines.join('')}\r\n${body}`);
    socket.destroy();
  };
}

const NEEDS_TOKEN = 'The view needs its token: open the address `mediabatch view` printed (…/?token=…).\n';

function forbiddenHost(port: number): string {
  return `This view answers only at http://127.0.0.1:${port}/ or http://localhost:${port}/ (or a tunnel to it on localhost): the Host header named another address.\n`;
}

function plain(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' });
  res.end(text);
}

/** The request's path and query; `//name/…` stays a path (resolved against a base it would be a host). */
function parseUrl(url: string | undefined): URL | undefined {
  const path = url ?? '/';
  try {
    return new URL(`http://view.invalid${path.startsWith('/') ? '' : '/'}${path}`);
  } catch {
    return undefined;
  }
}
