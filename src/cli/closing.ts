// Ctrl-C and SIGTERM once a command has stopped answering them itself. `run`, `view`, `schedule` and
// `sandbox` take them while they work, and let go once their outcome is printed; closing their
// connections, then the process, takes milliseconds more (tens at a large heap). A signal then met no
// handler and ended the process by the signal: no line, and a shell's 130 (143) where the command's own
// code was due. Seen as a worker's exit after its run had finished and printed its report.

import { EXIT } from '../exit-codes.js';

type Signal = 'SIGINT' | 'SIGTERM';
const SIGNALS: readonly Signal[] = ['SIGINT', 'SIGTERM'];

/** The part of `process` this needs (tests pass an EventEmitter). */
export type SignalSource = Pick<NodeJS.EventEmitter, 'on' | 'listenerCount'>;

/**
 * Once the last listener of a signal goes (a command let go of it), a signal nobody else answers ends
 * the process at once: with the command's code once it returned one (`ended`; its lines are printed, the
 * signal changes nothing), else with the interrupted code and one line, as a second Ctrl-C during a run
 * does. Before any command listened, nothing is added: a signal ends a command that never handles it
 * (`status`), or one still starting, as it always did.
 */
export function answerSignalsWhileClosing(
  proc: SignalSource,
  io: {
    stderr: { write(text: string): unknown };
    exit(code: number): void;
    ended(): number | undefined;
  },
): void {
  const installed = new Set<Signal>();
  const quit = (signal: Signal) => () => {
    // A command listens again: it answers.
    if (proc.listenerCount(signal) > 1) return;
    const code = io.ended();
    if (code !== undefined) return io.exit(code);
    io.stderr.write(`\nmediabatch: quit at once (${signal}) while closing; what was done is recorded\n`);
    io.exit(EXIT.interrupted);
  };
  proc.on('removeListener', (event: string | symbol) => {
    const signal = SIGNALS.find((s) => s === event);
    if (signal === undefined || installed.has(signal) || proc.listenerCount(signal) > 0) return;
    installed.add(signal);
    proc.on(signal, quit(signal));
  });
}
