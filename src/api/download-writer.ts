// Hashing and writing a large result on a thread of its own, so that the main thread only reads the
// network. The blocks live in shared memory: a block is handed over by posting a view of it (no copy),
// and handed back when the thread has hashed it and written it at its position. The file itself is
// opened (exclusively, never through a link), fsynced and closed by the main thread; the thread only
// writes to its descriptor.
import { createHash } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { Worker } from 'node:worker_threads';

/** Writes one block at its position; resolves once the block may be filled again. */
export interface BlockWriter {
  write(bytes: Buffer, position: number): Promise<void>;
  /** After the last write has resolved: the SHA-256 of every byte written, in order. */
  digest(): Promise<string>;
  /** Releases the writer (ends the thread); safe to call more than once, and after a failure. */
  close(): Promise<void>;
}

/** The errno fields of a write that failed on the thread, rebuilt as an Error on this side. */
interface WriteError {
  message: string;
  code?: string;
  path?: string;
}

type Reply = { id: number; error?: WriteError } | { sha256: string };

// The thread's code as a string (eval: true): it runs the same from src under tsx or vitest and from
// dist, where a separate worker file would need its own build and loader set-up.
const THREAD = `
const { parentPort, workerData } = require('node:worker_threads');
const { writeSync } = require('node:fs');
const { createHash } = require('node:crypto');
const hash = createHash('sha256');
parentPort.on('message', (m) => {
  if (m.end) return void parentPort.postMessage({ sha256: hash.digest('hex') });
  try {
    hash.update(m.bytes);
    let offset = 0;
    while (offset < m.bytes.length) {
      offset += writeSync(workerData.fd, m.bytes, offset, m.bytes.length - offset, m.position + offset);
    }
    parentPort.postMessage({ id: m.id });
  } catch (error) {
    parentPort.postMessage({ id: m.id, error: { message: String(error && error.message), code: error && error.code, path: error && error.path } });
  }
});
`;

/** For tests: called with each writing thread as it starts, so that a test can make one die. */
export const writerThreads: { started?: (worker: Worker) => void } = {};

/** Blocks for the thread: shared memory, so that posting a view hands it over without a copy. */
export const sharedBlock = (size: number): Buffer => Buffer.from(new SharedArrayBuffer(size));

export class ThreadWriter implements BlockWriter {
  readonly #worker: Worker;
  readonly #waiting = new Map<number, { resolve: () => void; reject: (error: Error) => void }>();
  #digest: { resolve: (sha256: string) => void; reject: (error: Error) => void } | undefined;
  #next = 0;
  #dead: Error | undefined;

  constructor(fd: number) {
    // Its own empty execArgv: a thread inherits the parent's by default, and under `node --input-type=module
    // -e …` that flag would make this CommonJS code a module where `require` does not exist.
    this.#worker = new Worker(THREAD, { eval: true, execArgv: [], workerData: { fd } });
    this.#worker.on('message', (reply: Reply) => this.#answer(reply));
    this.#worker.on('error', (error) => this.#die(error.message));
    this.#worker.on('exit', (code) => this.#die(`exit code ${code}`));
    writerThreads.started?.(this.#worker);
  }

  #answer(reply: Reply): void {
    if ('sha256' in reply) {
      this.#digest?.resolve(reply.sha256);
      return;
    }
    const waiter = this.#waiting.get(reply.id);
    this.#waiting.delete(reply.id);
    if (reply.error === undefined) waiter?.resolve();
    else waiter?.reject(Object.assign(new Error(reply.error.message), reply.error));
  }

  /** The thread ended before its work was done: every wait fails with the reason, and so does every later one. */
  #die(reason: string): void {
    this.#dead ??= new Error(`the thread writing the file stopped (${reason})`);
    for (const waiter of this.#waiting.values()) waiter.reject(this.#dead);
    this.#waiting.clear();
    this.#digest?.reject(this.#dead);
  }

  write(bytes: Buffer, position: number): Promise<void> {
    if (this.#dead) return Promise.reject(this.#dead);
    const id = this.#next++;
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject });
      this.#worker.postMessage({ id, bytes, position });
    });
  }

  digest(): Promise<string> {
    if (this.#dead) return Promise.reject(this.#dead);
    return new Promise((resolve, reject) => {
      this.#digest = { resolve, reject };
      this.#worker.postMessage({ end: true });
    });
  }

  async close(): Promise<void> {
    // Whatever ends the thread from here on is not a failure of a write: nothing waits any more.
    this.#dead ??= new Error('closed');
    await this.#worker.terminate();
  }
}

/** Hashes and writes on the calling thread (small results: a thread costs more than it saves there). */
export class InlineWriter implements BlockWriter {
  readonly #hash = createHash('sha256');
  constructor(readonly handle: FileHandle) {}

  /** An explicit position keeps the file in order when two writes overlap. */
  async write(bytes: Buffer, position: number): Promise<void> {
    this.#hash.update(bytes);
    let offset = 0;
    while (offset < bytes.length) {
      const { bytesWritten } = await this.handle.write(
        bytes,
        offset,
        bytes.length - offset,
        position + offset,
      );
      offset += bytesWritten;
    }
  }

  digest(): Promise<string> {
    return Promise.resolve(this.#hash.digest('hex'));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
