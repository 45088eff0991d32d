// A server can echo the Authorization header back (debug pages, proxies). Everything the client
// returns passes through here, so the API key cannot leave this module by that route either.

export const REDACTED = '[redacted]';

/** The forms of a secret that could show up in text: as is, and URL-encoded. */
export function secretForms(secret: string): string[] {
  const forms = new Set([secret, encodeURIComponent(secret)]);
  return [...forms].filter((s) => s.length > 0);
}

export function redactText(text: string, forms: readonly string[]): string {
  let out = text;
  for (const form of forms) if (out.includes(form)) out = out.split(form).join(REDACTED);
  return out;
}

/** A copy of plain JSON-like data with every string (keys too) redacted. */
export function redactDeep<T>(value: T, forms: readonly string[]): T {
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return redactText(v, forms);
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object') {
      return Object.fromEntries(Object.entries(v).map(([k, inner]) => [redactText(k, forms), walk(inner)]));
    }
    return v;
  };
  // The walk keeps the shape; only string contents change.
  return walk(value) as T;
}
