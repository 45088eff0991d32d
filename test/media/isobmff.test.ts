import { describe, expect, it } from 'vitest';
import { movieFromMoov, readMovie } from '../../src/media/isobmff.js';
import { sniff } from '../../src/media/sniff.js';
import { bufferSource } from '../../src/media/source.js';
import { readWavSeconds } from '../../src/media/wav.js';

function box(type: string, ...payload: Uint8Array[]): Uint8Array {
  const size = 8 + payload.reduce((n, p) => n + p.length, 0);
  const out = new Uint8Array(size);
  new DataView(out.buffer).setUint32(0, size);
  out.set(new TextEncoder().encode(type), 4);
  let at = 8;
  for (const p of payload) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function mvhd(version: 0 | 1, timescale: number, duration: number): Uint8Array {
  const p = new Uint8Array(version === 1 ? 108 : 96);
  const dv = new DataView(p.buffer);
  p[0] = version;
  if (version === 1) {
    dv.setUint32(20, timescale);
    dv.setBigUint64(24, BigInt(duration));
  } else {
    dv.setUint32(12, timescale);
    dv.setUint32(16, duration);
  }
  return box('mvhd', p);
}

function trak(handler: string): Uint8Array {
  const hdlr = new Uint8Array(24);
  hdlr.set(new TextEncoder().encode(handler), 8);
  return box('trak', box('mdia', box('hdlr', hdlr)));
}

const ftyp = (brand: string) => box('ftyp', new TextEncoder().encode(`${brand}\0\0\0\0isom`));
const concat = (...parts: Uint8Array[]) => Uint8Array.from(parts.flatMap((p) => [...p]));
const payloadOf = (b: Uint8Array) => b.subarray(8);

describe('the movie header', () => {
  it.each([
    ['version 0', mvhd(0, 1000, 12_345), 12.345],
    ['version 1 with a 64-bit duration', mvhd(1, 90_000, 2 ** 33), 2 ** 33 / 90_000],
  ])('reads %s', (_name, header, seconds) => {
    expect(movieFromMoov(payloadOf(box('moov', header)), 'isom').seconds).toBeCloseTo(seconds, 9);
  });

  it('reads mvex/mehd when a fragmented file leaves mvhd at 0', () => {
    const mehd = new Uint8Array(8);
    new DataView(mehd.buffer).setUint32(4, 6000);
    const moov = box('moov', mvhd(0, 1000, 0), box('mvex', box('mehd', mehd)));
    expect(movieFromMoov(payloadOf(moov), 'iso6').seconds).toBe(6);
  });

  it.each([
    ['no mvhd', box('moov', trak('vide')), 'its moov box has no readable mvhd (movie header)'],
    ['a zero timescale', box('moov', mvhd(0, 0, 10)), 'its movie header has a timescale of 0'],
    [
      'no length',
      box('moov', mvhd(0, 1000, 0)),
      'its movie header does not state a length (fragmented MP4?)',
    ],
  ])('refuses a moov with %s', (_name, moov, reason) => {
    expect(() => movieFromMoov(payloadOf(moov), 'isom')).toThrow(reason);
  });

  it.each([
    ['qt  ', 'mov'],
    ['M4A ', 'm4a'],
    ['isom', 'mp4'],
    [undefined, 'mov'],
  ])('names brand %s as %s', (brand, container) => {
    expect(movieFromMoov(payloadOf(box('moov', mvhd(0, 1, 1))), brand).container).toBe(container);
  });

  it('tells video and audio tracks apart', () => {
    const moov = payloadOf(box('moov', mvhd(0, 1, 1), trak('soun')));
    expect(movieFromMoov(moov, 'isom')).toMatchObject({ hasVideo: false, hasAudio: true });
  });
});

describe('walking top-level boxes', () => {
  it('finds a moov after a large mdat, reading only box headers and the moov', async () => {
    const mdat = box('mdat', new Uint8Array(500_000));
    const file = concat(ftyp('isom'), mdat, box('moov', mvhd(0, 600, 4200), trak('vide')));
    const reads: [number, number][] = [];
    const source = bufferSource(file);
    const movie = await readMovie(
      {
        size: file.length,
        read: (o, l) => {
          reads.push([o, l]);
          return source.read(o, l);
        },
      },
      1_000_000,
    );
    expect(movie).toEqual({ seconds: 7, container: 'mp4', hasVideo: true, hasAudio: false });
    expect(reads.reduce((n, [, l]) => n + l, 0)).toBeLessThan(1000);
  });

  it.each([
    ['no moov', concat(ftyp('isom'), box('mdat', new Uint8Array(10))), 'no moov box (movie header) found'],
    [
      'a moov cut short',
      concat(ftyp('isom'), box('moov', mvhd(0, 1, 1))).subarray(0, 60),
      'the file ends inside',
    ],
  ])('refuses a file with %s', async (_name, file, reason) => {
    await expect(readMovie(bufferSource(file), 1_000_000)).rejects.toThrow(reason);
  });

  it('refuses a moov over the byte limit', async () => {
    const file = concat(ftyp('isom'), box('moov', mvhd(0, 1, 1), box('free', new Uint8Array(5000))));
    await expect(readMovie(bufferSource(file), 1000)).rejects.toThrow('over the 1000-byte limit');
  });
});

describe('WAV header', () => {
  function wav(dataSizeField: number, dataBytes: number): Uint8Array {
    const out = new Uint8Array(44 + dataBytes);
    const dv = new DataView(out.buffer);
    out.set(new TextEncoder().encode('RIFF'), 0);
    out.set(new TextEncoder().encode('WAVEfmt '), 8);
    dv.setUint32(16, 16, true);
    dv.setUint32(28, 16_000, true); // byte rate: 8 kHz, 16-bit mono
    out.set(new TextEncoder().encode('data'), 36);
    dv.setUint32(40, dataSizeField, true);
    return out;
  }

  it.each([
    ['a stated data size', wav(32_000, 32_000), 2],
    ["a streaming writer's size of 0", wav(0, 48_000), 3],
    ['a file cut short', wav(160_000, 16_000), 1],
  ])('reads the length with %s', async (_name, file, seconds) => {
    expect(await readWavSeconds(bufferSource(file))).toBe(seconds);
  });
});

describe('sniffing', () => {
  const bytes = (...b: number[]) => Uint8Array.from([...b, ...new Array(256).fill(0)]);
  const text = (s: string) => new TextEncoder().encode(s.padEnd(256, '\0'));
  it.each([
    [text('ID3\x04'), { container: 'mp3' }],
    [bytes(0xff, 0xfb, 0x90, 0x64), { container: 'mp3' }],
    [bytes(0xff, 0xf1, 0x50, 0x80), { container: 'unsupported', name: 'AAC (ADTS)' }],
    [text('RIFF\0\0\0\0WAVE'), { container: 'wav' }],
    [text('RIFF\0\0\0\0AVI '), { container: 'unsupported', name: 'AVI' }],
    [text('fLaC'), { container: 'flac' }],
    [text('OggS'), { container: 'ogg' }],
    [text('\0\0\0\x18ftypisom'), { container: 'iso' }],
    [text('<html><body>'), { container: 'unsupported', name: 'a web page, not a media file' }],
    [bytes(1, 2, 3, 4), { container: 'unsupported', name: undefined }],
  ])('%#: sniffs %o', (head, expected) => {
    expect(sniff(head)).toEqual(expected);
  });
});
