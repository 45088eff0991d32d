import type { FileHandle } from 'node:fs/promises';
import { MediabatchError } from '../errors.js';

/** A reason to give up on measuring one file; the prober turns it into `{ ok: false, reason }`. */
export class ProbeFailure extends MediabatchError {
  override name = 'ProbeFailure';
}

/** Random access to a file's bytes, wherever the file is. */
export interface ByteSource {
  /** Total size in bytes, when known. */
  readonly size: number | undefined;
  /** Up to `length` bytes from `offset`; fewer only at the end of the file. */
  read(offset: number, length: number): Promise<Uint8Array>;
}

export function bufferSource(bytes: Uint8Array): ByteSource {
  return {
    size: bytes.length,
    read: async (offset, length) => bytes.subarray(offset, offset + length),
  };
}

export function fileSource(handle: FileHandle, size: number): ByteSource {
  return {
    size,
    async read(offset, length) {
      const wanted = Math.max(0, Math.min(length, size - offset));
      const buffer = new Uint8Array(wanted);
      let done = 0;
      while (done < wanted) {
        const { bytesRead } = await handle.read(buffer, done, wanted - done, offset + done);
        if (bytesRead === 0) break;
        done += bytesRead;
      }
      return buffer.subarray(0, done);
    },
  };
}

/** Human size for messages: 64 MiB, 300 KiB, 512 bytes. */
export function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MiB`;
  if (bytes >= 1024) return `${Math.round((bytes / 1024) * 10) / 10} KiB`;
  return `${bytes} bytes`;
}
