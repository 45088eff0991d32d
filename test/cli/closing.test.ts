// A Ctrl-C or SIGTERM no command answers ends the process with the command's code, or with the
// interrupted code and one line: before a command listens (a run still planning), after it let go of them
// (its outcome printed, its connections closing), in a command that never listens. Real processes and
// signals: test/cli/interrupt-early.test.ts.
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { abortOnInterrupt, answerSignals, sayOnEarlyInterrupt } from '../../src/cli/closing.js';
import { EXIT } from '../../src/exit-codes.js';

function setUp(ended?: number) {
  const proc = new EventEmitter();
  const said: string[] = [];
  const exits: number[] = [];
  answerSignals(proc, {
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
  it('before a command listens: one line with what the command left, and the interrupted code', () => {
    const { proc, said, exits } = setUp();
    proc.emit('SIGTERM');
    expect(said.join('')).toBe(
      '\nmediabatch: interrupted (SIGTERM): what was done is recorded; run the same command again\n',
    );
    sayOnEarlyInterrupt('nothing was submitted; run the same command again');
    proc.emit('SIGINT');
    expect(said[1]).toBe(
      '\nmediabatch: interrupted (SIGINT): nothing was submitted; run the same command again\n',
    );
    expect(exits).toEqual([EXIT.interrupted, EXIT.interrupted]);
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
  });

  it('a command that listens again answers alone', () => {
    const { proc, said, exits } = setUp();
    commandWorks(proc, 'SIGINT');
    expect(commandWorks(proc, 'SIGINT')).toEqual(['SIGINT']);
    expect(said).toEqual([]);
    expect(exits).toEqual([]);
  });

  it('gives back what a command holds before it ends the process, and nothing once let go or when the command answers', () => {
    const proc = new EventEmitter();
    const order: string[] = [];
    answerSignals(proc, {
      stderr: { write: () => {} },
      exit: (code) => {
        order.push(`exit ${code}`);
      },
      ended: () => undefined,
    });
    const opening = abortOnInterrupt();
    opening.signal.addEventListener('abort', () => order.push('given back'));
    // A command answering the signal itself: nothing is given back here.
    commandWorks(proc, 'SIGTERM');
    expect(order).toEqual([]);
    proc.emit('SIGINT');
    // Given back before the exit, which ends the process.
    expect(order).toEqual(['given back', `exit ${EXIT.interrupted}`]);
    const later = abortOnInterrupt();
    later.letGo();
    proc.emit('SIGINT');
    expect(later.signal.aborted).toBe(false);
    opening.letGo();
  });
});
