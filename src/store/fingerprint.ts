import { createHash } from 'node:crypto';

/**
 * A short, stable name for an API key, so the ledger can count spend per key without storing it.
 * Salted with a fixed prefix so the fingerprint is not a plain sha256 of the key that could be looked up.
 */
export function keyFingerprint(apiKey: string): string {
  return createHash('sha256').update(`mediabatch:${apiKey}`).digest('hex').slice(0, 12);
}

/** sha256 hex of the exact bytes sent on the wire, so an edited request is never mistaken for the old one. */
export function bodyHash(wireBody: string): string {
  return createHash('sha256').update(wireBody, 'utf8').digest('hex');
}
