// How long a job of each model is expected to take at the service (queue and work), before any has been
// seen: the runner's first look at a job comes near the expected shortest time, and the longest tasks are
// submitted first. The sandbox draws its job times from the same ranges, as the real service is taken to.
import type { CatalogEntry, RequestBody } from './types.js';

export interface ExpectedSeconds {
  /** The shortest a job of this request is expected to take. */
  low: number;
  /** The longest it is expected to take; a job past it is late, not yet stalled. */
  high: number;
}

/** Per kind, for the shortest output (a 5 s, 720p video): what the service's published figures suggest. */
export const KIND_JOB_SECONDS: Readonly<Record<CatalogEntry['kind'], ExpectedSeconds>> = {
  image: { low: 3, high: 8 },
  audio: { low: 5, high: 15 },
  video: { low: 30, high: 90 },
};

/**
 * A request's size relative to the shortest output of its kind: a 10 s video renders about twice as long
 * as a 5 s one, a 1080p video about half as long again as 720p. Requests without those fields count 1.
 */
export function jobSizeFactor(entry: CatalogEntry, body: RequestBody): number {
  if (entry.kind !== 'video') return 1;
  const seconds = typeof body.duration === 'number' && body.duration > 5 ? body.duration / 5 : 1;
  const resolution = body.resolution === '1080p' ? 1.5 : 1;
  return seconds * resolution;
}

export function expectedJobSeconds(entry: CatalogEntry, body: RequestBody): ExpectedSeconds {
  const base = KIND_JOB_SECONDS[entry.kind];
  const f = jobSizeFactor(entry, body);
  return { low: base.low * f, high: base.high * f };
}

/** The figure tasks are ordered by when the longest go first: the middle of the expected range, in ms. */
export function expectedJobMs(entry: CatalogEntry, body: RequestBody): number {
  const { low, high } = expectedJobSeconds(entry, body);
  return Math.round(((low + high) / 2) * 1000);
}
