// What the download's parts share: its failures (typed, with whether a retry is safe) and the sink a
// body is poured into (a file or a bucket). Kept apart so that the sinks and the reading loop need no
// import of each other.

import { MediabatchError } from '../errors.js';

export type DownloadFailureType =
  | 'bad-url'
  | 'expired'
  /** HTTP 401/403/404/410 on the link: fetch the job record again and try its fresh link. */
  | 'link-refused'
  | 'too-large'
  | 'truncated'
  | 'http-error'
  | 'network'
  | 'disk';

export interface DownloadFailed {
  ok: false;
  type: DownloadFailureType;
  message: string;
  /** Trying the same link again may work (a network hiccup, a cut-off transfer, a 5xx). */
  retrySafe: boolean;
  httpStatus?: number;
  /** For 'disk': the errno code (ENOSPC, EROFS, …) or EUNSAFEPATH. */
  localCode?: string;
  /** Set for 'disk': the trouble is on this machine, not at the server; retrying the link cannot help. */
  local?: true;
}

export class DownloadFailure extends MediabatchError {
  constructor(readonly failure: DownloadFailed) {
    super(failure.message);
  }
}

export const fail = (
  type: DownloadFailureType,
  message: string,
  retrySafe: boolean,
  httpStatus?: number,
): never => {
  throw new DownloadFailure({
    ok: false,
    type,
    message,
    retrySafe,
    ...(httpStatus !== undefined && { httpStatus }),
  });
};

/** A local file-system error, kept whole so that its code reaches the caller. */
export class DiskError extends MediabatchError {
  constructor(override readonly cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause));
  }
}

export const toDisk = (error: unknown): never => {
  throw error instanceof DiskError || error instanceof DownloadFailure ? error : new DiskError(error);
};

/**
 * Where a body's bytes go, in order. The reading loop checks the size on every chunk before handing it
 * on; the sink stores it and says the SHA-256 of exactly the bytes it stored.
 */
export interface Sink {
  /**
   * Takes `chunk` (copied or passed on before it returns or resolves, so the caller may reuse it).
   * Returns a promise only when the caller must wait before the next chunk (a full ring, a full pipe).
   */
  write(chunk: Buffer): Promise<void> | undefined;
  /** Every byte was given: makes them durable (fsync, upload complete) and returns their SHA-256 (hex). */
  finish(): Promise<string>;
  /** The download failed: stops and releases everything (threads, handles, a half upload). Never throws. */
  abort(error: unknown): Promise<void>;
}
