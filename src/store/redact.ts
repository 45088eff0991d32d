// Result links are signed URLs: whoever holds one can fetch the result until it expires. The state
// database keeps where a file came from, never the signature.

/** The host of a link, or null when it is not an http(s) URL. */
export function hostOf(url: string): string | null {
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'http:' || parsed.protocol === 'https:' ? parsed.host : null;
  } catch {
    return null;
  }
}

/** A copy of a JSON value in which every http(s) link has lost its query string and fragment. */
export function withoutSignedQueries(value: unknown): unknown {
  if (typeof value === 'string') return stripQuery(value);
  if (Array.isArray(value)) return value.map(withoutSignedQueries);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withoutSignedQueries(v)]));
  }
  return value;
}

function stripQuery(text: string): string {
  if (!/^https?:\/\//i.test(text)) return text;
  try {
    const url = new URL(text);
    if (url.search === '' && url.hash === '' && url.username === '' && url.password === '') return text;
    return `${url.protocol}//${url.host}${url.pathname}`;
  } catch {
    return text;
  }
}
