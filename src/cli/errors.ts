// Every error mediabatch throws carries its exit code (src/errors.ts); this is the one place that turns an
// error into the lines the CLI prints and the code it exits with (docs/troubleshooting.md).

import { isAbsolute, relative } from 'node:path';
import { MediabatchError } from '../errors.js';
import { EXIT, type ExitCode } from '../exit-codes.js';
import { StoreError } from '../store/errors.js';
import { isPostgresUrl } from '../store/location.js';

export { EXIT, type ExitCode };

/** An expected way to stop that the CLI decides: the message is one line that says why and what to do. */
export class ExitError extends MediabatchError {
  override name = 'ExitError';
  override readonly exitCode: ExitCode;
  /** Extra lines printed before the one-line reason (e.g. every manifest problem). */
  override readonly details: readonly string[];

  constructor(exitCode: ExitCode, message: string, details: readonly string[] = []) {
    super(message);
    this.exitCode = exitCode;
    this.details = details;
  }
}

/**
 * The exit for an error: its code, its detail lines and its one-line reason; undefined for a bug (an
 * error that is not ours, or one that should never have reached the CLI). A state file is named as the
 * user gave it (relative to the working folder when inside it).
 */
export function exitOf(error: unknown, cwd: string): ExitError | undefined {
  if (!(error instanceof MediabatchError) || error.exitCode === EXIT.internal) return undefined;
  if (error instanceof ExitError) return error;
  const message = error instanceof StoreError ? withFileShown(error, cwd) : error.message;
  // A database server that went away (an outage): what was done is kept, and the run goes on from there.
  const gone = error instanceof StoreError && error.kind === 'gone' && !message.includes('run again');
  return new ExitError(
    error.exitCode,
    gone ? `${message}; run again to continue once it is back` : message,
    error.details,
  );
}

function withFileShown(error: StoreError, cwd: string): string {
  const file = error.file;
  // A database URL is no path: relative() would fold its `//` into a path under the working folder.
  if (file === undefined || isPostgresUrl(file)) return error.message;
  const rel = relative(cwd, file);
  const shown = rel === '' || rel.startsWith('..') || isAbsolute(rel) ? file : rel;
  return error.message.replaceAll(file, shown);
}
