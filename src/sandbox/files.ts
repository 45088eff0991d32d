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
  /** Epoch ms after which the link answers 410. */
  expiresAt: number;
}

export type FileLookup = { ok: true; file: StoredFile } | { ok: false; reason: 'unknown' | 'expired' };

export class FileStore {
  readonly #files = new Map<string, StoredFile>();
  readonly #seed: number;

  constructor(seed: number) {
    this.#seed = seed;
  }

  /**
   * Registers a file and returns its token. The token hangs off the seed, the job and the item, not
   * off the shared generator, so the order in which jobs are polled cannot change any job id.
   */
  add(jobId: string, index: number, recipe: FileRecipe, expiresAt: number): string {
    const token = createHash('sha256').update(`${this.#seed}:${jobId}:${index}`).digest('hex').slice(0, 32);
    this.#files.set(token, { recipe, expiresAt });
    return token;
  }

  lookup(token: string, nowMs: number): FileLookup {
    const file = this.#files.get(token);
    if (!file) return { ok: false, reason: 'unknown' };
    if (nowMs >= file.expiresAt) return { ok: false, reason: 'expired' };
    return { ok: true, file };
  }
}
