// The sandbox's result images: a real PNG per request that shows which task it answers (the model, the
// start of the prompt, the seed and the image's place among the job's images) over a colour and a pattern
// drawn from a hash of the request, so a gallery can tell results apart. The same request gives the same
// bytes whatever the run or the order of jobs. Rendered when a link is downloaded (a million-task run that
// never downloads costs nothing) and kept in a cache, since the same picture is often fetched again.
import { createHash } from 'node:crypto';
import * as zlib from 'node:zlib';
import type { RequestBody } from '../catalog/types.js';

const { deflateSync } = zlib;
// Read off the namespace: a Node 20 before 20.15 has none, and a named import of it would not link.
const zlibCrc32 = (zlib as { crc32?: (bytes: Uint8Array, value?: number) => number }).crc32;

/** What an image shows; the colours come from `hash`. */
export interface ImageLabel {
  model: string;
  /** The start of the prompt (or of the request's first text). */
  text: string;
  /** `seed 42, image 1/2`. */
  variant: string;
  /** Hex SHA-256 of the request and the image's place: colours and pattern. */
  hash: string;
}

const SIZE = 256;
const SCALE = 2;
const CELL = 6 * SCALE;
const LINE = 9 * SCALE;
const MARGIN = 12;
const COLUMNS = Math.floor((SIZE - 2 * MARGIN) / CELL);
const PROMPT_LINES = 5;

/** A 5x7 font for the characters below: 7 rows per glyph, each a byte (low 5 bits, left pixel highest). */
const GLYPH_CHARS = ' !"#%&\'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]_';
const GLYPH_BITS =
  '00000000000000040404040400040a0a00000000000a0a1f0a1f0a0a181902040813030c12140815120d04040800000000' +
  '02040808080402080402020204080004150e1504000004041f040400000000000c04080000001f00000000000000000c0c' +
  '000102040810000e11131519110e040c040404040e0e11010204081f1f02040201110e02060a121f02021f101e0101110e' +
  '0608101e11110e1f0102040808080e11110e11110e0e11110f01020c000c0c000c0c00000c0c000c040802040810080402' +
  '00001f001f0000080402010204080e1101020400040e11010d15150e0e11111f1111111e11111e11111e0e11101010110e' +
  '1e11111111111e1f10101e10101f1f10101e1010100e11101711110f1111111f1111110e04040404040e0702020202120c' +
  '111214181412111010101010101f111b1515111111111119151311110e11111111110e1e11111e1010100e11111115120d' +
  '1e11111e1412110f10100e01011e1f0404040404041111111111110e11111111110a041111111515150a11110a040a1111' +
  '11110a040404041f01020408101f0e08080808080e0e02020202020e0000000000001f';

const glyphs = new Map<string, number[]>();
for (const [i, ch] of [...GLYPH_CHARS].entries()) {
  const hex = GLYPH_BITS.slice(i * 14, i * 14 + 14);
  glyphs.set(
    ch,
    Array.from({ length: 7 }, (_, row) => Number.parseInt(hex.slice(row * 2, row * 2 + 2), 16)),
  );
}

/** The label of item `index` (0-based) of a job for `body`, one of `count` images. */
export function imageLabel(model: string, body: RequestBody, index: number, count: number): ImageLabel {
  // The callback address differs from run to run; it is not what the picture is of.
  const { custom_callback_url: _callback, ...request } = body;
  const hash = createHash('sha256')
    .update(`${model}:${index}:${JSON.stringify(request)}`)
    .digest('hex');
  const texts = Object.values(request).filter((v): v is string => typeof v === 'string');
  const prompt = typeof request.prompt === 'string' ? request.prompt : (texts[0] ?? '');
  const seed =
    typeof request.seed === 'number' || typeof request.seed === 'string' ? `seed ${request.seed}, ` : '';
  return {
    model,
    text: prompt.slice(0, COLUMNS * PROMPT_LINES),
    variant: `${seed}image ${index + 1}/${count}`,
    hash,
  };
}

/**
 * Rendered pictures kept, the least recently served dropped first, up to this many bytes (about 6,000
 * pictures). The same request gives the same bytes, and the same batch is often run again against one
 * sandbox (a test suite, a demo, the benches' rounds): drawing and compressing a picture was most of the
 * sandbox's CPU for a task. A batch larger than this draws every picture, as when nothing was kept.
 */
const CACHE_BYTES = 64 * 1024 * 1024;
const cache = new Map<string, Buffer>();
let cachedBytes = 0;

/** The PNG of a label: drawn once, then served from the cache while it is kept there. */
export function labelledPng(label: ImageLabel): Buffer {
  const key = `${label.hash}:${label.model}:${label.variant}:${label.text}`;
  const hit = cache.get(key);
  if (hit) {
    cache.delete(key);
    cache.set(key, hit);
    return hit;
  }
  const bytes = drawPng(label);
  cache.set(key, bytes);
  cachedBytes += bytes.length;
  for (const [oldest, old] of cache) {
    if (cachedBytes <= CACHE_BYTES) break;
    cache.delete(oldest);
    cachedBytes -= old.length;
  }
  return bytes;
}

/** Bytes of one scanline: a filter byte (0: none), then RGB. */
const ROW = 1 + SIZE * 3;
const PANEL = { from: MARGIN - 6, to: SIZE - MARGIN + 6 };

// One picture is drawn at a time (rendering never awaits), so it is drawn into one buffer made once: its
// scanlines, then one long row of stripes and the same darkened, which each scanline is copied from
// within the buffer. A fresh 197 KB buffer per image was most of the garbage of a run of many images,
// and the collections it called for cost about as much as the rendering. Every byte of a pixel row is
// written for each picture; the filter bytes are zero from the start and never written.
const STRIPES = SIZE * 3 * 3;
const SCRATCH = Buffer.alloc(SIZE * ROW + 2 * STRIPES);
const RAW = SCRATCH.subarray(0, SIZE * ROW);
const BRIGHT = SIZE * ROW;
const DARK = BRIGHT + STRIPES;

/** The PNG of a label, drawn now (labelledPng keeps what it draws). */
export function drawPng(label: ImageLabel): Buffer {
  const byte = (i: number) => Number.parseInt(label.hash.slice(i * 2, i * 2 + 2), 16);
  const base = [byte(0), byte(1), byte(2)].map((c) => 40 + (c % 120));
  const stripe = 8 + (byte(3) % 24);
  const slope = (byte(4) % 3) - 1;
  // Stripes: each row is a slice of one long row of them, shifted by `slope` a row; behind the text the
  // same stripes darkened, so any colour leaves the text readable and still shows.
  drawStripes(base, stripe);
  for (let y = 0; y < SIZE; y++) {
    const shift = (slope * y + SIZE) * 3;
    const row = y * ROW + 1;
    SCRATCH.copyWithin(row, BRIGHT + shift, BRIGHT + shift + SIZE * 3);
    if (y >= PANEL.from && y < PANEL.to)
      SCRATCH.copyWithin(row + PANEL.from * 3, DARK + shift + PANEL.from * 3, DARK + shift + PANEL.to * 3);
  }
  let y = MARGIN;
  y = drawText(RAW, label.model, y, [255, 214, 102]);
  y += LINE / 2;
  for (const line of wrap(label.text, COLUMNS, PROMPT_LINES)) y = drawText(RAW, line, y, [240, 240, 240]);
  const variant = wrap(label.variant, COLUMNS, 2);
  y = SIZE - MARGIN - 7 * SCALE - (variant.length - 1) * LINE;
  for (const line of variant) y = drawText(RAW, line, y, [138, 226, 255]);
  return encodePng(RAW);
}

/**
 * 3 x SIZE pixels of stripes `stripe` wide in the colour `base`, as RGB bytes, at BRIGHT; the same at
 * 0.4 of the light at DARK.
 */
function drawStripes(base: number[], stripe: number): void {
  const shade = (band: number, light: number) => Buffer.from(base.map((c) => Math.round((c + band) * light)));
  const bright = [shade(0, 1), shade(24, 1)];
  const dark = [shade(0, 0.4), shade(24, 0.4)];
  for (let x = 0, band = 0; x < SIZE * 3; x += stripe, band = 1 - band) {
    const end = Math.min(x + stripe, SIZE * 3);
    SCRATCH.fill(bright[band] ?? 0, BRIGHT + x * 3, BRIGHT + end * 3);
    SCRATCH.fill(dark[band] ?? 0, DARK + x * 3, DARK + end * 3);
  }
}

const CRC_TABLE = Uint32Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

/** CRC-32 of PNG chunks, going on from `value` (the CRC of the bytes before): zlib's where Node has it. */
const crc32: (bytes: Uint8Array, value?: number) => number =
  typeof zlibCrc32 === 'function' ? zlibCrc32 : tableCrc32;

/** zlib.crc32 came in Node 20.15; this gives the same numbers, more slowly. */
export function tableCrc32(bytes: Uint8Array, value = 0): number {
  let c = (value ^ 0xffffffff) >>> 0;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** A PNG chunk's bytes, CRC included. */
function pngChunk(type: string, data: Buffer): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

const IHDR = (() => {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(SIZE, 0);
  header.writeUInt32BE(SIZE, 4);
  header[8] = 8; // bits per channel
  header[9] = 2; // RGB; compression, filter method and interlace stay 0
  return pngChunk('IHDR', header);
})();
/** What every picture starts with (the signature and its header) and ends with. */
const HEAD = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), IHDR]);
const TAIL = pngChunk('IEND', Buffer.alloc(0));
const IDAT_TYPE = Buffer.from('IDAT', 'latin1');
const IDAT_CRC = crc32(IDAT_TYPE);
const DEFLATE = { level: 1 } as const;

/**
 * The PNG of SIZE x SIZE 8-bit RGB scanlines (each led by its filter byte). Written here rather than by
 * pngjs: its filtering and packing in JavaScript took about 9 ms an image, against 0.3 ms for zlib alone,
 * and a run of many images downloads one per task from the sandbox. The file is written in one buffer:
 * its fixed head and tail, and the compressed scanlines copied once.
 */
function encodePng(raw: Buffer): Buffer {
  const data = deflateSync(raw, DEFLATE);
  const out = Buffer.allocUnsafe(HEAD.length + 12 + data.length + TAIL.length);
  let at = HEAD.copy(out, 0);
  at = out.writeUInt32BE(data.length, at);
  at += IDAT_TYPE.copy(out, at);
  at += data.copy(out, at);
  at = out.writeUInt32BE(crc32(data, IDAT_CRC), at);
  TAIL.copy(out, at);
  return out;
}

/** One line of text at `top`; characters the font lacks show as `?`. Returns the next line's top. */
function drawText(raw: Buffer, text: string, top: number, color: readonly number[]): number {
  // Accents dropped (é → E), so most Latin text stays readable in a font of ASCII capitals.
  const plain = text
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[\u2010-\u2015]/g, '-');
  const chars = [...plain.toUpperCase()].slice(0, COLUMNS);
  const [r = 0, g = 0, b = 0] = color;
  for (const [column, ch] of chars.entries()) {
    const rows = glyphs.get(ch) ?? glyphs.get('?') ?? [];
    for (let row = 0; row < rows.length; row++) {
      const bits = rows[row] ?? 0;
      for (let bit = 0; bit < 5; bit++) {
        if ((bits & (16 >> bit)) === 0) continue;
        // A dot of the font is SCALE x SCALE pixels.
        const dot = (top + row * SCALE) * ROW + 1 + (MARGIN + column * CELL + bit * SCALE) * 3;
        for (let dy = 0; dy < SCALE; dy++) {
          for (let at = dot + dy * ROW, end = at + SCALE * 3; at < end; at += 3) {
            raw[at] = r;
            raw[at + 1] = g;
            raw[at + 2] = b;
          }
        }
      }
    }
  }
  return top + LINE;
}

/** Text cut into at most `lines` lines of `width` characters, at spaces where it can. */
function wrap(text: string, width: number, lines: number): string[] {
  const out: string[] = [];
  let rest = text.replace(/\s+/g, ' ').trim();
  while (rest !== '' && out.length < lines) {
    let cut = rest.length <= width ? rest.length : rest.lastIndexOf(' ', width);
    if (cut <= 0) cut = Math.min(width, rest.length);
    out.push(rest.slice(0, cut));
    rest = rest.slice(cut).trimStart();
  }
  return out;
}
