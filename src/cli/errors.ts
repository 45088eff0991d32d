// Only the CLI decides exit codes and wording; everything below it returns results or throws these.

import { isAbsolute, relative } from 'node:path';
import { ApiSettingsError } from '../api/errors.js';
import { ConfigError } from '../config-error.js';
import { EXIT, type ExitCode } from '../exit-codes.js';
import { STATE_FILE_KINDS, StoreError } from '../store/errors.js';

export { EXIT, type ExitCode };

/** An expected way to stop: the message is one line that says why and what to do. */
export class ExitError extends Error {
  readonly exitCode: ExitCode;
  /** Extra lines printed before the one-line reason (e.g. every manifest problem). */
  readonly details: readonly string[];

  constructor(exitCode: ExitCode, message: string, details: readonly string[] = []) {
    super(message);
    this.name = 'ExitError';
    this.exitCode = exitCode;
    this.details = details;
  }
}

/**
 * The exit for an error thrown below the CLI that is the user's to fix, or undefined for a bug. A state
 * file that is damaged, newer than us, unreachable, read-only, on a full disk or locked exits 1 with one
 * line naming the file as the user gave it (relative to the working folder when inside it).
 */
export function expectedExit(error: unknown, cwd: string): ExitError | undefined {
  if (error instanceof ApiSettingsError) return new ExitError(EXIT.invalid, error.message);
  if (error instanceof ConfigError) return new ExitError(EXIT.invalid, error.message, error.details);
  if (!(error instanceof StoreError) || !STATE_FILE_KINDS.includes(error.kind)) return undefined;
  const file = error.file;
  const rel = file === undefined ? '' : relative(cwd, file);
  const shown = file === undefined || rel === '' || rel.startsWith('..') || isAbsolute(rel) ? file : rel;
  const message =
    file === undefined || shown === undefined ? error.message : error.message.replaceAll(file, shown);
  // A full disk is resumable once there is room: the run's own exit code for "run it again" (design.md).
  return new ExitError(error.kind === 'full' ? EXIT.interrupted : EXIT.invalid, message);
}
