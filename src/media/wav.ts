import { type ByteSource, ProbeFailure } from './source.js';

// A WAV file names its data size and byte rate up front, so its length needs the header only,
// which matters over HTTP where a 6-minute WAV is 60 MB.
const maxChunks = 1000;

/** Length of a RIFF/WAVE (or RF64) file: data bytes / byte rate, from the chunk headers alone. */
export async function readWavSeconds(source: ByteSource): Promise<number> {
  const riff = await source.read(0, 12);
  const isRf64 = String.fromCharCode(...riff.subarray(0, 4)) === 'RF64';
  let offset = 12;
  let byteRate: number | undefined;
  let rf64DataSize: number | undefined;
  for (let i = 0; i < maxChunks; i++) {
    const head = await source.read(offset, 8);
    if (head.length < 8) break;
    const dv = new DataView(head.buffer, head.byteOffset, head.byteLength);
    const id = String.fromCharCode(...head.subarray(0, 4));
    const size = dv.getUint32(4, true);
    const payload = offset + 8;
    if (id === 'fmt ') {
      const fmt = await source.read(payload, 16);
      if (fmt.length < 16) break;
      byteRate = new DataView(fmt.buffer, fmt.byteOffset, fmt.byteLength).getUint32(8, true);
    } else if (id === 'ds64') {
      const ds64 = await source.read(payload, 16);
      if (ds64.length >= 16) {
        rf64DataSize = Number(new DataView(ds64.buffer, ds64.byteOffset).getBigUint64(8, true));
      }
    } else if (id === 'data') {
      if (!byteRate) throw new ProbeFailure('its WAV header has no fmt chunk before the data');
      let dataSize = isRf64 && size === 0xffffffff ? (rf64DataSize ?? 0) : size;
      // Streaming writers leave 0 or all ones; a cut file holds less than it says.
      if (source.size !== undefined && (dataSize === 0 || dataSize === 0xffffffff)) {
        dataSize = source.size - payload;
      }
      if (source.size !== undefined) dataSize = Math.min(dataSize, source.size - payload);
      return dataSize / byteRate;
    }
    // Chunks are padded to an even length.
    offset = payload + size + (size % 2);
  }
  throw new ProbeFailure('its WAV header has no data chunk');
}
