// Apart from src/config.ts, which loads zod, YAML and the catalog: the CLI's error handling needs only the
// class, and `--version` must not load the rest.

import { MediabatchError } from './errors.js';
import { EXIT } from './exit-codes.js';

/**
 * A configuration the user must fix (unreadable file, invalid field, bad environment value). The message
 * is one line saying what to do; `details` holds each located problem. The CLI exits 1 with them.
 */
export class ConfigError extends MediabatchError {
  override readonly exitCode = EXIT.invalid;
  override readonly details: readonly string[];

  constructor(message: string, details: readonly string[] = []) {
    super(message);
    this.name = 'ConfigError';
    this.details = details;
  }
}
