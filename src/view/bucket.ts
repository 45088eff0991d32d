// Results in a bucket (`output: s3://…`): the view answers /files/… with a redirect to a fresh link
// made by src/storage (the only module that talks S3). Credentials stay in the SDK's chain.

import { isBucketLocation, resolveOutput, runLocation } from '../results/output.js';
import { createStorage, parseS3Url, type Storage, type StorageConfig } from '../storage/index.js';
import { keptSettings, type RunRecord } from '../store/index.js';

export interface BucketLinks {
  link: (run: RunRecord, location: string) => Promise<string | undefined>;
  /** Where the links point (for the CSP's img-src and media-src). */
  origins: string[];
  close(): void;
}

export function bucketLinks(storage: StorageConfig | undefined, env: NodeJS.ProcessEnv): BucketLinks {
  const clients = new Map<string, Storage>();
  const origins = new Set<string>();
  for (const url of [storage?.endpoint, storage?.publicBase, env['MEDIABATCH_STORAGE_ENDPOINT']]) {
    if (url) origins.add(new URL(url).origin);
  }
  // A bucket without an endpoint is on AWS: virtual-hosted buckets under amazonaws.com.
  if (storage !== undefined && origins.size === 0) origins.add('https://*.amazonaws.com');
  return {
    origins: [...origins],
    async link(run, location) {
      const { output } = keptSettings(run);
      if (output === undefined || !isBucketLocation(output)) return undefined;
      // Only the run's own objects: a row naming another place in the bucket gets no link.
      if (!location.startsWith(`${runLocation(output, run.id)}/`)) return undefined;
      const parsed = parseS3Url(location);
      if (parsed === undefined) return undefined;
      const bucket = resolveOutput(output, storage, env).bucket;
      if (bucket === undefined || bucket.bucket !== parsed.bucket) return undefined;
      let client = clients.get(output);
      if (client === undefined) {
        client = createStorage(bucket, { env });
        clients.set(output, client);
      }
      return client.link(parsed.prefix);
    },
    close() {
      for (const c of clients.values()) c.destroy();
    },
  };
}
