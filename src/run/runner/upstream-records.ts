// The job records of upstreams this process saw succeed, kept while their links are fresh enough to pass on
// to a downstream (./upstream.ts fills chained tasks in from them). Apart from upstream.ts, which needs the
// RunCore, so that the core can hold the records without a cycle between the two files.

import type { JobRecord } from '../../api/schemas.js';

/** Job records of upstreams this process saw succeed, kept while their links are fresh enough to pass on. */
export class UpstreamRecords {
  readonly #records = new Map<string, { record: JobRecord; expiresAt: number | undefined; at: number }>();

  /** A success record seen by this process (a poll or a confirmed callback), links signed. */
  remember(imgUuid: string, record: JobRecord, now: number): void {
    if (this.#records.size > 10_000) this.#records.clear();
    this.#records.set(imgUuid, { record, expiresAt: expiryOf(record), at: now });
  }

  /** A record whose links live past `until`; undefined when it must be fetched again. */
  fresh(imgUuid: string, until: number): JobRecord | undefined {
    const known = this.#records.get(imgUuid);
    if (known === undefined) return undefined;
    // Without a stated expiry, links are trusted for an hour after they were seen (the spec: about 12 hours).
    const expires = known.expiresAt ?? known.at + 60 * 60_000;
    return expires > until ? known.record : undefined;
  }
}

/** When the first link of a record expires, in epoch ms; undefined when the record does not say. */
export function expiryOf(record: JobRecord): number | undefined {
  const times: number[] = [];
  const add = (value: unknown) => {
    const ms = toEpochMs(value);
    if (ms !== undefined) times.push(ms);
  };
  add(record.link_expired_at);
  for (const item of record.json ?? []) add(item.link_expired_at);
  return times.length === 0 ? undefined : Math.min(...times);
}

function toEpochMs(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) return value < 1e12 ? value * 1000 : value;
  if (typeof value === 'string' && value.trim() !== '') {
    if (/^\d+(\.\d+)?$/.test(value.trim())) return toEpochMs(Number(value));
    const ms = Date.parse(value);
    return Number.isNaN(ms) ? undefined : ms;
  }
  return undefined;
}
