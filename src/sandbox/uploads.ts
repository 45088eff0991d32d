// Local `file:` inputs for a run against the embedded sandbox. The real service fetches inputs
// from links, so a run uploads them to a bucket first; the embedded sandbox lives in the run's own process,
// so it keeps them itself and serves them at /_sandbox/uploads/<key> on loopback: a manifest with local
// files runs with --sandbox and no bucket. It stands in for the bucket of inputs only, through the same
// Storage interface and upload code the run uses with a bucket; a real run still needs `storage:`.
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { PutResult, Storage } from '../storage/index.js';
import { sendBytes } from './media.js';

export const SANDBOX_UPLOADS_PATH = '/_sandbox/uploads';

interface Held {
  bytes: Buffer;
  contentType: string;
}

/** The inputs the embedded sandbox holds, by key (`inputs/<sha256><ext>`), for as long as it runs. */
export class SandboxUploads {
  readonly #held = new Map<string, Held>();

  has(key: string, bytes: number): boolean {
    return this.#held.get(key)?.bytes.length === bytes;
  }

  put(key: string, bytes: Buffer, contentType: string): void {
    this.#held.set(key, { bytes, contentType });
  }

  get(key: string): Held | undefined {
    return this.#held.get(key);
  }

  get size(): number {
    return this.#held.size;
  }
}

/** GET /_sandbox/uploads/<key>: an input the run gave the sandbox, to loopback clients only. */
export function routeUploads(
  app: FastifyInstance,
  uploads: SandboxUploads,
  isLoopback: (request: FastifyRequest) => boolean,
): void {
  app.get<{ Params: { '*': string } }>(`${SANDBOX_UPLOADS_PATH}/*`, async (request, reply: FastifyReply) => {
    // The user's own files: not for other machines, even when the sandbox listens on every address.
    if (!isLoopback(request)) return reply.code(403).type('text/plain').send('loopback clients only\n');
    const held = uploads.get(request.params['*']);
    if (!held) return reply.code(404).type('text/plain').send('no such upload\n');
    return sendBytes(request, reply, held.bytes, held.contentType);
  });
}

/** Not an error of the user's: the run asked the sandbox's input store for something only a bucket does. */
function onlyInputs(what: string): never {
  throw new Error(`internal: the embedded sandbox keeps local inputs only, not ${what}`);
}

async function readAll(body: Readable | Buffer): Promise<Buffer> {
  if (Buffer.isBuffer(body)) return body;
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** What a run against the embedded sandbox says once when it gives the sandbox its local inputs. */
export const SANDBOX_INPUTS_LINE =
  'Local inputs: kept by the embedded sandbox and linked from it (a run on the real service uploads them to the bucket of storage: in mediabatch.config.yaml)';

/** The sandboxes started in this process, by base URL: `run --sandbox` finds its own to give it its inputs. */
const embedded = new Map<string, SandboxUploads>();

export function registerEmbedded(baseUrl: string, uploads: SandboxUploads): () => void {
  embedded.set(baseUrl, uploads);
  return () => {
    if (embedded.get(baseUrl) === uploads) embedded.delete(baseUrl);
  };
}

/**
 * The input store of the sandbox this process runs at `baseUrl`, or undefined when none runs here (a
 * sandbox in another process cannot be handed files). `say` gets SANDBOX_INPUTS_LINE before the first upload.
 */
export function embeddedInputStorage(baseUrl: string, say?: (line: string) => void): Storage | undefined {
  const uploads = embedded.get(baseUrl);
  if (!uploads) return undefined;
  const storage = sandboxInputStorage(baseUrl, uploads);
  return { ...storage, check: async () => say?.(SANDBOX_INPUTS_LINE) };
}

/**
 * The embedded sandbox as the store of a run's local inputs: the upload code of src/run/runner/uploads.ts
 * puts each file once by its SHA-256 and links it at each POST, as with a bucket.
 */
export function sandboxInputStorage(baseUrl: string, uploads: SandboxUploads): Storage {
  const base = baseUrl.replace(/\/+$/, '');
  return {
    config: {
      bucket: 'embedded-sandbox',
      prefix: '',
      region: 'local',
      linkTtlSeconds: 24 * 3600,
      endpoint: base,
    },
    check: async () => {},
    inputKey: (sha256, ext) => `inputs/${sha256}${ext}`,
    async putIfAbsent(key, body, bytes, contentType): Promise<PutResult> {
      if (uploads.has(key, bytes)) return { key, uploaded: false };
      uploads.put(key, await readAll(body()), contentType ?? 'application/octet-stream');
      return { key, uploaded: true };
    },
    link: async (key) => `${base}${SANDBOX_UPLOADS_PATH}/${key.split('/').map(encodeURIComponent).join('/')}`,
    size: async (key) => uploads.get(key)?.bytes.length,
    getBytes: async (key) => uploads.get(key)?.bytes ?? onlyInputs(`a missing object ${key}`),
    putStream: () => onlyInputs('results'),
    copy: () => onlyInputs('copies of results'),
    listIncomplete: async () => [],
    abort: async () => true,
    // Inputs only: no report of shards is ever here to list.
    listNames: async () => [],
    destroy: () => {},
  };
}
