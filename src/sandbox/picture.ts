// The sandbox's result images: a real PNG per request that shows which task it answers (the model, the
// start of the prompt, the seed and the image's place among the job's images) over a colour and a pattern
// drawn from a hash of the request, so a gallery can tell results apart. The same request gives the same
// bytes whatever the run or the order of jobs. Rendered when a link is downloaded (a million-task run that
// never downloads costs nothing) and kept in a small cache, since a result is often fetched more than once.
import { createHash } from 'node:crypto';
import { PNG } from 'pngjs';
import type { RequestBody } from '../catalog/types.js';

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

const CACHE_SIZE = 64;
const cache = new Map<string, Buffer>();

/** The PNG of a label: rendered once, then served from a small cache of the latest. */
export function labelledPng(label: ImageLabel): Buffer {
  const key = `${label.hash}:${label.model}:${label.variant}:${label.text}`;
  const hit = cache.get(key);
  if (hit) {
    cache.delete(key);
    cache.set(key, hit);
    return hit;
  }
  const bytes = renderPng(label);
  cache.set(key, bytes);
  if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value as string);
  return bytes;
}

function renderPng(label: ImageLabel): Buffer {
  const png = new PNG({ width: SIZE, height: SIZE, colorType: 2, inputHasAlpha: true });
  const byte = (i: number) => Number.parseInt(label.hash.slice(i * 2, i * 2 + 2), 16);
  const base = [byte(0), byte(1), byte(2)].map((c) => 40 + (c % 120)) as [number, number, number];
  const stripe = 8 + (byte(3) % 24);
  const slope = (byte(4) % 3) - 1;
  for (let y = 0; y < SIZE; y++) {
    for (let x = 0; x < SIZE; x++) {
      const band = Math.floor((x + slope * y + SIZE) / stripe) % 2 === 0 ? 0 : 24;
      put(png, x, y, base[0] + band, base[1] + band, base[2] + band);
    }
  }
  // The stripes darkened behind the text, so any colour leaves it readable and still shows.
  for (let y = MARGIN - 6; y < SIZE - MARGIN + 6; y++) {
    for (let x = MARGIN - 6; x < SIZE - MARGIN + 6; x++) {
      const at = (y * SIZE + x) * 4;
      put(png, x, y, (png.data[at]! * 2) / 5, (png.data[at + 1]! * 2) / 5, (png.data[at + 2]! * 2) / 5);
    }
  }
  let y = MARGIN;
  y = drawText(png, label.model, y, [255, 214, 102]);
  y += LINE / 2;
  for (const line of wrap(label.text, COLUMNS, PROMPT_LINES)) y = drawText(png, line, y, [240, 240, 240]);
  const variant = wrap(label.variant, COLUMNS, 2);
  y = SIZE - MARGIN - 7 * SCALE - (variant.length - 1) * LINE;
  for (const line of variant) y = drawText(png, line, y, [138, 226, 255]);
  // Level 1 and one filter (no search): a few times faster than the defaults, at about 26 KB an image.
  return PNG.sync.write(png, { colorType: 2, deflateLevel: 1, filterType: 1 });
}

function put(png: PNG, x: number, y: number, r: number, g: number, b: number): void {
  const at = (y * SIZE + x) * 4;
  png.data[at] = r;
  png.data[at + 1] = g;
  png.data[at + 2] = b;
  png.data[at + 3] = 255;
}

/** One line of text at `top`; characters the font lacks show as `?`. Returns the next line's top. */
function drawText(png: PNG, text: string, top: number, color: [number, number, number]): number {
  // Accents dropped (é → E), so most Latin text stays readable in a font of ASCII capitals.
  const plain = text
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[\u2010-\u2015]/g, '-');
  const chars = [...plain.toUpperCase()].slice(0, COLUMNS);
  for (const [column, ch] of chars.entries()) {
    const rows = glyphs.get(ch) ?? glyphs.get('?') ?? [];
    for (const [row, bits] of rows.entries()) {
      for (let bit = 0; bit < 5; bit++) {
        if ((bits & (16 >> bit)) === 0) continue;
        const x0 = MARGIN + column * CELL + bit * SCALE;
        const y0 = top + row * SCALE;
        for (let dy = 0; dy < SCALE; dy++)
          for (let dx = 0; dx < SCALE; dx++) put(png, x0 + dx, y0 + dy, color[0], color[1], color[2]);
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
