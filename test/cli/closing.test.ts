// A Ctrl-C or SIGTERM after a command let go of them (a run's outcome printed, its connections closing)
// ends the process with the command's code, or with the interrupted code and one line; before any
// command listened, a signal keeps its default (nothing listens).
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { answerSignalsWhileClosing } from '../../src/cli/closing.js';
import { EXIT } from '../../src/exit-codes.js';

function setUp(ended?: number) {
  const proc = new EventEmitter();
  const said: string[] = [];
  const exits: number[] = [];
  answerSignalsWhileClosing(proc, {
    stderr: { write: (text: string) => said.push(text) },
    exit: (code) => {
      exits.push(code);
    },
    ended: () => ended,
  });
  return { proc, said, exits };
}

/** A command that answers the signal while it works, then lets go of it. */
function commandWorks(proc: EventEmitter, signal: string): string[] {
  const heard: string[] = [];
  const onSignal = () => heard.push(signal);
  proc.on(signal, onSignal);
  proc.emit(signal);
  proc.off(signal, onSignal);
  return heard;
}

describe('signals while the process closes', () => {
  it('adds nothing before a command listens: the signal keeps its default', () => {
    const { proc } = setUp();
    expect(proc.listenerCount('SIGINT')).toBe(0);
    expect(proc.listenerCount('SIGTERM')).toBe(0);
  });

  it('after the command let go of Ctrl-C: one line and the interrupted code, at once', () => {
    const { proc, said, exits } = setUp();
    expect(commandWorks(proc, 'SIGINT')).toEqual(['SIGINT']);
    expect(exits).toEqual([]);
    proc.emit('SIGINT');
    expect(said.join('')).toBe(
      '\nmediabatch: quit at once (SIGINT) while closing; what was done is recorded\n',
    );
    expect(exits).toEqual([EXIT.interrupted]);
  });

  it('once the command returned its code: that code, without a word (a SIGTERM as a Ctrl-C)', () => {
    const { proc, said, exits } = setUp(EXIT.someFailed);
    commandWorks(proc, 'SIGTERM');
    proc.emit('SIGTERM');
    expect(said).toEqual([]);
    expect(exits).toEqual([EXIT.someFailed]);
    // Only the signal let go of is answered; the other keeps its default.
    expect(proc.listenerCount('SIGINT')).toBe(0);
  });

  it('a command that listens again answers alone', () => {
    const { proc, said, exits } = setUp();
    commandWorks(proc, 'SIGINT');
    expect(commandWorks(proc, 'SIGINT')).toEqual(['SIGINT']);
    expect(said).toEqual([]);
    expect(exits).toEqual([]);
    expect(proc.listenerCount('SIGINT')).toBe(1);
  });
});
