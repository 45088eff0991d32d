import { mkdir, open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';

/** Writes a small file so that its final name only ever holds complete content (temp name, fsync, rename). */
export async function writeFileAtomic(path: string, data: string | Buffer): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temp = `${path}.part`;
  const handle = await open(temp, 'w');
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await moveIntoPlace(temp, path);
}

/** Where a streamed file's content goes, a piece at a time. */
export interface TextSink {
  write(text: string): Promise<void>;
}

/**
 * Text gathered before each write to disk: few system calls, and under V8's large-object size, so the
 * joined buffer dies young instead of waiting for a full collection.
 */
const STREAM_BUFFER_CHARS = 64 * 1024;

/**
 * Writes a file of any size as `produce` hands it over, with writeFileAtomic's guarantee: the content
 * goes to `<path>.part`, is fsynced, then renamed over `path`. If `produce` throws, the temporary file
 * is removed and `path` keeps what it held before.
 */
export async function writeFileAtomicStream(
  path: string,
  produce: (sink: TextSink) => Promise<void>,
): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temp = `${path}.part`;
  const handle = await open(temp, 'w');
  let pending: string[] = [];
  let pendingLength = 0;
  const flush = async (): Promise<void> => {
    if (pendingLength === 0) return;
    const bytes = Buffer.from(pending.join(''), 'utf8');
    pending = [];
    pendingLength = 0;
    for (let offset = 0; offset < bytes.length; ) {
      const { bytesWritten } = await handle.write(bytes, offset, bytes.length - offset);
      offset += bytesWritten;
    }
  };
  const sink: TextSink = {
    async write(text) {
      pending.push(text);
      pendingLength += text.length;
      if (pendingLength >= STREAM_BUFFER_CHARS) await flush();
    },
  };
  try {
    await produce(sink);
    await flush();
    await handle.sync();
  } catch (error) {
    await handle.close();
    await rm(temp, { force: true });
    throw error;
  }
  await handle.close();
  await moveIntoPlace(temp, path);
}

/** The last step of both writers: the complete, fsynced temporary file takes the final name. */
async function moveIntoPlace(temp: string, path: string): Promise<void> {
  try {
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
}
