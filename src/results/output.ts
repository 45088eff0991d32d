// Where a run's results go: a local folder, or a bucket (`output: s3://bucket/prefix`, or `output: storage`
// for the bucket of the account's `storage:` settings). Pure: names and configuration, no I/O.

import { join, resolve } from 'node:path';
import { MediabatchError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import { resultsRunId } from '../plan/shard.js';
import { parseS3Url, type StorageConfig } from '../storage/config.js';
import { isPostgresUrl } from '../store/location.js';

/** A run folder in a bucket is named `s3://bucket/prefix/run`. */
export function isBucketLocation(location: string): boolean {
  return /^s3:\/\//i.test(location);
}

/**
 * `<output>/<run>`: a path on disk, or `s3://bucket/prefix/run`. The shards of a run (`<run>.shard-1-of-3`)
 * share their run's folder: each writes only its own tasks' folders and its own report files.
 */
export function runLocation(output: string, runId: string): string {
  const folder = resultsRunId(runId);
  return isBucketLocation(output) ? `${output.replace(/\/+$/, '')}/${folder}` : join(output, folder);
}

export class OutputError extends MediabatchError {
  override name = 'OutputError';
  override readonly exitCode = EXIT.invalid;
}

/**
 * The manifest's output with `storage` made the account's bucket (`s3://bucket/prefix`), and the bucket's
 * settings for a bucket output: its endpoint, region and links from `storage:` when set, the bucket and
 * prefix from the output. Undefined settings for a local folder.
 */
export function resolveOutput(
  output: string,
  storage: StorageConfig | undefined,
  env: NodeJS.ProcessEnv,
): { output: string; bucket?: StorageConfig } {
  if (output === 'storage') {
    if (!storage) {
      throw new OutputError(
        'output: storage puts the results in the bucket of storage: in mediabatch.config.yaml, and none is set: add storage: { url: s3://bucket/prefix } (or set MEDIABATCH_STORAGE_URL), or give output a folder',
      );
    }
    const url = `s3://${storage.bucket}${storage.prefix === '' ? '' : `/${storage.prefix}`}`;
    return { output: url, bucket: storage };
  }
  if (!isBucketLocation(output)) return { output };
  const parsed = parseS3Url(output);
  if (!parsed)
    throw new OutputError(`output must be s3://bucket or s3://bucket/prefix, got ${JSON.stringify(output)}`);
  // Without storage: (no url), the endpoint and region may still be in the environment: a MinIO or R2
  // user who only wants results in a bucket sets those two, and must not be sent to AWS instead.
  const endpoint = env['MEDIABATCH_STORAGE_ENDPOINT'] || undefined;
  if (!storage && endpoint !== undefined && !/^https?:\/\//.test(endpoint)) {
    throw new OutputError(
      `MEDIABATCH_STORAGE_ENDPOINT must be an http or https URL, got ${JSON.stringify(endpoint)}`,
    );
  }
  const base: StorageConfig = storage ?? {
    bucket: parsed.bucket,
    prefix: parsed.prefix,
    region: env['MEDIABATCH_STORAGE_REGION'] || env['AWS_REGION'] || 'us-east-1',
    linkTtlSeconds: 24 * 3600,
    ...(endpoint !== undefined ? { endpoint } : {}),
  };
  return { output, bucket: { ...base, bucket: parsed.bucket, prefix: parsed.prefix } };
}

/**
 * Workers of a PostgreSQL state may run on many machines, each writing its results to its own disk: a
 * bucket is the fleet's output, a local folder only when the caller says the workers share it (`allow`
 * names that switch as the caller spells it: `--allow-local-output`, `allowLocalOutput: true`).
 */
export function refuseLocalOutputOfFleet(
  state: string,
  output: { output: string; bucket?: StorageConfig },
  opts: { allowed: boolean; allow: string; shown?: (path: string) => string },
): void {
  if (!isPostgresUrl(state) || output.bucket !== undefined || opts.allowed) return;
  const folder = opts.shown ? opts.shown(output.output) : output.output;
  throw new OutputError(
    `output: ${folder} is a local folder, and the state is in PostgreSQL, where workers on other machines would write their results to their own disks: use a bucket (output: s3://bucket/prefix, or output: storage), or pass ${opts.allow} when every worker shares this disk`,
  );
}

/** What `run --sandbox` says when `output: storage` has no bucket and the results go to a folder instead. */
export const SANDBOX_OUTPUT_LINE =
  'Output: storage has no bucket set, so with --sandbox the results go to the folder out/ (a run on the real service needs storage: in mediabatch.config.yaml)';

/**
 * A run against the embedded sandbox with `output: storage` and no bucket: the results go to the folder
 * `out` (the manifest's default) and the run says so, so that an example written for a bucket can be
 * tried without one. Any other output, or a bucket that is set, is used as written.
 */
export function sandboxOutput(
  output: string,
  storage: StorageConfig | undefined,
  cwd: string,
): { output: string; line?: string } {
  if (output !== 'storage' || storage !== undefined) return { output };
  return { output: resolve(cwd, 'out'), line: SANDBOX_OUTPUT_LINE };
}
