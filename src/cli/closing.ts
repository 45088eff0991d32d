// Ctrl-C and SIGTERM whenever no command answers them itself. `run`, `view`, `schedule` and `sandbox`
// take them while they work; before that (loading the manifest, planning, measuring media, the preflight)
// and after (their outcome printed, connections closing), and in commands that never take them (`report`,
// `status`, `plan`), a signal met no handler and ended the process by the signal: no line, and a shell's
// 130 (143) where the interrupted code and its line were due.

import { EXIT } from '../exit-codes.js';

type Signal = 'SIGINT' | 'SIGTERM';
const SIGNALS: readonly Signal[] = ['SIGINT', 'SIGTERM'];

/** The part of `process` this needs (tests pass an EventEmitter). */
export type SignalSource = Pick<NodeJS.EventEmitter, 'on' | 'listenerCount'>;

/** What an interrupt before a command answers it leaves, as its line says it; a command may say better. */
const WHAT_WAS_DONE = 'what was done is recorded; run the same command again';
let beforeAnswered = WHAT_WAS_DONE;
const givenBack = new Set<() => void>();

/**
 * What an interrupt that comes before the command answers signals leaves (the line's end): `run` says
 * nothing was submitted. Set by the command as it starts.
 */
export function sayOnEarlyInterrupt(text: string): void {
  beforeAnswered = text;
}

/**
 * What a command holds that an interrupt before it answers signals must give back before the process ends
 * (a run's opening lease, which another worker would otherwise wait out): `giveBack` is called then, at
 * once. Returns the function that unregisters it.
 */
export function giveBackOnInterrupt(giveBack: () => void): () => void {
  givenBack.add(giveBack);
  return () => givenBack.delete(giveBack);
}

/** An AbortSignal that such an interrupt aborts, at once, before the process ends; `letGo` when done. */
export function abortOnInterrupt(): { signal: AbortSignal; letGo: () => void } {
  const interrupted = new AbortController();
  const letGo = giveBackOnInterrupt(() => interrupted.abort());
  return { signal: interrupted.signal, letGo };
}

/**
 * From the start, a signal no command answers ends the process at once, never by the signal: with the
 * command's code once it returned one (`ended`; its lines are printed, the signal changes nothing), else
 * with the interrupted code and one line, as a second Ctrl-C during a run does. While a command answers
 * a signal (it listens too), the command alone does.
 */
export function answerSignals(
  proc: SignalSource,
  io: {
    stderr: { write(text: string): unknown };
    exit(code: number): void;
    ended(): number | undefined;
  },
): void {
  // Signals a command answered and let go of: the process is closing.
  const letGo = new Set<Signal>();
  const quit = (signal: Signal) => () => {
    // A command listens: it answers.
    if (proc.listenerCount(signal) > 1) return;
    const code = io.ended();
    if (code !== undefined) return io.exit(code);
    const line = letGo.has(signal)
      ? `quit at once (${signal}) while closing; what was done is recorded`
      : `interrupted (${signal}): ${beforeAnswered}`;
    io.stderr.write(`\nmediabatch: ${line}\n`);
    for (const giveBack of [...givenBack]) {
      try {
        giveBack();
      } catch {
        // Not given back (the database is gone): it runs out with its lease, as after kill -9.
      }
    }
    io.exit(EXIT.interrupted);
  };
  for (const signal of SIGNALS) proc.on(signal, quit(signal));
  proc.on('removeListener', (event: string | symbol) => {
    const signal = SIGNALS.find((s) => s === event);
    if (signal !== undefined && proc.listenerCount(signal) <= 1) letGo.add(signal);
  });
}
