// The base of every error mediabatch throws: each carries the exit code the CLI ends with should it reach
// the CLI (docs/troubleshooting.md), and the CLI turns any of them into its lines in one place
// (`exitOf` in src/cli/errors.ts). An error that is caught and turned into an outcome below the CLI keeps
// EXIT.internal: if one ever reaches the CLI, that is a bug, reported as one.

import { EXIT, type ExitCode } from './exit-codes.js';

export class MediabatchError extends Error {
  override name = 'MediabatchError';
  /** The CLI's exit code for this error; EXIT.internal when reaching the CLI would be a bug. */
  readonly exitCode: ExitCode = EXIT.internal;
  /** Lines printed before the one-line reason (every problem of a manifest or a settings file). */
  readonly details: readonly string[] = [];
}
