import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  detectMediaType,
  type MediaType,
  mediaTypeOfBytes,
  mediaTypeOfContentType,
  mediaTypeOfName,
} from '../../src/media/kind.js';
import { fixtures } from './serve.js';

const bytes = (...parts: (string | number[])[]): Buffer =>
  Buffer.concat([
    ...parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'latin1') : Buffer.from(p))),
    Buffer.alloc(24),
  ]);
const u32 = (n: number) => [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff];
const ftyp = (brand: string) => bytes(u32(24), 'ftyp', brand, u32(0), 'isom');
const fixture = (name: string) => readFileSync(join(fixtures, name)).subarray(0, 64);

describe('mediaTypeOfBytes', () => {
  it.each<[string, Buffer, MediaType]>([
    ['PNG', bytes([0x89], 'PNG\r\n\x1a\n'), { kind: 'image', ext: 'png' }],
    ['JPEG', bytes([0xff, 0xd8, 0xff, 0xe0], [0, 0x10], 'JFIF'), { kind: 'image', ext: 'jpg' }],
    ['WebP', bytes('RIFF', u32(100), 'WEBPVP8 '), { kind: 'image', ext: 'webp' }],
    ['GIF87a', bytes('GIF87a'), { kind: 'image', ext: 'gif' }],
    ['GIF89a', bytes('GIF89a'), { kind: 'image', ext: 'gif' }],
    ['MP4 (ftyp isom)', ftyp('isom'), { kind: 'video', ext: 'mp4' }],
    ['MP4 (ftyp mp42)', ftyp('mp42'), { kind: 'video', ext: 'mp4' }],
    ['MP4 fixture', fixture('video-5s.mp4'), { kind: 'video', ext: 'mp4' }],
    ['MOV (ftyp qt)', ftyp('qt  '), { kind: 'video', ext: 'mov' }],
    ['MOV fixture', fixture('clip-3s.mov'), { kind: 'video', ext: 'mov' }],
    ['old QuickTime (moov first)', bytes(u32(100), 'moov'), { kind: 'video', ext: 'mov' }],
    ['WebM/Matroska', bytes([0x1a, 0x45, 0xdf, 0xa3]), { kind: 'video', ext: 'webm' }],
    ['MP3 with ID3', bytes('ID3', [4, 0]), { kind: 'audio', ext: 'mp3' }],
    ['MP3 frame sync', bytes([0xff, 0xfb, 0x90, 0x64]), { kind: 'audio', ext: 'mp3' }],
    ['MP3 fixture', fixture('song-30s.mp3'), { kind: 'audio', ext: 'mp3' }],
    ['WAV', bytes('RIFF', u32(100), 'WAVEfmt '), { kind: 'audio', ext: 'wav' }],
    ['WAV fixture', fixture('voice-2s.wav'), { kind: 'audio', ext: 'wav' }],
    ['FLAC fixture', fixture('clip-1s.flac'), { kind: 'audio', ext: 'flac' }],
    ['OGG fixture', fixture('clip-1s.ogg'), { kind: 'audio', ext: 'ogg' }],
    ['M4A (ftyp M4A)', ftyp('M4A '), { kind: 'audio', ext: 'm4a' }],
    ['M4A fixture', fixture('clip-1s.m4a'), { kind: 'audio', ext: 'm4a' }],
  ])('%s', (_name, head, expected) => {
    expect(mediaTypeOfBytes(head)).toEqual(expected);
  });

  it.each<[string, Buffer]>([
    ['nothing', Buffer.alloc(0)],
    ['AVIF, a still picture in an ISO file', ftyp('avif')],
    ['HEIC', ftyp('heic')],
    ['a web page', bytes('<!doctype html><html>')],
    ['JSON', bytes('{"error":"expired"}')],
    ['AAC in ADTS', bytes([0xff, 0xf1, 0x50, 0x80])],
    ['AVI', bytes('RIFF', u32(100), 'AVI LIST')],
    ['a PNG cut after 4 bytes', Buffer.from([0x89, 0x50, 0x4e, 0x47])],
  ])('does not name %s', (_name, head) => {
    expect(mediaTypeOfBytes(head)).toBeUndefined();
  });
});

describe('detectMediaType', () => {
  const jpeg = bytes([0xff, 0xd8, 0xff, 0xdb]);
  const junk = bytes('not a known format');

  it('trusts the bytes over the Content-Type and the name', () => {
    expect(detectMediaType(jpeg, 'image/png', '1.png')).toEqual({
      kind: 'image',
      ext: 'jpg',
      typedBy: 'bytes',
    });
  });

  it.each<[string | undefined, string, ReturnType<typeof detectMediaType>]>([
    ['audio/mpeg', '1.png', { kind: 'audio', ext: 'mp3', typedBy: 'content-type' }],
    ['Video/MP4; codecs="avc1"', '1.png', { kind: 'video', ext: 'mp4', typedBy: 'content-type' }],
    ['audio/webm', '1.bin', { kind: 'audio', ext: 'webm', typedBy: 'content-type' }],
    ['application/octet-stream', '2.JPEG', { kind: 'image', ext: 'jpg', typedBy: 'name' }],
    [undefined, 'out/x/3.wav', { kind: 'audio', ext: 'wav', typedBy: 'name' }],
    ['application/octet-stream', '4.bin', undefined],
  ])('unknown bytes served as %s named %s', (contentType, name, expected) => {
    expect(detectMediaType(junk, contentType, name)).toEqual(expected);
  });

  it('reads Content-Type and names on their own', () => {
    expect(mediaTypeOfContentType('image/jpeg')).toEqual({ kind: 'image', ext: 'jpg' });
    expect(mediaTypeOfContentType('')).toBeUndefined();
    expect(mediaTypeOfName('clip.mov')).toEqual({ kind: 'video', ext: 'mov' });
    expect(mediaTypeOfName('noext')).toBeUndefined();
  });
});
