// Each sandbox image is drawn for its request (model, start of the prompt, seed, place among the
// job's images), so a gallery can tell results apart; the same request gives the same bytes in any run.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { PNG } from 'pngjs';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { mediaTypeOfBytes } from '../../src/media/kind.js';
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
});
