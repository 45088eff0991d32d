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

/** A balance query, when credentials are set; undefined otherwise. */
export function makeBalanceSource(config: Config): (() => Promise<number>) | undefined {
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
