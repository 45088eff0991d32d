// Where a run receives status callbacks: `--listen` / `--callback-url` (or the manifest's `listen` and
// `callback_url`), checked together before anything is sent.

import { callbackBaseProblem, parseListen } from './callbacks.js';

export interface ReceiverAddress {
  host: string;
  port: number;
  /** The public URL that reaches the receiver; absent on the embedded sandbox (it reaches it directly). */
  publicBase?: string;
}

/** The receiver's address (undefined without one), or the one line that says what is wrong. */
export type ReceiverChoice =
  | { ok: true; receiver: ReceiverAddress | undefined }
  | { ok: false; message: string };

/** The flags win over the manifest; on the embedded sandbox a receiver needs no public URL. */
export function receiverOf(
  flags: { listen?: string; callbackUrl?: string },
  settings: { listen?: string; callbackUrl?: string },
  onSandbox: boolean,
): ReceiverChoice {
  const listen = flags.listen ?? settings.listen;
  let listenAt: { host: string; port: number } | undefined;
  try {
    listenAt = listen === undefined ? undefined : parseListen(listen);
  } catch (error) {
    return { ok: false, message: (error as Error).message };
  }
  const publicBase = flags.callbackUrl ?? settings.callbackUrl;
  if (listenAt && !publicBase && !onSandbox) {
    return {
      ok: false,
      message:
        '--listen needs --callback-url (or callback_url in the manifest): the public https address that reaches this receiver',
    };
  }
  const baseProblem = listenAt && publicBase !== undefined ? callbackBaseProblem(publicBase) : undefined;
  if (baseProblem) {
    return {
      ok: false,
      message: `${flags.callbackUrl !== undefined ? '--callback-url' : 'callback_url'}: ${baseProblem}`,
    };
  }
  if (flags.callbackUrl !== undefined && !listenAt) {
    // Without a receiver the flag would be dropped silently and the user would wait for callbacks.
    return {
      ok: false,
      message:
        '--callback-url needs --listen host:port (or listen in the manifest): the receiver this URL reaches',
    };
  }
  if (!listenAt) return { ok: true, receiver: undefined };
  return { ok: true, receiver: { ...listenAt, ...(publicBase !== undefined ? { publicBase } : {}) } };
}
