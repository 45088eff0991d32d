// The API key must never reach logs, the state database, reports or error messages.
// Paths are redacted by pino; this scrubs the key's value wherever else it might hide.

const registered = new Set<string>();

/** Remember a secret so that scrub() removes it from any text. Short values are ignored to avoid mangling text. */
export function registerSecret(value: string | undefined): void {
  if (value && value.length >= 6) registered.add(value);
}

export function scrub(text: string): string {
  let out = text;
  for (const secret of registered) {
    if (out.includes(secret)) out = out.split(secret).join('[redacted]');
  }
  return out;
}

/** For tests. */
export function forgetSecrets(): void {
  registered.clear();
}
