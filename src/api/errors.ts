// Errors of the API client that the CLI names, apart from the client so that naming them loads no HTTP stack.

import { MediabatchError } from '../errors.js';
import { EXIT } from '../exit-codes.js';

/** What the user reads when the service refuses the key (HTTP 401 or code 401), wherever it happens. */
export const UNAUTHORIZED_MESSAGE =
  'the API refused the credentials (401): check MEDIABATCH_API_KEY and the base URL';

/** A setting of the client (base URL, key, timeouts) the user must fix; never a bug. */
export class ApiSettingsError extends MediabatchError {
  override name = 'ApiSettingsError';
  override readonly exitCode = EXIT.invalid;
}
