import { looksLikeIsoBmff } from './isobmff.js';

/** What the first bytes of a file say it is. */
export type Sniffed =
  | { container: 'iso' | 'mp3' | 'wav' | 'flac' | 'ogg' }
  | { container: 'unsupported'; name: string | undefined };

function ascii(bytes: Uint8Array, at: number, length: number): string {
  return String.fromCharCode(...bytes.subarray(at, at + length));
}

export function isMpegAudioSync(b: Uint8Array, at: number): boolean {
  const b1 = b[at + 1] ?? 0;
  // 11 sync bits, then a version other than "reserved" and a layer other than 00 (00 is ADTS AAC).
  return b[at] === 0xff && (b1 & 0xe0) === 0xe0 && (b1 & 0x18) !== 0x08 && (b1 & 0x06) !== 0;
}

/** Names what we do not measure, so the person knows what they gave us. */
function nameUnsupported(b: Uint8Array): string | undefined {
  if (b[0] === 0x1a && b[1] === 0x45 && b[2] === 0xdf && b[3] === 0xa3) return 'WebM/Matroska';
  if (ascii(b, 0, 4) === 'RIFF' && ascii(b, 8, 4) === 'AVI ') return 'AVI';
  if (ascii(b, 0, 3) === 'FLV') return 'FLV';
  if (b[0] === 0x47 && b[188] === 0x47) return 'MPEG-TS';
  if (b[0] === 0xff && ((b[1] ?? 0) & 0xf6) === 0xf0) return 'AAC (ADTS)';
  if (ascii(b, 0, 4) === 'FORM') return 'AIFF';
  if (b[0] === 0x89 && ascii(b, 1, 3) === 'PNG') return 'a PNG image';
  if (b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'a JPEG image';
  if (ascii(b, 0, 4) === 'GIF8') return 'a GIF image';
  const text = ascii(b, 0, 64).trimStart().toLowerCase();
  if (text.startsWith('<!doctype') || text.startsWith('<html') || text.startsWith('<?xml')) {
    return 'a web page, not a media file';
  }
  return undefined;
}

export function sniff(head: Uint8Array): Sniffed {
  if (looksLikeIsoBmff(head)) return { container: 'iso' };
  if (ascii(head, 0, 4) === 'RIFF' && ascii(head, 8, 4) === 'WAVE') return { container: 'wav' };
  if (ascii(head, 0, 4) === 'RF64' && ascii(head, 8, 4) === 'WAVE') return { container: 'wav' };
  if (ascii(head, 0, 4) === 'fLaC') return { container: 'flac' };
  if (ascii(head, 0, 4) === 'OggS') return { container: 'ogg' };
  if (ascii(head, 0, 3) === 'ID3' || isMpegAudioSync(head, 0)) return { container: 'mp3' };
  return { container: 'unsupported', name: nameUnsupported(head) };
}
