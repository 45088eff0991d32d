// A price override is a figure every estimate and budget check multiplies by: one that is not a finite
// number above 0 would price tasks at NaN or Infinity tokens (so no budget holds, or every one does).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CATALOG, DEFAULT_PRICES, mergePrices } from '../../src/catalog/index.js';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/config-error.js';

describe('a price override that is not a finite number above 0 is refused, naming it', () => {
  it.each<[unknown, string]>([
    [Number.NaN, 'NaN'],
    [Number.POSITIVE_INFINITY, 'Infinity'],
    [Number.NEGATIVE_INFINITY, '-Infinity'],
    [-0.5, '-0.5'],
    [0, '0'],
    [null, 'null'],
    [true, 'true'],
  ])('%s', (value, shown) => {
    const { prices, issues } = mergePrices({ 'voice-cover': { perSecond: value } });
    expect(issues).toEqual([
      { path: 'voice-cover.perSecond', message: `must be a number > 0, got ${shown}` },
    ]);
    // The refused figure is not used: the list price stays.
    expect(prices['voice-cover'].perSecond).toBe(DEFAULT_PRICES['voice-cover'].perSecond);
  });

  it('names every known model beside an unknown one', () => {
    const { issues } = mergePrices({ 'flat-imag': { perImage: 1 } });
    expect(issues).toEqual([
      {
        path: 'flat-imag',
        message: `unknown model; known models are: ${Object.keys(DEFAULT_PRICES).join(', ')}`,
      },
    ]);
    expect(issues[0]?.message).toContain('flat-image, anime-waifu, pixel-lite');
  });

  it('takes an empty `prices:` (null in YAML) as no override', () => {
    expect(mergePrices(null)).toEqual({ prices: DEFAULT_PRICES, issues: [] });
  });

  it('takes the smallest positive figure as it is', () => {
    const { prices, issues } = mergePrices({ 'flat-image': { perImage: 0.000001 } });
    expect(issues).toEqual([]);
    expect(CATALOG['flat-image'].estimate({}, {}, prices).tokens).toBe(0.000001);
  });
});

describe('mediabatch.config.yaml', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  async function problemsOf(yaml: string): Promise<{ message: string; details: readonly string[] }> {
    const cwd = mkdtempSync(join(tmpdir(), 'mediabatch-prices-'));
    dirs.push(cwd);
    writeFileSync(join(cwd, 'mediabatch.config.yaml'), yaml);
    const error = await loadConfig({ cwd, env: {} }).then(
      () => undefined,
      (e: unknown) => e,
    );
    if (!(error instanceof ConfigError)) throw new Error(`expected a ConfigError, got ${String(error)}`);
    return { message: error.message, details: error.details };
  }

  it('refuses .nan and .inf prices with one located line each', async () => {
    const { message, details } = await problemsOf(
      'prices:\n  voice-cover: { perSecond: .nan }\n  flat-image:\n    perImage: .inf\n  pixel-lite: { perImage: -.inf }\n',
    );
    expect(details).toEqual([
      'mediabatch.config.yaml:2:18  prices.voice-cover.perSecond: must be a number > 0, got NaN',
      'mediabatch.config.yaml:4:5  prices.flat-image.perImage: must be a number > 0, got Infinity',
      'mediabatch.config.yaml:5:17  prices.pixel-lite.perImage: must be a number > 0, got -Infinity',
    ]);
    expect(message).toBe('mediabatch.config.yaml: invalid config; fix the fields above');
  });
});
