// The sandbox started inside a run (`mediabatch run --sandbox`, or `run(manifest, { sandbox })` of the
// library): one place that picks its port and key, so that both start it alike.

import { journalBeside } from './journal.js';
import { SANDBOX_DEFAULTS } from './options.js';
import { type Sandbox, startSandbox } from './server.js';

/** The key the embedded sandbox accepts: it is not a secret, nothing is paid there. */
export const EMBEDDED_SANDBOX_KEY = 'sandbox-key';

/**
 * The embedded sandbox takes the port the example manifests name (`{{sandbox}}` defaults to
 * http://127.0.0.1:8787), so that their requests, which carry its address, are the same at every run; any
 * free port when that one is taken.
 */
export async function startEmbeddedSandbox(speed: number, stateFile?: string): Promise<Sandbox> {
  // Its jobs are kept beside the state file, so a later `run --sandbox` (after a review) still knows them.
  const journal = stateFile === undefined ? {} : { journal: journalBeside(stateFile) };
  try {
    return await startSandbox({
      port: SANDBOX_DEFAULTS.port,
      speed,
      apiKey: EMBEDDED_SANDBOX_KEY,
      ...journal,
    });
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'EADDRINUSE') throw error;
    return startSandbox({ port: 0, speed, apiKey: EMBEDDED_SANDBOX_KEY, ...journal });
  }
}
