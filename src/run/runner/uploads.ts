// Local input files on their way to the API: each distinct file is uploaded once (its bucket key is its
// SHA-256, so a rerun or another manifest finds it there and uploads nothing), a few at a time, retried;
// then, just before each POST, every `file:` value of the request becomes a link fresh for link_ttl.
// What is stored as the task's request keeps `file:path`, never the link: a new link each time must not
// make a resumed task look "changed" (the callback URL precedent: added when sending, never stored).
import { createReadStream } from 'node:fs';
import pLimit from 'p-limit';
import { findEntry } from '../../catalog/index.js';
import { MediabatchError } from '../../errors.js';
import { EXIT } from '../../exit-codes.js';
import {
  checkLocalInput,
  type LocalInput,
  LocalInputError,
  localRefsIn,
  replaceLocalRefs,
  sha256File,
} from '../../media/local-input.js';
import type { MediaKind } from '../../media/types.js';
import { localInputKind } from '../../plan/local-inputs.js';
import { type Storage, StorageError } from '../../storage/index.js';
import type { Store } from '../../store/index.js';
import { RunError } from '../session.js';
import type { RunnerOptions } from './types.js';

export interface UploadedInput {
  key: string;
  sha256: string;
  /** False when the bucket already had it. */
  uploaded: boolean;
  /** The state database says it was uploaded before: the bucket was not even asked. */
  recorded?: boolean;
}

export interface UploadOptions {
  concurrency?: number;
  /** Attempts per file for transient failures (network, 5xx). */
  attempts?: number;
  sleep?: (ms: number) => Promise<void>;
  onProgress?: (done: number, total: number, input: LocalInput, result: UploadedInput) => void;
  /** Objects uploaded before (the state database): found there, a file is not sent to the bucket again. */
  known?: {
    has(key: string, sha256: string, bytes: number): boolean;
    record(key: string, sha256: string, bytes: number): void;
  };
}

/**
 * Uploads every distinct file (by content) once; returns the bucket key for each path as written.
 * A failure that retrying cannot fix (credentials, bucket) throws at once: no task has been sent yet.
 */
export async function uploadLocalInputs(
  storage: Storage,
  inputs: readonly LocalInput[],
  opts: UploadOptions = {},
): Promise<Map<string, UploadedInput>> {
  const limit = pLimit(opts.concurrency ?? 4);
  const attempts = opts.attempts ?? 4;
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const byReal = new Map<string, Promise<UploadedInput | undefined>>();
  const byPath = new Map<string, UploadedInput>();
  let done = 0;
  const distinct = [...new Map(inputs.map((i) => [i.real, i])).values()];
  // Two paths with the same bytes share one upload: the put is keyed by content, not by path.
  const puts = new Map<string, Promise<boolean>>();
  const put = async (key: string, input: LocalInput): Promise<boolean> => {
    for (let attempt = 1; ; attempt++) {
      try {
        const done = await storage.putIfAbsent(
          key,
          () => createReadStream(input.real),
          input.bytes,
          input.contentType,
        );
        return done.uploaded;
      } catch (error) {
        if (!(error instanceof StorageError) || !error.transient || attempt >= attempts) throw error;
        await sleep(250 * 2 ** (attempt - 1));
      }
    }
  };
  const one = async (input: LocalInput): Promise<UploadedInput> => {
    const sha256 = await sha256File(input.real);
    const key = storage.inputKey(sha256, input.ext);
    // The state database says an earlier run put it there; the bucket is still asked (one HEAD, no
    // body): a lifecycle rule or a person may have deleted it since, and a link to a missing object
    // would have the task refused at every run.
    const recorded = opts.known?.has(key, sha256, input.bytes) ?? false;
    const first = !puts.has(key);
    if (first) puts.set(key, put(key, input));
    const uploaded = first && (await (puts.get(key) as Promise<boolean>));
    if (!first) await puts.get(key);
    if (first && !recorded) opts.known?.record(key, sha256, input.bytes);
    return { key, sha256, uploaded, ...(recorded && !uploaded ? { recorded: true } : {}) };
  };
  // After the first failure the files not yet started fail at once; those under way are waited for, so that nothing
  // is left running (or rejecting unobserved) when the run stops before its first POST.
  let failure: { error: unknown } | undefined;
  for (const input of distinct) {
    byReal.set(
      input.real,
      limit(async () => {
        if (failure) throw failure.error;
        const result = await one(input);
        done += 1;
        opts.onProgress?.(done, distinct.length, input, result);
        return result;
      }).catch((error: unknown) => {
        failure ??= { error };
        return undefined;
      }),
    );
  }
  await Promise.all(byReal.values());
  if (failure) throw failure.error;
  for (const input of inputs) {
    byPath.set(input.path, (await byReal.get(input.real)) as UploadedInput);
  }
  return byPath;
}

/**
 * The request as sent: each `file:` value replaced by a link valid link_ttl from now. Called once per
 * POST, so a resumed run never sends a link signed in an earlier session.
 */
export async function withInputLinks(
  body: Record<string, unknown>,
  uploaded: ReadonlyMap<string, UploadedInput>,
  storage: Storage,
): Promise<Record<string, unknown>> {
  return replaceLocalRefs(body, ({ field, path }) => {
    const input = uploaded.get(path);
    if (!input) throw new Error(`internal: ${field}: file:${path} was not uploaded before sending`);
    return storage.link(input.key);
  });
}

/** `run` with local inputs and no bucket: refused before the first POST, saying how to configure one. */
export const NO_STORAGE_MESSAGE =
  'this manifest has local file: inputs and run must upload them: add storage: { url: s3://bucket/prefix } to mediabatch.config.yaml (or set MEDIABATCH_STORAGE_URL) with AWS credentials in the environment';

export class NoStorageError extends MediabatchError {
  override name = 'NoStorageError';
  override readonly exitCode = EXIT.invalid;
}

/** Every local input of these stored requests (media fields only), as (path, kind) pairs, distinct. */
export function localInputsOf(
  requests: Iterable<{ body: Record<string, unknown>; mediaKinds: ReadonlyMap<string, MediaKind> }>,
): Array<{ path: string; kind: MediaKind }> {
  const seen = new Map<string, MediaKind>();
  for (const { body, mediaKinds } of requests) {
    for (const { field, path } of localRefsIn(body)) {
      if (!seen.has(path)) seen.set(path, mediaKinds.get(field) ?? 'image');
    }
  }
  return [...seen].map(([path, kind]) => ({ path, kind }));
}

/**
 * Before the first POST: refuse without storage, check and upload every local input once, and return
 * the function the runner calls at each POST. Nothing is sent to the API until this has succeeded.
 */
export async function prepareLocalInputs(
  storage: Storage | undefined,
  dir: string,
  wanted: ReadonlyArray<{ path: string; kind: MediaKind }>,
  opts: UploadOptions & { allowOutside?: boolean } = {},
): Promise<RunnerOptions['inputLinks']> {
  if (wanted.length === 0) return undefined;
  if (!storage) throw new NoStorageError(NO_STORAGE_MESSAGE);
  const inputs: LocalInput[] = [];
  for (const w of wanted) {
    inputs.push(
      await checkLocalInput(dir, w.path, w.kind, {
        maxBytes: Number.POSITIVE_INFINITY,
        ...(opts.allowOutside ? { allowOutside: true } : {}),
      }),
    );
  }
  await storage.check();
  const uploaded = await uploadLocalInputs(storage, inputs, opts);
  return (body) => withInputLinks(body, uploaded, storage);
}

/**
 * For `run`: the local inputs of the run's unfinished tasks, uploaded, and the link function for the
 * runner; undefined when the run has no local inputs. `dir` is the manifest's folder.
 */
export async function runInputLinks(
  store: Store,
  runId: string,
  dir: string,
  storage: Storage | undefined,
  opts: UploadOptions & { allowOutside?: boolean } = {},
): Promise<RunnerOptions['inputLinks']> {
  const requests: Array<{ body: Record<string, unknown>; mediaKinds: Map<string, MediaKind> }> = [];
  // Only the pending requests that mention a file are read: a run of a million tasks is not loaded.
  for (const task of store.uploads.pendingRequestsWith(runId, 'file')) {
    if (!task.body.includes('file:') && !task.body.includes('"file"')) continue;
    const body = JSON.parse(task.body) as Record<string, unknown>;
    const entry = findEntry(task.model);
    requests.push({ body, mediaKinds: new Map(Object.keys(body).map((f) => [f, localInputKind(entry, f)])) });
  }
  const where = `${storage?.config.endpoint ?? 'aws'} ${storage?.config.bucket ?? ''}`;
  const known: UploadOptions['known'] = {
    has: (key, sha256, bytes) => store.uploads.hasUpload(where, key, sha256, bytes),
    record: (key, sha256, bytes) => store.uploads.recordUpload({ storage: where, key, sha256, bytes }),
  };
  return prepareLocalInputs(storage, dir, localInputsOf(requests), { known, ...opts });
}

/**
 * For runs without a terminal (the scheduler, `run()` in the library): the local inputs uploaded and the
 * link function, or the problem as a RunError (exit 1, or 5 for refused storage credentials).
 */
export async function unattendedInputLinks(
  store: Store,
  runId: string,
  dir: string,
  storage: Storage | undefined,
): Promise<RunnerOptions['inputLinks']> {
  try {
    return await runInputLinks(store, runId, dir, storage);
  } catch (error) {
    if (error instanceof NoStorageError || error instanceof LocalInputError) {
      throw new RunError('invalid', error.message);
    }
    if (error instanceof StorageError) {
      throw new RunError(error.exitCode === EXIT.unauthorized ? 'unauthorized' : 'invalid', error.message);
    }
    throw error;
  }
}
