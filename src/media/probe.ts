import { open, stat } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { type IAudioMetadata, parseBuffer, parseFile } from 'music-metadata';
import pLimit from 'p-limit';
import type { Dispatcher } from 'undici';
import { readMovie } from './isobmff.js';
import { openRemote, type RemoteSource } from './remote.js';
import { sniff } from './sniff.js';
import { type ByteSource, fileSource, ProbeFailure } from './source.js';
import type { MediaKind, ProbeResult, Prober } from './types.js';
import { readWavSeconds } from './wav.js';

export interface ProberOptions {
  /** undici dispatcher for http(s) locations (tests and proxies); the global one by default. */
  dispatcher?: Dispatcher;
  /** Most bytes read from one location in one piece (a whole audio file, a moov box). Default 64 MiB. */
  maxBytes?: number;
  /** Time allowed to measure one location, all requests included. Default 30 000 ms. */
  timeoutMs?: number;
}

export const defaultMaxBytes = 64 * 1024 * 1024;
export const defaultTimeoutMs = 30_000;

const supported = 'only MP4/MOV video and MP3/M4A/WAV/FLAC/OGG audio';

type Container = 'mp4' | 'mov' | 'm4a' | 'mp3' | 'wav' | 'flac' | 'ogg';
type Located = { type: 'file'; path: string } | { type: 'http'; url: URL };

interface Measured {
  seconds: number;
  container: Container;
  hasVideo: boolean;
  hasAudio: boolean;
}

/** Where the bytes come from, and how music-metadata gets at them. */
interface Media {
  source: ByteSource;
  /** Parses audio; `whole` asks for every byte (frame counting) rather than the header only. */
  parseAudio(mimeType: string, whole: boolean): Promise<IAudioMetadata>;
}

const audioMime = { mp3: 'audio/mpeg', flac: 'audio/flac', ogg: 'audio/ogg' } as const;

/** The location as shown in reasons: a signed link's query string can hold a secret, so it is cut. */
export function displayLocation(location: string): string {
  if (!/^https?:/i.test(location)) return location;
  try {
    const url = new URL(location);
    const hidden = url.search ? '?…' : '';
    url.search = '';
    url.hash = '';
    url.username = '';
    url.password = '';
    return url.href + hidden;
  } catch {
    return location;
  }
}

function locate(location: string): Located {
  // One letter before the colon is a Windows drive, not a scheme.
  const scheme = /^([a-z][a-z0-9+.-]+):/i.exec(location)?.[1]?.toLowerCase();
  if (scheme === undefined) return { type: 'file', path: location };
  if (scheme === 'file') {
    try {
      return { type: 'file', path: fileURLToPath(location) };
    } catch {
      throw new ProbeFailure('not a valid file: URL');
    }
  }
  if (scheme === 'http' || scheme === 'https') {
    try {
      return { type: 'http', url: new URL(location) };
    } catch {
      throw new ProbeFailure('not a valid URL');
    }
  }
  throw new ProbeFailure(
    `${scheme}: links are not supported; give a local path, a file: URL or an http(s) URL`,
  );
}

async function withLocalFile<T>(path: string, use: (media: Media) => Promise<T>): Promise<T> {
  let size: number;
  try {
    const info = await stat(path);
    if (info.isDirectory()) throw new ProbeFailure('it is a folder, not a file');
    size = info.size;
  } catch (error) {
    if (error instanceof ProbeFailure) throw error;
    const code = (error as { code?: unknown }).code;
    throw new ProbeFailure(code === 'ENOENT' ? 'file not found' : `cannot read it (${String(code)})`);
  }
  const handle = await open(path, 'r');
  try {
    return await use({
      source: fileSource(handle, size),
      parseAudio: () => parseFile(path, { duration: true, skipCovers: true }),
    });
  } finally {
    await handle.close();
  }
}

function remoteMedia(remote: RemoteSource): Media {
  return {
    source: remote,
    async parseAudio(mimeType, whole) {
      if (!whole) {
        const head = await remote.read(0, 64 * 1024);
        const fileInfo = remote.size === undefined ? { mimeType } : { mimeType, size: remote.size };
        const meta = await parseBuffer(head, fileInfo, { skipCovers: true });
        if (meta.format.duration !== undefined) return meta;
      }
      const bytes = await remote.whole();
      return parseBuffer(bytes, { mimeType, size: bytes.length }, { duration: true, skipCovers: true });
    },
  };
}

async function measure(media: Media, maxBytes: number): Promise<Measured> {
  const sniffed = sniff(await media.source.read(0, 256));
  switch (sniffed.container) {
    case 'unsupported': {
      const what = sniffed.name ? `${sniffed.name}; ` : '';
      throw new ProbeFailure(`unsupported container (${what}${supported})`);
    }
    case 'iso':
      return readMovie(media.source, maxBytes);
    case 'wav':
      return {
        seconds: await readWavSeconds(media.source),
        container: 'wav',
        hasVideo: false,
        hasAudio: true,
      };
    default: {
      const container = sniffed.container;
      // MP3 and OGG headers may only estimate the length (VBR without a Xing header, Ogg's last page):
      // count the frames. FLAC's STREAMINFO states the exact sample count.
      let meta: IAudioMetadata;
      try {
        meta = await media.parseAudio(audioMime[container], container !== 'flac');
      } catch (error) {
        if (error instanceof ProbeFailure) throw error;
        const message = error instanceof Error ? error.message : String(error);
        throw new ProbeFailure(`could not read it as ${container.toUpperCase()} (${message})`);
      }
      const seconds = meta.format.duration;
      if (seconds === undefined)
        throw new ProbeFailure(`its ${container.toUpperCase()} length could not be found`);
      return { seconds, container, hasVideo: false, hasAudio: true };
    }
  }
}

function checkKind(measured: Measured, kind: MediaKind): void {
  if (kind === 'video' && !measured.hasVideo) {
    const audioOnly = measured.container !== 'mp4' && measured.container !== 'mov';
    throw new ProbeFailure(
      audioOnly
        ? `it is ${measured.container.toUpperCase()} audio, and a video is needed`
        : 'it has no video track, and a video is needed',
    );
  }
  if (kind === 'audio' && !measured.hasAudio) throw new ProbeFailure('it has no audio track');
}

function checkOptions(maxBytes: number, timeoutMs: number): void {
  if (!Number.isInteger(maxBytes) || maxBytes < 1) {
    throw new TypeError(`maxBytes: must be an integer >= 1, got ${maxBytes}`);
  }
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new TypeError(`timeoutMs: must be a number > 0, got ${timeoutMs}`);
  }
}

/**
 * Measures an input's length from a local path, a file: URL or an http(s) URL. Never throws for a bad
 * input: every failure comes back as `{ ok: false, reason }` written for the person who gave it.
 */
export function createProber(opts: ProberOptions = {}): Prober {
  const maxBytes = opts.maxBytes ?? defaultMaxBytes;
  const timeoutMs = opts.timeoutMs ?? defaultTimeoutMs;
  checkOptions(maxBytes, timeoutMs);

  return async (location: string, kind: MediaKind): Promise<ProbeResult> => {
    const fail = (why: string): ProbeResult => ({
      ok: false,
      reason: `cannot measure ${displayLocation(location)}: ${why}`,
    });
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      const where = locate(location);
      if (kind === 'image') {
        // An image has no length; only its size matters (the face swap's reference image: 10 MB).
        const bytes =
          where.type === 'file'
            ? await withLocalFile(where.path, async (media) => media.source.size)
            : (await openRemote(where.url, { dispatcher: opts.dispatcher, maxBytes, timeoutMs, signal }))
                .size;
        if (bytes === undefined) return fail('the server does not say how large the image is');
        return { ok: true, seconds: 0, bytes, container: 'image' };
      }
      let measured: Measured;
      let bytes: number | undefined;
      if (where.type === 'file') {
        [measured, bytes] = await withLocalFile(where.path, async (media) => [
          await measure(media, maxBytes),
          media.source.size,
        ]);
      } else {
        const remote = await openRemote(where.url, {
          dispatcher: opts.dispatcher,
          maxBytes,
          timeoutMs,
          signal,
        });
        measured = await measure(remoteMedia(remote), maxBytes);
        bytes = remote.size;
      }
      checkKind(measured, kind);
      if (!Number.isFinite(measured.seconds) || measured.seconds <= 0) return fail('its length is 0 seconds');
      return {
        ok: true,
        seconds: measured.seconds,
        container: measured.container,
        ...(bytes === undefined ? {} : { bytes }),
      };
    } catch (error) {
      if (error instanceof ProbeFailure) return fail(error.message);
      if (signal.aborted) return fail(`not measured within ${timeoutMs / 1000} s`);
      return fail(`unexpected error (${error instanceof Error ? error.message : String(error)})`);
    }
  };
}

export interface ProbeItem {
  location: string;
  kind: MediaKind;
}

/**
 * Measures each distinct location once, at most `concurrency` at a time. Keyed by location; when one
 * location is listed with several kinds, the first kind listed is the one checked.
 */
export async function probeMany(
  prober: Prober,
  items: Iterable<ProbeItem>,
  concurrency: number,
): Promise<Map<string, ProbeResult>> {
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new TypeError(`concurrency: must be an integer >= 1, got ${concurrency}`);
  }
  const kinds = new Map<string, MediaKind>();
  for (const item of items) if (!kinds.has(item.location)) kinds.set(item.location, item.kind);
  const limit = pLimit(concurrency);
  const entries = await Promise.all(
    [...kinds].map(([location, kind]) =>
      limit(async (): Promise<[string, ProbeResult]> => {
        try {
          return [location, await prober(location, kind)];
        } catch (error) {
          // A prober is not supposed to throw; a custom one might, and one bad input must not sink the rest.
          const message = error instanceof Error ? error.message : String(error);
          return [location, { ok: false, reason: `cannot measure ${displayLocation(location)}: ${message}` }];
        }
      }),
    ),
  );
  return new Map(entries);
}
