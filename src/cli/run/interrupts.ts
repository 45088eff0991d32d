// Ctrl-C and SIGTERM during `mediabatch run`, as the abort signals the library reads.

import { EXIT } from '../errors.js';
import type { CliIO } from '../io.js';

/** Ctrl-C or SIGTERM once: stop submitting. Twice: quit at once. */
export function interruptsFrom(io: CliIO): { stop: AbortSignal; halt: AbortSignal; dispose(): void } {
  const stop = new AbortController();
  const halt = new AbortController();
  let interrupts = 0;
  const onSignal = (name: string) => {
    interrupts++;
    if (interrupts === 1 || name === 'SIGTERM') {
      io.stderr.write(
        '\nStopping: no new submissions; waiting for the answers in flight (Ctrl-C again to quit at once)\n',
      );
      stop.abort();
    } else {
      halt.abort();
      // Every submission sent has its intent row: quitting now leaves them in doubt, never charged twice.
      io.stderr.write(
        '\nQuit at once: tasks whose answer was not recorded are in doubt; run again to resume\n',
      );
      io.exit?.(EXIT.interrupted);
    }
  };
  const onInt = () => onSignal('SIGINT');
  const onTerm = () => onSignal('SIGTERM');
  io.signals?.on('SIGINT', onInt);
  io.signals?.on('SIGTERM', onTerm);
  return {
    stop: stop.signal,
    halt: halt.signal,
    dispose() {
      io.signals?.off('SIGINT', onInt);
      io.signals?.off('SIGTERM', onTerm);
    },
  };
}
