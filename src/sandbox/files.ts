// Result files behind `${baseUrl}/files/<token>` links that expire. A file is stored as a recipe
// and rendered when downloaded, so thousands of finished jobs cost no memory.
import { createHash } from 'node:crypto';

export type FileRecipe = { format: 'png' | 'mp4' } | { format: 'mp3' | 'wav'; seconds: number };

export const CONTENT_TYPES: Record<FileRecipe['format'], string> = {
  png: 'image/png',
  mp4: 'video/mp4',
  mp3: 'audio/mpeg',
  wav: 'audio/wav',
};

export interface StoredFile {
  recipe: FileRecipe;
  /** The job and item the file belongs to: what a sandbox image shows is read from its request. */
  jobId: string;
  index: number;
  /** Epoch ms after which the link answers 410. */
  expiresAt: number;
  /** The query token of the link jobs/detail hands out now (used under `link-403`); made when first asked for. */
  signature: string | null;
  /** Signatures that answer 403 for good: a stale signed link never comes back to life. */
  readonly revoked: Set<string>;
  /** Times the link was signed; each signing gives a new token. */
  signings: number;
}

export type FileLookup =
  | { ok: true; file: StoredFile }
  | { ok: false; reason: 'unknown' | 'expired' | 'stale' };

export class FileStore {
  readonly #files = new Map<string, StoredFile>();
  readonly #seed: number;
  readonly #staleFirstLink: boolean;

  /** `staleFirstLink`: the first link of each file is already stale (the `link-403` quirk). */
  constructor(seed: number, staleFirstLink = false) {
    this.#seed = seed;
    this.#staleFirstLink = staleFirstLink;
  }

  /**
   * Registers a file and returns its token. The token hangs off the seed, the job and the item, not
   * off the shared generator, so the order in which jobs are polled cannot change any job id.
   */
  add(jobId: string, index: number, recipe: FileRecipe, expiresAt: number): string {
    const token = createHash('sha256').update(`${this.#seed}:${jobId}:${index}`).digest('hex').slice(0, 32);
    this.#files.set(token, {
      recipe,
      jobId,
      index,
      expiresAt,
      signature: null,
      revoked: new Set(),
      signings: 0,
    });
    return token;
  }

  /** The signature a fresh jobs/detail puts on the link: the current one, or a new one once it went stale. */
  signature(token: string): string {
    const file = this.#files.get(token);
    if (!file) return '';
    file.signature ??= this.#sign(token, 0);
    if (file.revoked.has(file.signature)) {
      file.signings++;
      file.signature = this.#sign(token, file.signings);
    }
    return file.signature;
  }

  /** `signature` is the link's query token; it only matters when the first link is stale. */
  lookup(token: string, nowMs: number, signature?: string): FileLookup {
    const file = this.#files.get(token);
    if (!file) return { ok: false, reason: 'unknown' };
    if (nowMs >= file.expiresAt) return { ok: false, reason: 'expired' };
    if (this.#staleFirstLink) {
      file.signature ??= this.#sign(token, 0);
      if (signature === undefined || signature !== file.signature || file.revoked.has(signature)) {
        return { ok: false, reason: 'stale' };
      }
      if (file.signings === 0) {
        // The first download finds the link stale, as a CDN does when a signature outlives its key.
        file.revoked.add(signature);
        return { ok: false, reason: 'stale' };
      }
    }
    return { ok: true, file };
  }

  #sign(token: string, signings: number): string {
    return createHash('sha256').update(`sig:${this.#seed}:${token}:${signings}`).digest('hex').slice(0, 24);
  }
}
