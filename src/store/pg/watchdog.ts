// A bound on every wait inside libpq. The client is synchronous: while a statement waits, this process's
// event loop (its timers, its signal handlers) is stopped with it. The server's statement_timeout ends a
// slow statement, and the TCP keepalives and tcp_user_timeout end a wait on a network that stopped
// acknowledging; neither ends a wait on something that acknowledges every byte and answers nothing (a
// hung pooler or proxy, a frozen server process). A thread of its own watches a stamp this thread sets
// around each call into libpq; past the deadline it writes one line and ends the process, which is then
// a dead worker as after a crash: every intent was committed before its request was sent, so the run
// resumes with nothing sent twice.
//
// Why not libpq's asynchronous calls with a deadline: node offers no synchronous wait on a socket with a
// timeout, so a synchronous-looking wait would have to poll the socket in a loop of short sleeps, burning
// a core on every statement of every worker. And why SIGKILL: a worker thread cannot end the process
// with an exit code (its process.exit() ends only the thread), and SIGTERM is caught by the run's
// handler, which would run on the very event loop that is stopped.

import { Worker } from 'node:worker_threads';

/** What the server may take beyond its own statement_timeout before the wait counts as hung. */
export const WATCH_MARGIN_MS = 5000;

const THREAD = `
const { workerData, parentPort } = require('node:worker_threads');
const { writeSync } = require('node:fs');
const deadline = new Float64Array(workerData.deadline);
const current = new Int32Array(workerData.current);
const lines = new Map();
parentPort.on('message', (m) => lines.set(m.id, m.line));
setInterval(() => {
  const at = deadline[0];
  if (at === 0 || Date.now() < at) return;
  writeSync(2, 'mediabatch: ' + (lines.get(current[0]) || 'the PostgreSQL state did not answer in time') + '\\n');
  process.kill(process.pid, 'SIGKILL');
}, 200);
`;

interface Thread {
  worker: Worker;
  /** The time (ms since the epoch) past which the call in progress counts as hung; 0 when none is. */
  deadline: Float64Array;
  /** Which watch the call in progress belongs to (its line). */
  current: Int32Array;
  ids: number;
}

let thread: Thread | undefined;

function started(): Thread {
  if (thread === undefined) {
    const deadline = new SharedArrayBuffer(8);
    const current = new SharedArrayBuffer(4);
    const worker = new Worker(THREAD, { eval: true, workerData: { deadline, current } });
    // The watchdog never keeps a process alive that has nothing else to do.
    worker.unref();
    thread = {
      worker,
      deadline: new Float64Array(deadline),
      current: new Int32Array(current),
      ids: 0,
    };
  }
  return thread;
}

/** Runs calls into libpq under a deadline of `limitMs`, past which the process ends with `line`. */
export interface Watch {
  around<T>(call: () => T): T;
}

const UNWATCHED: Watch = { around: (call) => call() };

/** A watch for one connection; `limitMs` of 0 (the user turned statement_timeout off) watches nothing. */
export function watch(limitMs: number, line: string): Watch {
  if (limitMs <= 0) return UNWATCHED;
  const t = started();
  t.ids += 1;
  const id = t.ids;
  t.worker.postMessage({ id, line });
  return {
    around<T>(call: () => T): T {
      const outer = { deadline: t.deadline[0] ?? 0, id: t.current[0] ?? 0 };
      t.current[0] = id;
      t.deadline[0] = Date.now() + limitMs;
      try {
        return call();
      } finally {
        t.deadline[0] = outer.deadline;
        t.current[0] = outer.id;
      }
    },
  };
}

/**
 * A duration setting as PostgreSQL reads it (`60000`, `60s`, `1min`): milliseconds, or undefined when it is
 * not one mediabatch can read (the server would refuse it anyway).
 */
export function durationMs(value: string): number | undefined {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(us|ms|s|min|h|d)?\s*$/.exec(value);
  if (match === null) return undefined;
  const unit = { us: 0.001, ms: 1, s: 1000, min: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] ?? 'ms'];
  return Number(match[1]) * (unit ?? 1);
}
