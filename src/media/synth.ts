// Result files for the sandbox: real media of the asked length, built in memory without any encoder.

export { sandboxAsset } from './assets.js';

export interface WavOptions {
  /** Samples per second. Default 8000: small files, still plays everywhere. */
  sampleRate?: number;
  /** Tone frequency in Hz. Default 440. */
  frequency?: number;
  /** Peak level from 0 to 1. Default 0.1: quiet, but a player's waveform shows something. */
  amplitude?: number;
}

function checkSeconds(seconds: number): void {
  if (!Number.isFinite(seconds) || seconds < 0) {
    throw new RangeError(`seconds: must be a finite number >= 0, got ${seconds}`);
  }
}

/** A mono 16-bit PCM WAV of `seconds` (rounded to the nearest sample) holding a quiet tone. */
export function makeWav(seconds: number, opts: WavOptions = {}): Buffer {
  checkSeconds(seconds);
  const sampleRate = opts.sampleRate ?? 8000;
  const frequency = opts.frequency ?? 440;
  const amplitude = opts.amplitude ?? 0.1;
  if (!Number.isInteger(sampleRate) || sampleRate < 1000 || sampleRate > 192_000) {
    throw new RangeError(`sampleRate: must be an integer from 1000 to 192000, got ${sampleRate}`);
  }
  if (!(amplitude >= 0 && amplitude <= 1))
    throw new RangeError(`amplitude: must be 0 to 1, got ${amplitude}`);
  const samples = Math.round(seconds * sampleRate);
  const dataBytes = samples * 2;
  const wav = Buffer.alloc(44 + dataBytes);
  wav.write('RIFF', 0, 'latin1');
  wav.writeUInt32LE(36 + dataBytes, 4);
  wav.write('WAVEfmt ', 8, 'latin1');
  wav.writeUInt32LE(16, 16); // fmt chunk size
  wav.writeUInt16LE(1, 20); // PCM
  wav.writeUInt16LE(1, 22); // mono
  wav.writeUInt32LE(sampleRate, 24);
  wav.writeUInt32LE(sampleRate * 2, 28); // byte rate
  wav.writeUInt16LE(2, 32); // block align
  wav.writeUInt16LE(16, 34); // bits per sample
  wav.write('data', 36, 'latin1');
  wav.writeUInt32LE(dataBytes, 40);
  // A 10 ms fade at each end, so that playback starts and stops without a click.
  const fade = Math.max(1, Math.round(sampleRate / 100));
  for (let i = 0; i < samples; i++) {
    const envelope = Math.min(1, i / fade, (samples - 1 - i) / fade);
    const value = Math.sin((2 * Math.PI * frequency * i) / sampleRate) * amplitude * envelope;
    wav.writeInt16LE(Math.round(value * 32767), 44 + i * 2);
  }
  return wav;
}

/**
 * One MPEG-1 Layer III frame: 48 kHz mono, 32 kbit/s, 96 bytes (never padded), 1152 samples = 24 ms,
 * encoded by LAME without the bit reservoir so that it decodes on its own. It holds a 500 Hz tone,
 * exactly 12 periods per frame, so that repeated frames join without a click. Taken from
 * assets/sandbox/frame-source.mp3 (made by scripts/make-fixtures.sh); a test checks the two agree.
 */
export const mp3ToneFrame = Buffer.from(
  '//sUxAADw2yc+gBeokBtk59AC9RIhHrABg8J4RJgMlvlk9/5z/5YP/+d+r6n/879UI9YAMHhPCJMBkt8snv/Of/LB//zv1fU//nfqTEFNRTMuMTAwAAAAAAAAAAAAAAA',
  'base64',
);
export const mp3FrameSeconds = 1152 / 48_000;
const frameBytes = 96;

/** A silent frame carrying a LAME-style "Info" header, so players know the exact frame count at once. */
function infoFrame(frames: number, totalBytes: number): Buffer {
  const frame = Buffer.alloc(frameBytes);
  mp3ToneFrame.copy(frame, 0, 0, 4); // same header: MPEG-1 Layer III, 32 kbit/s, 48 kHz, mono
  // After the 4-byte header, 17 bytes of side info, all zero: no audio data, a silent frame.
  frame.write('Info', 21, 'latin1');
  frame.writeUInt32BE(0x3, 25); // flags: frame count and byte count present
  frame.writeUInt32BE(frames, 29);
  frame.writeUInt32BE(totalBytes, 33);
  return frame;
}

/** A constant-bitrate MP3 tone whose length is `seconds` to within one 24 ms frame (at least one frame). */
export function makeMp3(seconds: number): Buffer {
  checkSeconds(seconds);
  const frames = Math.max(1, Math.round(seconds / mp3FrameSeconds));
  const totalBytes = (frames + 1) * frameBytes;
  const mp3 = Buffer.alloc(totalBytes);
  infoFrame(frames, totalBytes).copy(mp3, 0);
  for (let i = 1; i <= frames; i++) mp3ToneFrame.copy(mp3, i * frameBytes);
  return mp3;
}
