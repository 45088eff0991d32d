// Builds the I/O edges (prober, API client) from configuration for the commands.

import { createApiClient } from '../api/client.js';
import { UNAUTHORIZED_MESSAGE } from '../api/errors.js';
import type { Config } from '../config.js';
import { mediaMeasure } from '../plan/build.js';
import { EXIT, ExitError } from './errors.js';

export const makeMeasure = mediaMeasure;

/** Throws the exit-5 error the CLI prints when the service refuses the key. */
export function unauthorizedError(): ExitError {
  return new ExitError(EXIT.unauthorized, UNAUTHORIZED_MESSAGE);
}

/**
 * A balance query, when credentials are set; undefined otherwise. With `sandboxStateFile` (`--sandbox`),
 * the embedded sandbox's: what its journal beside that state file leaves of the starting balance, read
 * without starting it (its API would answer the same).
 */
export function makeBalanceSource(
  config: Config,
  sandboxStateFile?: string,
): (() => Promise<number>) | undefined {
  if (sandboxStateFile !== undefined) {
    return async () => {
      const { journalAccount, journalBeside } = await import('../sandbox/journal.js');
      const { SANDBOX_DEFAULTS } = await import('../sandbox/options.js');
      const account = journalAccount(
        journalBeside(sandboxStateFile),
        SANDBOX_DEFAULTS.balance,
        SANDBOX_DEFAULTS.quota,
      );
      // As the API's GET /balance answers: whole tokens.
      return Math.floor(account.balance);
    };
  }
  const { apiKey, baseUrl } = config;
  if (!apiKey || !baseUrl) return undefined;
  return async () => {
    const client = createApiClient({ baseUrl, apiKey });
    try {
      const outcome = await client.getBalance();
      switch (outcome.type) {
        case 'ok':
          return outcome.value;
        case 'unauthorized':
          throw unauthorizedError();
        case 'not-found':
        case 'rejected':
          throw new Error(outcome.message);
        case 'retryable':
          throw new Error(outcome.reason);
      }
    } finally {
      await client.close();
    }
  };
}
