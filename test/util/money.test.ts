import { describe, expect, it } from 'vitest';
import { GALLERY_JS } from '../../src/report/gallery-script.js';
import {
  fromMicro,
  roundTokens,
  tokensPlainText,
  tokensText,
  tokensToUsd,
  toMicro,
  usdPlainText,
  usdText,
} from '../../src/util/money.js';

describe('money', () => {
  it.each([
    [0.2, 0.004],
    [1.63, 0.0326],
    [100_000, 2000],
  ])('%d tokens are $%d', (tokens, usd) => {
    expect(tokensToUsd(tokens)).toBe(usd);
  });

  it('rounds float noise away to a millionth of a token', () => {
    expect(roundTokens(0.1 + 0.2)).toBe(0.3);
  });

  // One way everywhere (src/util/numbers.ts): grouped thousands, cents, and up to four decimals only for a
  // non-zero amount under a cent; the terminal and the reports print the same text.
  it.each([
    [0, '$0.00'],
    [0.004, '$0.004'],
    [0.1, '$0.10'],
    [12.5, '$12.50'],
    [1234.5, '$1,234.50'],
    [1234.5678, '$1,234.57'],
    [0.12345, '$0.12'],
    [-0.5, '-$0.50'],
    [-1234.5678, '-$1,234.57'],
  ])('$%d is written %s in the terminal and in reports', (usd, text) => {
    expect(usdText(usd)).toBe(text);
    expect(usdPlainText(usd)).toBe(text);
  });

  it.each([
    [0.2, '0.2'],
    [12345.67891, '12,345.6789'],
  ])('%d tokens are written %s in the terminal and in reports', (n, text) => {
    expect(tokensText(n)).toBe(text);
    expect(tokensPlainText(n)).toBe(text);
  });

  // The gallery formats again in the browser: its copies must print what report.md prints.
  it('the gallery script writes tokens and dollars as the report does', () => {
    const found = /var TOKENS[\s\S]*?(?=\n {2}function bytes)/.exec(GALLERY_JS);
    if (found === null) throw new Error('no number formats in the gallery script');
    const { usd, tokens } = new Function(`${found[0]}; return { usd, tokens };`)() as Record<
      'usd' | 'tokens',
      (n: number) => string
    >;
    for (const n of [0, 0.004, 0.0326, 0.1, 0.99999, 1, 12.5, 1234.5, 98765.4321, -0.5]) {
      expect(usd(n)).toBe(usdPlainText(n));
      expect(tokens(n)).toBe(tokensPlainText(n));
    }
  });

  // Sums that decide (budget left, in flight) are kept in whole micro-tokens: a price that is not a
  // finite number would turn every comparison false and let a run spend without limit.
  it.each([Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY])(
    'refuses %d tokens as micro-tokens',
    (n) => {
      expect(() => toMicro(n)).toThrow(`tokens: must be a finite number, got ${String(n)}`);
    },
  );

  it.each([
    [1.63, 1_630_000],
    [0.1 + 0.2, 300_000],
    [4.81 * 1.1, 5_291_000],
    [-0.2, -200_000],
    [0, 0],
  ])('%d tokens are %d micro-tokens, and back', (tokens, micro) => {
    expect(toMicro(tokens)).toBe(micro);
    expect(fromMicro(micro)).toBe(roundTokens(tokens));
  });
});
