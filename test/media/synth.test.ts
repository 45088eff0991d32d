import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseBuffer } from 'music-metadata';
import { afterEach, describe, expect, it } from 'vitest';
import { findPackageRoot } from '../../src/media/assets.js';
import { readMovie } from '../../src/media/isobmff.js';
import { createProber } from '../../src/media/probe.js';
import { bufferSource } from '../../src/media/source.js';
import { makeMp3, makeWav, mp3FrameSeconds, mp3ToneFrame, sandboxAsset } from '../../src/media/synth.js';

let temp: string | undefined;
afterEach(async () => {
  if (temp) await rm(temp, { recursive: true, force: true });
  temp = undefined;
});

describe('makeMp3', () => {
  it.each([1, 12.5, 90.29, 360])(
    '%s s measures within one frame, by header and by counting frames',
    async (s) => {
      const mp3 = makeMp3(s);
      const byHeader = await parseBuffer(mp3, { mimeType: 'audio/mpeg' });
      const byFrames = await parseBuffer(mp3, { mimeType: 'audio/mpeg' }, { duration: true });
      expect(Math.abs((byHeader.format.duration ?? 0) - s)).toBeLessThanOrEqual(mp3FrameSeconds);
      expect(Math.abs((byFrames.format.duration ?? 0) - s)).toBeLessThanOrEqual(mp3FrameSeconds);
      expect(byFrames.format).toMatchObject({ sampleRate: 48_000, numberOfChannels: 1, codecProfile: 'CBR' });
    },
  );

  it('makes at least one frame', async () => {
    expect((await parseBuffer(makeMp3(0), { mimeType: 'audio/mpeg' })).format.duration).toBe(mp3FrameSeconds);
  });

  it('is measured by the prober like any uploaded MP3', async () => {
    temp = await mkdtemp(join(tmpdir(), 'mb-synth-'));
    const path = join(temp, 'a.mp3');
    await writeFile(path, makeMp3(42));
    expect(await createProber()(path, 'audio')).toMatchObject({ ok: true, container: 'mp3', seconds: 42 });
  });

  it('repeats a frame of the committed frame-source.mp3', async () => {
    const source = await readFile(sandboxAsset('frame-source.mp3'));
    const middle = source.subarray(20 * 96, 21 * 96);
    expect(Buffer.compare(middle, mp3ToneFrame)).toBe(0);
  });

  it.each([-1, Number.NaN, Number.POSITIVE_INFINITY])('refuses %s seconds', (s) => {
    expect(() => makeMp3(s)).toThrow(`seconds: must be a finite number >= 0, got ${s}`);
  });
});

describe('makeWav', () => {
  it.each([
    [4, {}, 8000],
    [2.5, { sampleRate: 16_000 }, 16_000],
    [0.0001, {}, 8000],
  ])('%s s with %o measures exactly', async (s, opts, sampleRate) => {
    const wav = makeWav(s, opts);
    const meta = await parseBuffer(wav);
    const expected = Math.round(s * sampleRate) / sampleRate;
    expect(meta.format).toMatchObject({ container: 'WAVE', codec: 'PCM', bitsPerSample: 16, sampleRate });
    expect(meta.format.duration).toBeCloseTo(expected, 9);
  });

  it('holds a quiet tone, not silence', () => {
    const wav = makeWav(1);
    let peak = 0;
    for (let i = 44; i < wav.length; i += 2) peak = Math.max(peak, Math.abs(wav.readInt16LE(i)));
    expect(peak).toBeGreaterThan(1000);
    expect(peak).toBeLessThanOrEqual(Math.round(0.1 * 32767));
  });

  it.each([
    [{ sampleRate: 10 }, 'sampleRate: must be an integer from 1000 to 192000, got 10'],
    [{ amplitude: 2 }, 'amplitude: must be 0 to 1, got 2'],
  ])('refuses %o', (opts, message) => {
    expect(() => makeWav(1, opts)).toThrow(message);
  });
});

describe('sandbox samples', () => {
  it('result.png is a 256x256 PNG', async () => {
    const png = await readFile(sandboxAsset('result.png'));
    expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');
    expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([256, 256]);
  });

  it('result.mp4 is a short faststart H.264 baseline clip', async () => {
    const mp4 = await readFile(sandboxAsset('result.mp4'));
    const movie = await readMovie(bufferSource(mp4), mp4.length);
    expect(movie).toMatchObject({ seconds: 4, container: 'mp4', hasVideo: true });
    // Faststart: the moov comes before the media data, so a browser starts playing at once.
    expect(mp4.indexOf('moov')).toBeLessThan(mp4.indexOf('mdat'));
    // avcC: configurationVersion 1, then profile_idc 66 (baseline), which is always 4:2:0.
    const avcC = mp4.indexOf('avcC') + 4;
    expect([mp4[avcC], mp4[avcC + 1]]).toEqual([1, 66]);
    expect(mp4.length).toBeLessThan(100_000);
  });

  it.each(['../package.json', 'a/b.png', '', '.hidden/x'])('refuses the name %j', (name) => {
    expect(() => sandboxAsset(name)).toThrow('name: must be a plain file name such as result.png');
  });

  it('finds the package root from a nested folder, as from dist/media after tsc', async () => {
    temp = await mkdtemp(join(tmpdir(), 'mb-root-'));
    const nested = join(temp, 'dist', 'media');
    await mkdir(nested, { recursive: true });
    await writeFile(join(temp, 'package.json'), '{}');
    expect(findPackageRoot(nested)).toBe(temp);
    expect(sandboxAsset('result.png')).toBe(
      join(import.meta.dirname, '..', '..', 'assets', 'sandbox', 'result.png'),
    );
  });
});
