// Who may talk to the view: the Host header (DNS rebinding), then two capabilities. The token (printed
// in the address, or a Bearer header) reads and writes; the read key, derived from it one way, is all the
// cookie carries, because a browser sends its cookies for 127.0.0.1 to every port of it (docs/view.md,
// "Threat model"). Writes take the token in a header plus a same-origin request. Pure functions of the
// request's headers, so each rule is tested alone and the server only wires them.

import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** 32 random bytes, URL-safe: printed once in the address, never logged elsewhere. */
export function newToken(): string {
  return randomBytes(32).toString('base64url');
}

/** Compares without leaking where two strings differ. */
export function sameSecret(given: string | undefined, token: string): boolean {
  if (given === undefined) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The cookie's name carries the port: two views on one machine share the browser's cookie jar. */
export function cookieName(port: number): string {
  return `mediabatch_view_${port}`;
}

/**
 * The read key: what the cookie holds. Whoever has the token can make it; whoever has only the key
 * (any program on another local port the browser visits) cannot work back to the token.
 */
export function readKey(token: string): string {
  return createHmac('sha256', token).update('mediabatch view: read only').digest('base64url');
}

/** The Set-Cookie value after `?token=`: the read key only, out of reach of script and of other sites. */
export function readCookie(port: number, token: string): string {
  return `${cookieName(port)}=${readKey(token)}; HttpOnly; SameSite=Strict; Path=/`;
}

/**
 * Every value a Cookie header gives one name: a cookie of the same name set by another program on
 * 127.0.0.1 (another port, another path) is sent beside ours, often first, and must not hide it.
 */
export function cookieValues(header: string | undefined, name: string): string[] {
  if (header === undefined) return [];
  const values: string[] = [];
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) values.push(part.slice(eq + 1).trim());
  }
  return values;
}

/**
 * Whether a Host header names this server: a loopback name (any port: an SSH tunnel forwards another
 * local port to it) or the bound address with its port. A DNS-rebinding page sends its own name.
 */
export function hostAllowed(host: string | undefined, hosts: ReadonlySet<string>): boolean {
  if (host === undefined) return false;
  const h = host.toLowerCase();
  if (hosts.has(h)) return true;
  return /^(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?$/.test(h);
}

/** The Host values a browser sends for this server: the bound address, loopback names, with the port. */
export function allowedHosts(boundHost: string, port: number): Set<string> {
  const hosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);
  const bound = boundHost.includes(':') && !boundHost.startsWith('[') ? `[${boundHost}]` : boundHost;
  // 0.0.0.0 is not an address anyone browses to: the machine's own names are named with --host.
  if (bound !== '0.0.0.0' && bound !== '[::]') hosts.add(`${bound}:${port}`);
  return hosts;
}

export interface RequestHeaders {
  host?: string | undefined;
  authorization?: string | undefined;
  cookie?: string | undefined;
  origin?: string | undefined;
  'sec-fetch-site'?: string | undefined;
  'x-mediabatch-token'?: string | undefined;
}

export type Access = 'ok' | 'bad-host' | 'no-token';

/**
 * Whether a read may be served: a known Host, then the token (a Bearer header, or the header the page
 * sends, so that its reads go on when another program overwrote the cookie) or the read key in a cookie.
 */
export function readAccess(
  headers: RequestHeaders,
  o: { hosts: ReadonlySet<string>; token: string; port: number },
): Access {
  if (!hostAllowed(headers.host, o.hosts)) return 'bad-host';
  const bearer = /^Bearer\s+(\S+)$/i.exec(headers.authorization ?? '')?.[1];
  if (sameSecret(bearer, o.token) || sameSecret(headers['x-mediabatch-token'], o.token)) return 'ok';
  return cookieHoldsKey(headers, o) ? 'ok' : 'no-token';
}

/** Whether one of the cookies of the view's name holds the read key. */
export function cookieHoldsKey(headers: RequestHeaders, o: { token: string; port: number }): boolean {
  const key = readKey(o.token);
  return cookieValues(headers.cookie, cookieName(o.port)).some((v) => sameSecret(v, key));
}

/**
 * Whether a write (POST: decisions) may be served, on top of readAccess: the token in the
 * `X-Mediabatch-Token` header (the cookie holds only the read key, and is sent to any local port), and a
 * same-origin request (Origin, when the browser sends it, names this server; Sec-Fetch-Site, when sent,
 * says same-origin). Returns the reason it may not, or undefined when it may.
 */
export function writeRefusal(
  headers: RequestHeaders,
  o: { hosts: ReadonlySet<string>; token: string },
): string | undefined {
  if (!sameSecret(headers['x-mediabatch-token'], o.token))
    return 'the X-Mediabatch-Token header is missing or wrong';
  const site = headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin') return `a ${site} request may not change a run`;
  const origin = headers.origin;
  if (origin !== undefined) {
    let host: string;
    try {
      const url = new URL(origin);
      host = url.protocol === 'http:' ? url.host : '';
    } catch {
      host = '';
    }
    // Same origin: the page that sends it was served by this very address.
    if (host === '' || host.toLowerCase() !== headers.host?.toLowerCase()) {
      return `requests from ${origin} may not change a run`;
    }
  }
  return undefined;
}

/** Headers on every answer: a strict CSP (no inline script, this server only), no sniffing, no referrer. */
export function securityHeaders(extraMediaOrigins: readonly string[] = []): Record<string, string> {
  const media = ["'self'", ...extraMediaOrigins].join(' ');
  return {
    'content-security-policy': [
      "default-src 'none'",
      "script-src 'self'",
      "style-src 'self'",
      `img-src ${media}`,
      `media-src ${media}`,
      "connect-src 'self'",
      "font-src 'self'",
      "base-uri 'none'",
      "form-action 'none'",
      "frame-ancestors 'none'",
    ].join('; '),
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
    'cross-origin-opener-policy': 'same-origin',
    'cross-origin-resource-policy': 'same-origin',
  };
}
