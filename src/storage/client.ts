// The only module that speaks S3 (AWS S3, R2, B2, Wasabi, MinIO, GCS interoperability). Everything else
// sees Storage: put a file by its SHA-256 once, give a link the API can GET, stream a result in, clean up
// multipart uploads a killed run left behind.
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CopyObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  type ListMultipartUploadsCommandOutput,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { MediabatchError } from '../errors.js';
import { EXIT, type ExitCode } from '../exit-codes.js';
import type { StorageConfig } from './config.js';

/**
 * A storage failure the user fixes (credentials, bucket, endpoint): a one-line message and the exit code.
 * Wrong or missing credentials exit 5 like a refused API key; a missing bucket or an unreachable
 * endpoint is a configuration to fix before anything is charged: exit 1.
 */
export class StorageError extends MediabatchError {
  override readonly exitCode: ExitCode;
  /** Worth retrying (network blip, 5xx, throttling). */
  readonly transient: boolean;

  constructor(message: string, exitCode: ExitCode, transient = false) {
    super(message);
    this.name = 'StorageError';
    this.exitCode = exitCode;
    this.transient = transient;
  }
}

const CREDENTIAL_CODES = new Set([
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'AccessDenied',
  'InvalidToken',
  'ExpiredToken',
  'CredentialsProviderError',
  'Forbidden',
]);
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
]);

interface SdkLikeError {
  name?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
  cause?: unknown;
}

/** One line naming what to fix; never the secret (the SDK's messages do not carry it, and we add none). */
export function describeStorageError(error: unknown, config: StorageConfig): StorageError {
  if (error instanceof StorageError) return error;
  const e = (error ?? {}) as SdkLikeError;
  const name = e.name ?? '';
  const status = e.$metadata?.httpStatusCode;
  const where = config.endpoint ?? `S3 (${config.region})`;
  const netCode = e.code ?? (e.cause as SdkLikeError | undefined)?.code;
  if (netCode !== undefined && NETWORK_CODES.has(netCode)) {
    return new StorageError(
      `cannot reach the storage endpoint ${where} (${netCode}); check storage.endpoint and your network`,
      EXIT.invalid,
      true,
    );
  }
  if (name === 'NoSuchBucket' || (name === 'NotFound' && status === 404 && e.message === 'NoSuchBucket')) {
    return new StorageError(
      `bucket ${config.bucket} does not exist at ${where}; create it or fix storage.url`,
      EXIT.invalid,
    );
  }
  if (name === 'CredentialsProviderError') {
    // Nothing was refused: the SDK's chain found no credentials anywhere, so no request was sent.
    return new StorageError(
      `no storage credentials for bucket ${config.bucket} at ${where}: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE (or ~/.aws/credentials)`,
      EXIT.unauthorized,
    );
  }
  if (CREDENTIAL_CODES.has(name) || status === 403 || /credential/i.test(name)) {
    return new StorageError(
      `storage credentials refused by ${where} for bucket ${config.bucket} (${name && name !== 'Unknown' ? name : `HTTP ${status}`}); set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE`,
      EXIT.unauthorized,
    );
  }
  const transient = status === undefined || status >= 500 || status === 429 || name === 'TimeoutError';
  return new StorageError(
    `storage error from ${where} for bucket ${config.bucket}: ${name || 'error'}${status ? ` (HTTP ${status})` : ''}`,
    EXIT.invalid,
    transient,
  );
}

export interface PutResult {
  key: string;
  /** False when an object with this content was already there. */
  uploaded: boolean;
}

export interface ResultUpload {
  key: string;
  bytes: number;
  sha256: string;
}

export interface IncompleteUpload {
  key: string;
  uploadId: string;
}

export interface Storage {
  readonly config: StorageConfig;
  /** Fails with a StorageError when the bucket is missing, the credentials wrong or the endpoint down. */
  check(): Promise<void>;
  /** The key an input of this content lives at: `<prefix>/inputs/<sha256><ext>`. */
  inputKey(sha256: string, ext: string): string;
  /** Uploads unless an object of this content already exists under its content-addressed key. */
  putIfAbsent(
    key: string,
    body: () => Readable | Buffer,
    bytes: number,
    contentType?: string,
  ): Promise<PutResult>;
  /** A GET link valid for at least link_ttl from now (or the public link under public_base). */
  link(key: string): Promise<string>;
  /** Streams a result into `key` (multipart above partSize), verifying its SHA-256 and size on the way. */
  putStream(
    key: string,
    body: Readable,
    opts?: { expectedBytes?: number; contentType?: string; signal?: AbortSignal },
  ): Promise<ResultUpload>;
  /** Multipart uploads under a prefix that a killed run left unfinished ([] where the server cannot list them). */
  listIncomplete(prefix: string): Promise<IncompleteUpload[]>;
  /**
   * Aborts a multipart upload: true when it is gone (aborted now, or already completed or aborted),
   * false when the server cannot abort one (s3rver, some gateways): its parts stay until the bucket's
   * lifecycle rule, and it is still no object, so no result reads it.
   */
  abort(upload: IncompleteUpload): Promise<boolean>;
  /** Size of an object, or undefined when absent. */
  size(key: string): Promise<number | undefined>;
  /**
   * Copies an object inside the bucket, server-side (no bytes through this process; one request, so up to
   * the 5 GB a single CopyObject takes). False when `from` is absent (already moved, or never there).
   */
  copy(from: string, to: string): Promise<boolean>;
  getBytes(key: string): Promise<Buffer>;
  /** The keys of the objects directly under a prefix (`prefix/name`, not in deeper folders). */
  listNames(prefix: string): Promise<string[]>;
  destroy(): void;
}

export interface StorageOptions {
  /** Part size for multipart uploads (S3 minimum 5 MiB). */
  partSize?: number;
  queueSize?: number;
  /** The clock links are signed with (tests sign "in the past" to get an expired link). */
  now?: () => Date;
  /**
   * The environment the CLI was given (io.env). Its AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/
   * AWS_SESSION_TOKEN are used when set; otherwise the SDK's default chain (process env, shared files,
   * profiles, SSO, instance roles) supplies credentials.
   */
  env?: NodeJS.ProcessEnv;
}

const MIB = 1024 * 1024;

const SILENT_LOGGER = {
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/** Joins key parts with '/', skipping empty ones. */
export function joinKey(...parts: string[]): string {
  return parts
    .map((p) => p.replace(/^\/+|\/+$/g, ''))
    .filter((p) => p !== '')
    .join('/');
}

/** One S3 client for the bucket's settings; credentials from `env` when given there, else the SDK's chain. */
function s3ClientFor(config: StorageConfig, env: NodeJS.ProcessEnv | undefined): S3Client {
  // Credentials: not given here on purpose, so the SDK's default chain (env, shared file, profile,
  // SSO, instance role) supplies them and we never hold or print them.
  const id = env?.['AWS_ACCESS_KEY_ID'];
  const secret = env?.['AWS_SECRET_ACCESS_KEY'];
  const token = env?.['AWS_SESSION_TOKEN'];
  return new S3Client({
    region: config.region,
    ...(id && secret
      ? {
          credentials: {
            accessKeyId: id,
            secretAccessKey: secret,
            ...(token ? { sessionToken: token } : {}),
          },
        }
      : {}),
    ...(config.endpoint !== undefined ? { endpoint: config.endpoint, forcePathStyle: true } : {}),
    // Third-party S3 servers (R2, MinIO, s3rver, B2) reject or ignore the CRC checksums the SDK adds by
    // default since 3.729; send and check them only when an operation requires it. We verify SHA-256 ourselves.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    maxAttempts: 3,
    // Silent, as the SDK's default logger is, but without its one exception: a failed request with a
    // stream body (an input file's PUT) is not retried by the SDK, which then console.warn()s "An error
    // was encountered in a non-retryable streaming request." into the middle of the run's display. Our
    // own retry (src/run/runner/uploads.ts) retries it and says what failed, in one line, if it must.
    logger: SILENT_LOGGER,
  });
}

/**
 * Long on purpose: the Storage interface over one S3 client, its methods side by side as a class's would
 * be, each short and read on its own (a class would only add `this.`).
 */
export function createStorage(config: StorageConfig, opts: StorageOptions = {}): Storage {
  const client = s3ClientFor(config, opts.env);
  const bucket = config.bucket;
  const partSize = Math.max(5 * MIB, opts.partSize ?? 8 * MIB);
  const queueSize = opts.queueSize ?? 4;
  const wrap = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (error) {
      throw describeStorageError(error, config);
    }
  };
  const size = (key: string) =>
    wrap(async () => {
      try {
        const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
        return head.ContentLength ?? 0;
      } catch (error) {
        const e = error as SdkLikeError;
        if (e.$metadata?.httpStatusCode === 404 && e.name !== 'NoSuchBucket') {
          // A 404 on HEAD has no body, so a missing bucket looks like a missing key: ask the bucket.
          await client.send(new HeadBucketCommand({ Bucket: bucket })).catch((b: SdkLikeError) => {
            if (b.$metadata?.httpStatusCode === 404) throw Object.assign(b, { name: 'NoSuchBucket' });
            throw b;
          });
          return undefined;
        }
        throw error;
      }
    });

  return {
    config,
    check: () =>
      wrap(async () => {
        try {
          await client.send(new HeadBucketCommand({ Bucket: bucket }));
        } catch (error) {
          const e = error as SdkLikeError;
          if (e.$metadata?.httpStatusCode === 404) throw Object.assign(e, { name: 'NoSuchBucket' });
          throw error;
        }
      }),
    inputKey: (sha256, ext) => joinKey(config.prefix, 'inputs', `${sha256}${ext}`),
    async putIfAbsent(key, body, bytes, contentType) {
      const existing = await size(key);
      if (existing === bytes) return { key, uploaded: false };
      await wrap(() =>
        client.send(
          new PutObjectCommand({
            Bucket: bucket,
            Key: key,
            Body: body(),
            ContentLength: bytes,
            ...(contentType !== undefined ? { ContentType: contentType } : {}),
          }),
        ),
      );
      const stored = await size(key);
      if (stored !== bytes) {
        throw new StorageError(
          `storage kept ${stored ?? 0} of ${bytes} bytes of ${key}; it will be retried`,
          EXIT.invalid,
          true,
        );
      }
      return { key, uploaded: true };
    },
    async link(key) {
      if (config.publicBase !== undefined) {
        const below =
          config.prefix !== '' && key.startsWith(`${config.prefix}/`)
            ? key.slice(config.prefix.length + 1)
            : key;
        return `${config.publicBase}/${below.split('/').map(encodeURIComponent).join('/')}`;
      }
      return wrap(() =>
        getSignedUrl(client, new GetObjectCommand({ Bucket: bucket, Key: key }), {
          expiresIn: config.linkTtlSeconds,
          ...(opts.now ? { signingDate: opts.now() } : {}),
        }),
      );
    },
    async putStream(key, body, o = {}) {
      const hash = createHash('sha256');
      let bytes = 0;
      body.on('data', (chunk: Buffer) => {
        hash.update(chunk);
        bytes += chunk.length;
      });
      const upload = new Upload({
        client,
        params: {
          Bucket: bucket,
          Key: key,
          Body: body,
          ...(o.contentType !== undefined ? { ContentType: o.contentType } : {}),
        },
        partSize,
        queueSize,
        // On failure, abort the multipart upload rather than leave billed parts behind.
        leavePartsOnError: false,
      });
      const onAbort = () => void upload.abort().catch(() => undefined);
      o.signal?.addEventListener('abort', onAbort, { once: true });
      try {
        await wrap(() => upload.done());
      } finally {
        o.signal?.removeEventListener('abort', onAbort);
      }
      const sha256 = hash.digest('hex');
      if (o.expectedBytes !== undefined && bytes !== o.expectedBytes) {
        throw new StorageError(
          `result ${key}: got ${bytes} of ${o.expectedBytes} bytes; it will be fetched again`,
          EXIT.invalid,
          true,
        );
      }
      const stored = await size(key);
      if (stored !== bytes) {
        throw new StorageError(
          `storage kept ${stored ?? 0} of ${bytes} bytes of ${key}; it will be retried`,
          EXIT.invalid,
          true,
        );
      }
      return { key, bytes, sha256 };
    },
    listIncomplete: (prefix) =>
      wrap(async () => {
        const out: IncompleteUpload[] = [];
        let keyMarker: string | undefined;
        let uploadIdMarker: string | undefined;
        for (;;) {
          const page = await client
            .send(
              new ListMultipartUploadsCommand({
                Bucket: bucket,
                Prefix: prefix,
                ...(keyMarker !== undefined ? { KeyMarker: keyMarker } : {}),
                ...(uploadIdMarker !== undefined ? { UploadIdMarker: uploadIdMarker } : {}),
              }),
            )
            .catch((error: SdkLikeError) => {
              // Some S3 servers (s3rver, a few gateways) do not list multipart uploads. Nothing is lost:
              // an unfinished multipart upload is never visible as an object, so a result is either
              // complete or absent; only its orphaned parts stay until the bucket's lifecycle rule.
              const status = error.$metadata?.httpStatusCode;
              if (error.name === 'NotImplemented' || status === 501 || status === 405)
                return { Uploads: [], IsTruncated: false } as Partial<ListMultipartUploadsCommandOutput>;
              throw error;
            });
          for (const u of page.Uploads ?? []) {
            if (u.Key !== undefined && u.UploadId !== undefined)
              out.push({ key: u.Key, uploadId: u.UploadId });
          }
          if (!page.IsTruncated) return out;
          keyMarker = page.NextKeyMarker;
          uploadIdMarker = page.NextUploadIdMarker;
        }
      }),
    abort: (u) =>
      wrap(async () => {
        try {
          await client.send(
            new AbortMultipartUploadCommand({ Bucket: bucket, Key: u.key, UploadId: u.uploadId }),
          );
          return true;
        } catch (error) {
          const e = error as SdkLikeError;
          const status = e.$metadata?.httpStatusCode;
          // Gone since it was listed (completed, aborted, expired): what we wanted.
          if (e.name === 'NoSuchUpload' || (status === 404 && e.name !== 'NoSuchBucket')) return true;
          // A resume must not be blocked by a server that cannot abort (a killed run's upload would
          // otherwise stop every later run of it).
          if (
            e.name === 'NotImplemented' ||
            e.name === 'MethodNotAllowed' ||
            status === 501 ||
            status === 405
          )
            return false;
          throw error;
        }
      }),
    size,
    copy: (from, to) =>
      wrap(async () => {
        if ((await size(from)) === undefined) return false;
        // CopySource is `<bucket>/<key>`, URL-encoded per segment (a key may hold spaces, #, +, …).
        const source = [bucket, ...from.split('/')].map(encodeURIComponent).join('/');
        await client.send(new CopyObjectCommand({ Bucket: bucket, Key: to, CopySource: source }));
        return true;
      }),
    getBytes: (key) =>
      wrap(async () => {
        const res = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
        return Buffer.from(
          await (res.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray(),
        );
      }),
    listNames: (prefix) =>
      wrap(async () => {
        const keys: string[] = [];
        let token: string | undefined;
        do {
          const page = await client.send(
            new ListObjectsV2Command({
              Bucket: bucket,
              Prefix: `${prefix.replace(/\/+$/, '')}/`,
              Delimiter: '/',
              ...(token !== undefined ? { ContinuationToken: token } : {}),
            }),
          );
          for (const o of page.Contents ?? []) if (o.Key !== undefined) keys.push(o.Key);
          token = page.IsTruncated ? page.NextContinuationToken : undefined;
        } while (token !== undefined);
        return keys;
      }),
    destroy: () => client.destroy(),
  };
}
