// The store's errors, apart from the database driver so that the CLI can name them without loading it.

import { MediabatchError } from '../errors.js';
import { EXIT, type ExitCode } from '../exit-codes.js';

/**
 * What is wrong with the state file, for the CLI's exit code and for callers that want to react:
 * `data` is a problem with what is in it (a run, a task) rather than with the file.
 */
export type StoreErrorKind =
  | 'corrupt'
  | 'newer'
  /** Opened read-only with a schema older than this version's: the caller migrates it first. */
  | 'older'
  | 'path'
  | 'permission'
  | 'full'
  | 'busy'
  /** A database server that answered before and went away: the run goes on once it is back. */
  | 'gone'
  /** A database server short of something for now (memory, connections, a limit): run again later. */
  | 'server'
  | 'data';

/** Every problem with the state database (the file, or a run in it), worded for the user. */
export class StoreError extends MediabatchError {
  override name = 'StoreError';
  readonly kind: StoreErrorKind;
  /** The state file, when the problem is with the file: the CLI shows it as the user gave it. */
  readonly file: string | undefined;
  /**
   * A state file the user must fix (or upgrade) exits 1; a full disk is resumable once there is room, so
   * it takes the run's own code for "run it again"; a problem with what is in the file is a bug.
   */
  override readonly exitCode: ExitCode;

  constructor(message: string, opts: { kind?: StoreErrorKind; file?: string } = {}) {
    super(message);
    this.kind = opts.kind ?? 'data';
    this.file = opts.file;
    this.exitCode = !STATE_FILE_KINDS.includes(this.kind)
      ? EXIT.internal
      : this.kind === 'full' || this.kind === 'gone' || this.kind === 'server'
        ? EXIT.interrupted
        : EXIT.invalid;
  }
}

/** The kinds that are about the file itself: the user fixes them (or upgrades), not a bug. */
export const STATE_FILE_KINDS: readonly StoreErrorKind[] = [
  'corrupt',
  'newer',
  'path',
  'permission',
  'full',
  'busy',
  'gone',
  'server',
];
