// Each sandbox image is drawn for its request (model, start of the prompt, seed, place among the
// job's images), so a gallery can tell results apart; the same request gives the same bytes in any run.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as zlib from 'node:zlib';
import { chromium } from 'playwright-core';
import { PNG } from 'pngjs';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { mediaTypeOfBytes } from '../../src/media/kind.js';
import { drawPng, imageLabel, labelledPng, tableCrc32 } from '../../src/sandbox/picture.js';
import { CHROMIUM, requireBrowser, SKIP_BROWSER } from '../helpers/browser.js';
import { type Client, closeAll, openSandbox, PATHS } from './helpers.js';

afterEach(closeAll);
requireBrowser();

const MUG = { model: 'flat-image', prompt: 'a red mug on a table' };
const VASE = { model: 'flat-image', prompt: 'a blue vase by a window' };
const anime = (seed: number) => ({ model: 'anime-waifu', prompt: 'a girl with a red umbrella', seed });

async function imageOf(api: Client, body: Record<string, unknown>): Promise<Buffer> {
  const id = (await api.submit(PATHS.images, body)).body.data.img_uuid as string;
  const record = (await api.poll(id)).body.data;
  expect(record.status).toBe('success');
  const res = await request(record.json[0].value as string);
  expect([res.statusCode, res.headers['content-type']]).toEqual([200, 'image/png']);
  return Buffer.from(await res.body.arrayBuffer());
}

describe('sandbox images', () => {
  it('differ by task, are the same bytes for the same request in another run, and decode as PNG', async () => {
    const first = await openSandbox({ speed: 0, seed: 1 });
    const mug = await imageOf(first.api, MUG);
    const vase = await imageOf(first.api, VASE);
    const seeded = [await imageOf(first.api, anime(1)), await imageOf(first.api, anime(2))];
    expect(mug.equals(vase)).toBe(false);
    expect(seeded[0]?.equals(seeded[1] ?? Buffer.alloc(0))).toBe(false);
    // Another sandbox, another seed, the requests in another order: the same request, the same image.
    const second = await openSandbox({ speed: 0, seed: 99 });
    const vaseAgain = await imageOf(second.api, VASE);
    const mugAgain = await imageOf(second.api, MUG);
    expect(mugAgain.equals(mug)).toBe(true);
    expect(vaseAgain.equals(vase)).toBe(true);
    for (const bytes of [mug, vase, ...seeded]) {
      expect(mediaTypeOfBytes(bytes)).toMatchObject({ kind: 'image' });
      const decoded = PNG.sync.read(bytes);
      expect([decoded.width, decoded.height]).toEqual([256, 256]);
    }
    // Different pictures, not only different bytes: many pixels differ between two tasks' images.
    const a = PNG.sync.read(mug).data;
    const b = PNG.sync.read(vase).data;
    let differing = 0;
    for (let i = 0; i < a.length; i += 4) if (a[i] !== b[i] || a[i + 1] !== b[i + 1]) differing++;
    expect(differing).toBeGreaterThan(1000);
  });

  it.skipIf(SKIP_BROWSER)(
    'are shown by a browser',
    async () => {
      const { api } = await openSandbox({ speed: 0 });
      const id = (await api.submit(PATHS.images, MUG)).body.data.img_uuid as string;
      const link = (await api.poll(id)).body.data.json[0].value as string;
      const profile = await mkdtemp(join(tmpdir(), 'mb-chromium-'));
      const browser = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
      });
      try {
        const page = await browser.newPage();
        await page.goto(link);
        // Chromium opens an image link as a page holding one <img>, sized as the image decodes.
        const size = await page
          .locator('img')
          .evaluate((img) => [
            (img as unknown as { naturalWidth: number }).naturalWidth,
            (img as unknown as { naturalHeight: number }).naturalHeight,
          ]);
        expect(size).toEqual([256, 256]);
      } finally {
        await browser.close();
        await rm(profile, { recursive: true, force: true });
      }
    },
    60_000,
  );

  it('are the same bytes when drawn again after other pictures, whatever those left behind', () => {
    const label = (prompt: string, index = 0) => imageLabel('flat-image', { prompt }, index, 2);
    const short = label('a cup');
    const first = drawPng(short);
    // Long prompts, both places, so the pictures between differ in text, colour and slant.
    for (let i = 0; i < 20; i++) drawPng(label(`${'a very long prompt '.repeat(8)}${i}`, i % 2));
    const again = drawPng(short);
    expect(again.equals(first)).toBe(true);
    expect(PNG.sync.read(again).width).toBe(256);
    // What is served is what is drawn, and a batch's pictures are kept for its next run.
    const served = labelledPng(short);
    expect(served.equals(first)).toBe(true);
    for (let i = 0; i < 200; i++) labelledPng(label(`another task ${i}`));
    expect(labelledPng(short)).toBe(served);
  });

  it('carry chunk checksums the same with or without zlib.crc32 (Node 20 before 20.15 has none)', () => {
    const crc32 = (zlib as { crc32?: (bytes: Uint8Array, value?: number) => number }).crc32;
    const bytes = Buffer.from('IDAT and some bytes after it, checked in two pieces');
    const whole = tableCrc32(bytes);
    expect(tableCrc32(bytes.subarray(4), tableCrc32(bytes.subarray(0, 4)))).toBe(whole);
    // The PNG specification's own check value: CRC-32 of "123456789".
    expect(tableCrc32(Buffer.from('123456789'))).toBe(0xcbf43926);
    if (crc32 !== undefined) expect(crc32(bytes)).toBe(whole);
  });
});
