// The file sink of a download: a ring of blocks between the network and the disk, written to a new
// exclusive temporary file (never through a link), hashed as written, fsynced before the caller renames it.
import type { FileHandle } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { openExclusive } from '../util/fsatomic.js';
import { DiskError, type Sink, toDisk } from './download-core.js';
import { type BlockWriter, InlineWriter, sharedBlock, ThreadWriter } from './download-writer.js';

/**
 * Bytes gathered from the network (about 64 KB a chunk) before one write, for a result written on the
 * main thread: a write per chunk costs a system call and a thread-pool round trip each. Not more: on the
 * bench machine (a VM, Linux 6.18, ext4) larger writes fill the page cache with larger folios, whose fresh
 * memory is slower to fill (kernel time for 500 MB: 256 KB blocks 1.0 s, 128 KB 0.6 s).
 */
export const WRITE_BLOCK_BYTES = 128 * 1024;

/** Four blocks, up to three written at once: with two, a large download waited for the disk at every block. */
const WRITE_BLOCKS = 4;

/**
 * From this declared size on, the hash and the writes run on a thread of their own. Starting one costs
 * tens of milliseconds of CPU; below this a result is done in about that time anyway.
 */
export const THREAD_MIN_BYTES = 16 * 1024 * 1024;

/**
 * The writing thread's ring: 8 blocks of 256 KB. Measured in a prototype for 300 MB against 128 KB x 16 and
 * 1 MB x 8 (same run, 2 cores, lightly loaded): 426-445 MB/s, 402-431 and 331-333; hashing and writing on
 * the main thread 360-389, curl + sync 552-623.
 */
const THREAD_BLOCK_BYTES = 256 * 1024;
const THREAD_BLOCKS = 8;

/**
 * A large result's written bytes are sent to the disk every this many bytes while the rest still arrives
 * (fdatasync on the thread pool), so the final fsync waits only for the tail instead of the whole file
 * (prototype, 300 MB: the final fsync took 69 ms instead of 150-165; on the loaded bench machine the whole
 * download's figure could not tell the two apart).
 */
export const SYNC_EVERY_BYTES = 32 * 1024 * 1024;

interface Ring {
  blockSize: number;
  count: number;
  alloc: (size: number) => Buffer;
  /** Start writeback every SYNC_EVERY_BYTES. */
  syncAhead: boolean;
}

/**
 * Writing threads at once, at most: one per core. A run downloads up to 32 results at a time; more threads
 * than cores only take turns, each with its own start-up and memory, so the others write on the main thread.
 */
const MAX_THREADS = Math.max(1, availableParallelism());
let threads = 0;

/** Opens the exclusive temporary file and the sink that fills it. `declared`: the Content-Length, if any. */
export async function openFileSink(temp: string, declared: number | undefined): Promise<Sink> {
  const handle = await openExclusive(temp).catch(toDisk);
  const threaded = declared !== undefined && declared >= THREAD_MIN_BYTES && threads < MAX_THREADS;
  try {
    if (threaded) {
      const ring = {
        blockSize: THREAD_BLOCK_BYTES,
        count: THREAD_BLOCKS,
        alloc: sharedBlock,
        syncAhead: true,
      };
      const writer = new ThreadWriter(handle.fd);
      threads++;
      return new FileSink(handle, writer, ring, () => threads--);
    }
    // A body under one block gets one block of its own size.
    const blockSize = Math.max(1, Math.min(WRITE_BLOCK_BYTES, declared ?? WRITE_BLOCK_BYTES));
    const ring = { blockSize, count: WRITE_BLOCKS, alloc: Buffer.allocUnsafeSlow, syncAhead: false };
    return new FileSink(handle, new InlineWriter(handle), ring);
  } catch (error) {
    await handle.close().catch(() => {});
    throw new DiskError(error);
  }
}

/**
 * One block fills from the network while the others are being written, so reading waits for the disk only
 * when it is all the other blocks behind. Memory is the ring, whatever the size; blocks are allocated when
 * first needed (a small image never holds a second one).
 */
class FileSink implements Sink {
  readonly #blocks: (Buffer | undefined)[];
  /** A block's write under way; never rejected: a failure is kept in #failed and reported at the next step. */
  readonly #busy: (Promise<void> | undefined)[];
  #current = 0;
  #filled = 0;
  #position = 0;
  #failed: DiskError | undefined;
  #syncing: Promise<void> | undefined;
  #syncedTo = 0;

  #closed = false;

  constructor(
    readonly handle: FileHandle,
    readonly writer: BlockWriter,
    readonly ring: Ring,
    /** Called once when the sink is closed (a writing thread is counted while it lives). */
    readonly onClose: () => void = () => {},
  ) {
    this.#blocks = new Array(ring.count).fill(undefined);
    this.#busy = new Array(ring.count).fill(undefined);
  }

  write(chunk: Buffer): Promise<void> | undefined {
    let offset = 0;
    while (offset < chunk.length) {
      if (this.#failed) return Promise.reject(this.#failed);
      const busy = this.#busy[this.#current];
      if (busy !== undefined) {
        const rest = chunk.subarray(offset);
        return busy.then(() => this.write(rest));
      }
      let block = this.#blocks[this.#current];
      if (block === undefined) {
        // Unfilled bytes are never written (only subarray(0, filled) is), so no old memory can leak out.
        block = this.ring.alloc(this.ring.blockSize);
        this.#blocks[this.#current] = block;
      }
      const end = Math.min(chunk.length, offset + block.length - this.#filled);
      this.#filled += chunk.copy(block, this.#filled, offset, end);
      offset = end;
      if (this.#filled === block.length) this.#flush();
    }
    return undefined;
  }

  /** Hands the current block to the writer and moves on to the next. */
  #flush(): void {
    const block = this.#blocks[this.#current];
    if (block === undefined || this.#filled === 0) return;
    const index = this.#current;
    this.#busy[index] = this.writer.write(block.subarray(0, this.#filled), this.#position).then(
      () => {
        this.#busy[index] = undefined;
      },
      (error: unknown) => {
        this.#busy[index] = undefined;
        this.#failed ??= new DiskError(error);
      },
    );
    this.#position += this.#filled;
    this.#filled = 0;
    this.#current = (index + 1) % this.ring.count;
    this.#syncAhead();
  }

  #syncAhead(): void {
    if (!this.ring.syncAhead || this.#syncing || this.#position - this.#syncedTo < SYNC_EVERY_BYTES) return;
    const upTo = this.#position;
    this.#syncing = this.handle.datasync().then(
      () => {
        this.#syncedTo = upTo;
        this.#syncing = undefined;
      },
      (error: unknown) => {
        this.#failed ??= new DiskError(error);
        this.#syncing = undefined;
      },
    );
  }

  async #settle(): Promise<void> {
    while (this.#syncing || this.#busy.some((busy) => busy !== undefined)) {
      await Promise.all([this.#syncing, ...this.#busy]);
    }
  }

  async finish(): Promise<string> {
    this.#flush();
    await this.#settle();
    if (this.#failed) throw this.#failed;
    try {
      const sha256 = await this.writer.digest();
      await this.handle.sync();
      return sha256;
    } catch (error) {
      throw new DiskError(error);
    } finally {
      await this.#close();
    }
  }

  async abort(): Promise<void> {
    await this.#close();
  }

  /** The writer first: a thread must never write to a descriptor after it is closed (and maybe reused). */
  async #close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      this.onClose();
    }
    await this.writer.close().catch(() => {});
    // A write still under way when the body broke off finishes before the file is closed and removed.
    await this.#settle();
    await this.handle.close().catch(() => {});
  }
}
