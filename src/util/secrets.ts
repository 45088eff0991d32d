// The API key must never reach logs, the state database, reports or error messages.
// Paths are redacted by pino; this scrubs the key's value wherever else it might hide.
// Every file the program writes passes through scrub() where its text leaves the process (src/util/fsatomic.ts,
// the bucket's text objects): a server that echoes the key, or a prompt the key was pasted into, must not
// put it on disk. The values the program acts on (the request sent to the API) keep it as written.

const registered = new Set<string>();
/** The longest form registered: a streamed writer holds back this many characters less one between pieces. */
let longest = 0;

/**
 * The forms a secret takes in the files we write: as is, URL-encoded, inside a JSON string (also with
 * `<>&` as \u escapes, as the gallery's script holds it), in a CSV field, and as HTML and Markdown text.
 */
function formsOf(secret: string): string[] {
  const json = JSON.stringify(secret).slice(1, -1);
  const forms = [
    secret,
    encodeURIComponent(secret),
    json,
    json.replace(/[<>&]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`),
    secret.replaceAll('"', '""'),
    secret.replace(
      /[&<>"']/g,
      (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c,
    ),
    secret.replace(/[\\`*[\]<>|~&_]/g, (c) => `\\${c}`),
  ];
  return [...new Set(forms)];
}

/** Remember a secret so that scrub() removes it from any text. Short values are ignored to avoid mangling text. */
export function registerSecret(value: string | undefined): void {
  if (!value || value.length < 6) return;
  for (const form of formsOf(value)) {
    registered.add(form);
    longest = Math.max(longest, form.length);
  }
}

export function scrub(text: string): string {
  let out = text;
  for (const secret of registered) {
    if (out.includes(secret)) out = out.split(secret).join('[redacted]');
  }
  return out;
}

/** scrub() for bytes written as they are (a Buffer of text): the same bytes when no secret is in them. */
export function scrubBytes(bytes: Buffer): Buffer {
  for (const secret of registered) {
    if (bytes.includes(secret)) return Buffer.from(scrub(bytes.toString('utf8')), 'utf8');
  }
  return bytes;
}

/**
 * Characters a streamed writer keeps back after scrubbing a piece, so that a secret cut in two by the
 * boundary between pieces is found whole in the next one.
 */
export function secretOverlap(): number {
  return Math.max(0, longest - 1);
}

/** For tests. */
export function forgetSecrets(): void {
  registered.clear();
  longest = 0;
}
