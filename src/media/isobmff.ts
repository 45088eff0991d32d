import { type ByteSource, ProbeFailure } from './source.js';

/** What the movie header of an MP4/MOV/M4A says. */
export interface MovieInfo {
  seconds: number;
  container: 'mp4' | 'mov' | 'm4a';
  hasVideo: boolean;
  hasAudio: boolean;
}

interface BoxHeader {
  type: string;
  /** Offset of the box's payload, relative to the box start. */
  headerSize: number;
  /** Whole box size in bytes, or undefined when the box runs to the end of the file (size 0). */
  size: number | undefined;
}

const latin1 = new TextDecoder('latin1');
// Ten thousand top-level boxes is far beyond any real file; it stops a crafted file from looping us.
const maxTopLevelBoxes = 10_000;

function fourcc(bytes: Uint8Array, at: number): string {
  return latin1.decode(bytes.subarray(at, at + 4));
}

function view(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Reads a box header from the start of `bytes`; undefined when fewer than 8 bytes are present. */
export function readBoxHeader(bytes: Uint8Array): BoxHeader | undefined {
  if (bytes.length < 8) return undefined;
  const dv = view(bytes);
  const size32 = dv.getUint32(0);
  const type = fourcc(bytes, 4);
  if (size32 === 1) {
    if (bytes.length < 16) return undefined;
    return { type, headerSize: 16, size: Number(dv.getBigUint64(8)) };
  }
  if (size32 === 0) return { type, headerSize: 8, size: undefined };
  return { type, headerSize: 8, size: size32 };
}

/** True when the first bytes look like an ISO base media file (MP4, MOV, M4A, 3GP). */
export function looksLikeIsoBmff(head: Uint8Array): boolean {
  const box = readBoxHeader(head);
  if (!box) return false;
  // Old QuickTime files may start with moov, mdat, wide or free instead of ftyp.
  return ['ftyp', 'moov', 'mdat', 'wide', 'free', 'skip', 'pnot'].includes(box.type);
}

function containerOf(majorBrand: string | undefined): MovieInfo['container'] {
  if (majorBrand === undefined || majorBrand === 'qt  ') return 'mov';
  if (majorBrand.startsWith('M4A') || majorBrand.startsWith('M4B')) return 'm4a';
  return 'mp4';
}

/** Children of a container box payload, as [type, payload] pairs. */
function* children(payload: Uint8Array): Generator<[string, Uint8Array]> {
  let at = 0;
  while (at + 8 <= payload.length) {
    const box = readBoxHeader(payload.subarray(at));
    if (!box) return;
    const size = box.size ?? payload.length - at;
    if (size < box.headerSize || at + size > payload.length) return;
    yield [box.type, payload.subarray(at + box.headerSize, at + size)];
    at += size;
  }
}

function child(payload: Uint8Array, type: string): Uint8Array | undefined {
  for (const [t, p] of children(payload)) if (t === type) return p;
  return undefined;
}

/** Duration and timescale from a full box (mvhd or mehd share the version 0/1 layout idea). */
function readMvhd(p: Uint8Array): { duration: number; timescale: number } | undefined {
  const dv = view(p);
  const version = p[0];
  if (version === 1) {
    if (p.length < 32) return undefined;
    return { timescale: dv.getUint32(20), duration: Number(dv.getBigUint64(24)) };
  }
  if (p.length < 20) return undefined;
  const duration = dv.getUint32(16);
  // All ones means "unknown" in a version 0 box.
  return { timescale: dv.getUint32(12), duration: duration === 0xffffffff ? 0 : duration };
}

function readMehd(p: Uint8Array): number | undefined {
  const dv = view(p);
  if (p[0] === 1) return p.length >= 12 ? Number(dv.getBigUint64(4)) : undefined;
  return p.length >= 8 ? dv.getUint32(4) : undefined;
}

function handlerTypes(moov: Uint8Array): Set<string> {
  const found = new Set<string>();
  for (const [type, trak] of children(moov)) {
    if (type !== 'trak') continue;
    const hdlr = child(child(trak, 'mdia') ?? new Uint8Array(), 'hdlr');
    // hdlr: version/flags (4), pre_defined (4), handler_type (4).
    if (hdlr && hdlr.length >= 12) found.add(fourcc(hdlr, 8));
  }
  return found;
}

/**
 * Reads the movie's length from the payload of a `moov` box: mvhd duration / timescale, which is the
 * container's length (not any one track's), or, for a fragmented file, mvex/mehd.
 */
export function movieFromMoov(moov: Uint8Array, majorBrand: string | undefined): MovieInfo {
  const mvhdBox = child(moov, 'mvhd');
  const mvhd = mvhdBox ? readMvhd(mvhdBox) : undefined;
  if (!mvhd) throw new ProbeFailure('its moov box has no readable mvhd (movie header)');
  if (mvhd.timescale === 0) throw new ProbeFailure('its movie header has a timescale of 0');
  let duration = mvhd.duration;
  if (duration === 0) {
    const mehd = child(child(moov, 'mvex') ?? new Uint8Array(), 'mehd');
    duration = (mehd && readMehd(mehd)) ?? 0;
  }
  if (duration === 0) throw new ProbeFailure('its movie header does not state a length (fragmented MP4?)');
  const handlers = handlerTypes(moov);
  return {
    seconds: duration / mvhd.timescale,
    container: containerOf(majorBrand),
    hasVideo: handlers.has('vide'),
    hasAudio: handlers.has('soun'),
  };
}

/**
 * Walks the top-level boxes of an ISO BMFF file and reads its `moov`, wherever it is: a source backed
 * by HTTP Range requests fetches only the box headers it steps on and the moov itself.
 */
export async function readMovie(source: ByteSource, maxMoovBytes: number): Promise<MovieInfo> {
  let offset = 0;
  let majorBrand: string | undefined;
  for (let i = 0; i < maxTopLevelBoxes; i++) {
    if (source.size !== undefined && offset + 8 > source.size) break;
    const head = await source.read(offset, 16);
    const box = readBoxHeader(head);
    if (!box) break;
    const size = box.size ?? (source.size === undefined ? undefined : source.size - offset);
    if (size !== undefined && size < box.headerSize) throw new ProbeFailure(`a ${box.type} box is damaged`);
    if (box.type === 'ftyp' && head.length >= box.headerSize + 4) majorBrand = fourcc(head, box.headerSize);
    if (box.type === 'moov') {
      if (size === undefined) throw new ProbeFailure('its moov box has no stated size');
      if (size > maxMoovBytes) {
        throw new ProbeFailure(`its moov box is ${size} bytes, over the ${maxMoovBytes}-byte limit`);
      }
      const moov = await source.read(offset + box.headerSize, size - box.headerSize);
      if (moov.length < size - box.headerSize) throw new ProbeFailure('the file ends inside its moov box');
      return movieFromMoov(moov, majorBrand);
    }
    if (size === undefined) break;
    offset += size;
  }
  throw new ProbeFailure('no moov box (movie header) found; the file may be incomplete');
}
