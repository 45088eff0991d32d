// What a downloaded result really is, told by its first bytes before anything a server or a job record
// says: a link typed `image` may hold an MP4, and an object store may label everything
// application/octet-stream. Pure.

import { extname } from 'node:path';
import { isMpegAudioSync } from './sniff.js';
import type { MediaKind } from './types.js';

export type MediaExt =
  | 'png'
  | 'jpg'
  | 'webp'
  | 'gif'
  | 'mp4'
  | 'mov'
  | 'webm'
  | 'mp3'
  | 'wav'
  | 'flac'
  | 'ogg'
  | 'm4a';

export interface MediaType {
  kind: MediaKind;
  ext: MediaExt;
}

/** Bytes enough for every signature below (RIFF/WEBP and ftyp brands end at byte 12). */
export const SNIFF_BYTES = 32;

const KIND_OF: Record<MediaExt, MediaKind> = {
  png: 'image',
  jpg: 'image',
  webp: 'image',
  gif: 'image',
  mp4: 'video',
  mov: 'video',
  webm: 'video',
  mp3: 'audio',
  wav: 'audio',
  flac: 'audio',
  ogg: 'audio',
  m4a: 'audio',
};

const typed = (ext: MediaExt): MediaType => ({ kind: KIND_OF[ext], ext });

function ascii(bytes: Uint8Array, at: number, length: number): string {
  return String.fromCharCode(...bytes.subarray(at, at + length));
}

// ISO base media brands that are still pictures (AVIF, HEIF): not a video, and no extension of ours fits.
const STILL_BRANDS = new Set(['avif', 'avis', 'heic', 'heix', 'hevc', 'heim', 'heis', 'mif1', 'msf1']);

function isoType(head: Uint8Array): MediaType | undefined {
  const box = ascii(head, 4, 4);
  if (box === 'moov') return typed('mov');
  if (box !== 'ftyp' || head.length < 12) return undefined;
  const brand = ascii(head, 8, 4);
  if (brand === 'qt  ') return typed('mov');
  if (brand === 'M4A ' || brand === 'M4B ') return typed('m4a');
  if (STILL_BRANDS.has(brand)) return undefined;
  return typed('mp4');
}

/** The type the magic number at the start of a file names, or undefined when none of ours matches. */
export function mediaTypeOfBytes(head: Uint8Array): MediaType | undefined {
  if (head.length >= 8 && head[0] === 0x89 && ascii(head, 1, 7) === 'PNG\r\n\x1a\n') return typed('png');
  if (head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return typed('jpg');
  if (ascii(head, 0, 4) === 'RIFF' && ascii(head, 8, 4) === 'WEBP') return typed('webp');
  if (ascii(head, 0, 6) === 'GIF87a' || ascii(head, 0, 6) === 'GIF89a') return typed('gif');
  const iso = isoType(head);
  if (iso) return iso;
  if (head[0] === 0x1a && head[1] === 0x45 && head[2] === 0xdf && head[3] === 0xa3) return typed('webm');
  if ((ascii(head, 0, 4) === 'RIFF' || ascii(head, 0, 4) === 'RF64') && ascii(head, 8, 4) === 'WAVE')
    return typed('wav');
  if (ascii(head, 0, 4) === 'fLaC') return typed('flac');
  if (ascii(head, 0, 4) === 'OggS') return typed('ogg');
  if (ascii(head, 0, 3) === 'ID3' || isMpegAudioSync(head, 0)) return typed('mp3');
  return undefined;
}

const BY_CONTENT_TYPE: Record<string, MediaExt> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/jpg': 'jpg',
  'image/pjpeg': 'jpg',
  'image/webp': 'webp',
  'image/gif': 'gif',
  'video/mp4': 'mp4',
  'video/quicktime': 'mov',
  'video/webm': 'webm',
  'video/x-matroska': 'webm',
  'audio/webm': 'webm',
  'audio/mpeg': 'mp3',
  'audio/mp3': 'mp3',
  'audio/wav': 'wav',
  'audio/wave': 'wav',
  'audio/x-wav': 'wav',
  'audio/vnd.wave': 'wav',
  'audio/flac': 'flac',
  'audio/x-flac': 'flac',
  'audio/ogg': 'ogg',
  'audio/mp4': 'm4a',
  'audio/m4a': 'm4a',
  'audio/x-m4a': 'm4a',
};

/** The type a Content-Type header names (parameters and case ignored), or undefined. */
export function mediaTypeOfContentType(contentType: string | undefined): MediaType | undefined {
  const essence = contentType?.split(';')[0]?.trim().toLowerCase();
  const ext = essence === undefined ? undefined : BY_CONTENT_TYPE[essence];
  if (ext === undefined) return undefined;
  // audio/webm is WebM all the same, but it is sound only.
  return essence === 'audio/webm' ? { kind: 'audio', ext } : typed(ext);
}

const EXT_ALIASES: Record<string, MediaExt> = { jpeg: 'jpg', jpe: 'jpg', mkv: 'webm', oga: 'ogg', qt: 'mov' };

/** The type a file name's extension names, or undefined. */
export function mediaTypeOfName(name: string): MediaType | undefined {
  const ext = extname(name).slice(1).toLowerCase();
  if (ext in KIND_OF) return typed(ext as MediaExt);
  const alias = EXT_ALIASES[ext];
  return alias === undefined ? undefined : typed(alias);
}

export type TypedBy = 'bytes' | 'content-type' | 'name';

/** Bytes first, then the server's Content-Type, then the name the caller chose. */
export function detectMediaType(
  head: Uint8Array,
  contentType: string | undefined,
  name: string,
): (MediaType & { typedBy: TypedBy }) | undefined {
  const fromBytes = mediaTypeOfBytes(head);
  if (fromBytes) return { ...fromBytes, typedBy: 'bytes' };
  const fromHeader = mediaTypeOfContentType(contentType);
  if (fromHeader) return { ...fromHeader, typedBy: 'content-type' };
  const fromName = mediaTypeOfName(name);
  return fromName && { ...fromName, typedBy: 'name' };
}
