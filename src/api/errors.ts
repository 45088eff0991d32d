// Errors of the API client that the CLI names, apart from the client so that naming them loads no HTTP stack.

/** A setting of the client (base URL, key, timeouts) the user must fix; never a bug. */
export class ApiSettingsError extends Error {}
