// The `storage:` section of mediabatch.config.yaml, with environment overrides. Credentials are not part
// of it: they come only from the standard AWS chain (environment, shared credentials file, profiles).
import { z } from 'zod';

export interface StorageConfig {
  bucket: string;
  /** Key prefix without leading or trailing slash; '' for the bucket's root. */
  prefix: string;
  endpoint?: string;
  region: string;
  /** Lifetime of the presigned links given to the API, in seconds. */
  linkTtlSeconds: number;
  /** A public base URL: links are `<public_base>/<key below prefix>`, no presigning. */
  publicBase?: string;
}

export const storageFileSchema = z.strictObject({
  url: z.string().regex(/^s3:\/\/[^/]+/, 'must be s3://bucket or s3://bucket/prefix'),
  endpoint: z.url({ protocol: /^https?$/, error: 'must be an http or https URL' }).optional(),
  region: z.string().min(1).optional(),
  link_ttl: z.string().optional(),
  public_base: z.url({ protocol: /^https?$/, error: 'must be an http or https URL' }).optional(),
});

export type StorageFileSection = z.infer<typeof storageFileSchema>;

/** AWS caps presigned (SigV4) links at 7 days. */
export const MAX_LINK_TTL_SECONDS = 7 * 24 * 3600;
export const DEFAULT_LINK_TTL_SECONDS = 24 * 3600;

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** `90s`, `30m`, `24h`, `7d` → seconds; undefined when it is none of those. */
export function parseTtl(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$/.exec(text);
  if (!m) return undefined;
  const seconds = Number(m[1]) * (UNITS[m[2] as string] as number);
  return seconds > 0 ? Math.ceil(seconds) : undefined;
}

/** `s3://bucket/some/prefix/` → bucket and prefix. */
export function parseS3Url(url: string): { bucket: string; prefix: string } | undefined {
  const m = /^s3:\/\/([^/]+)\/?(.*)$/.exec(url);
  if (!m) return undefined;
  return { bucket: m[1] as string, prefix: (m[2] as string).replace(/^\/+|\/+$/g, '') };
}

/**
 * The storage settings from the config file's section and the environment (which wins):
 * MEDIABATCH_STORAGE_URL, MEDIABATCH_STORAGE_ENDPOINT, MEDIABATCH_STORAGE_REGION (else AWS_REGION),
 * MEDIABATCH_LINK_TTL, MEDIABATCH_PUBLIC_BASE. Returns undefined when neither configures a URL.
 * Throws a one-line message (the caller wraps it in its ConfigError).
 */
export function resolveStorage(
  section: StorageFileSection | undefined,
  env: NodeJS.ProcessEnv,
): StorageConfig | undefined {
  const pick = (name: string, fallback: string | undefined) => {
    const v = env[name];
    return v !== undefined && v !== '' ? v : fallback;
  };
  const url = pick('MEDIABATCH_STORAGE_URL', section?.url);
  if (url === undefined) return undefined;
  const parsed = parseS3Url(url);
  if (!parsed)
    throw new Error(`storage url must be s3://bucket or s3://bucket/prefix, got ${JSON.stringify(url)}`);
  const ttlText = pick('MEDIABATCH_LINK_TTL', section?.link_ttl);
  let linkTtlSeconds = DEFAULT_LINK_TTL_SECONDS;
  if (ttlText !== undefined) {
    const ttl = parseTtl(ttlText);
    if (ttl === undefined || ttl > MAX_LINK_TTL_SECONDS) {
      throw new Error(
        `storage link_ttl must be a duration such as 30m, 24h or 7d (at most 7d), got ${JSON.stringify(ttlText)}`,
      );
    }
    linkTtlSeconds = ttl;
  }
  const config: StorageConfig = {
    ...parsed,
    region: pick('MEDIABATCH_STORAGE_REGION', section?.region) ?? env['AWS_REGION'] ?? 'us-east-1',
    linkTtlSeconds,
  };
  const endpoint = pick('MEDIABATCH_STORAGE_ENDPOINT', section?.endpoint);
  if (endpoint !== undefined) {
    if (!/^https?:\/\//.test(endpoint))
      throw new Error(`storage endpoint must be an http or https URL, got ${JSON.stringify(endpoint)}`);
    config.endpoint = endpoint;
  }
  const publicBase = pick('MEDIABATCH_PUBLIC_BASE', section?.public_base);
  if (publicBase !== undefined) config.publicBase = publicBase.replace(/\/+$/, '');
  return config;
}
