// Keeping the API key out of what users and files see. A server can echo the Authorization header
// back (debug pages, proxies), so any text that came from the API may hold it. Redaction happens at
// the edges — log lines, error messages, files — never on the outcomes the client returns: those
// carry ids and keys the program acts on, and rewriting them would corrupt a paid task's identity.

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

/** A function that removes every form of `secret` from a text, for one edge to apply to all it writes. */
export function createRedactor(secret: string): (text: string) => string {
  const forms = secretForms(secret);
  return (text) => redactText(text, forms);
}
