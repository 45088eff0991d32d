import * as crypto from 'node:crypto';
import { createHash } from 'node:crypto';

// One call instead of a Hash object per body: a third of the time over a million tasks (Node >= 20.12).
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'hex') => string }).hash;

/**
 * A short, stable name for an API key, so the ledger can count spend per key without storing it.
 * Salted with a fixed prefix so the fingerprint is not a plain sha256 of the key that could be looked up.
 */
export function keyFingerprint(apiKey: string): string {
  return createHash('sha256').update(`mediabatch:${apiKey}`).digest('hex').slice(0, 12);
}

/** sha256 hex of the exact bytes sent on the wire, so an edited request is never mistaken for the old one. */
export function bodyHash(wireBody: string): string {
  return oneShot
    ? oneShot('sha256', wireBody, 'hex')
    : createHash('sha256').update(wireBody, 'utf8').digest('hex');
}
