import { describe, expect, it } from 'vitest';
import { GALLERY_JS } from '../../src/report/gallery-script.js';
import {
  roundTokens,
  tokensPlainText,
  tokensText,
  tokensToUsd,
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

  it.each([
    [0, '$0.00', '$0.00'],
    [0.004, '$0.004', '$0.004'],
    [0.1, '$0.10', '$0.10'],
    [12.5, '$12.50', '$12.50'],
    [1234.5, '$1,234.50', '$1234.50'],
  ])('$%d is written %s in the terminal and %s in reports', (usd, terminal, report) => {
    expect(usdText(usd)).toBe(terminal);
    expect(usdPlainText(usd)).toBe(report);
  });

  it.each([
    [0.2, '0.2', '0.2'],
    [12345.67891, '12,345.6789', '12345.6789'],
  ])('%d tokens are written %s in the terminal and %s in reports', (n, terminal, report) => {
    expect(tokensText(n)).toBe(terminal);
    expect(tokensPlainText(n)).toBe(report);
  });

  // The gallery formats again in the browser: its copies must print what report.md prints.
  it('the gallery script writes tokens and dollars as the report does', () => {
    const source = (name: string) => {
      const found = new RegExp(`function ${name}\\(n\\) \\{[^\\n]*\\}`).exec(GALLERY_JS);
      if (found === null) throw new Error(`no function ${name} in the gallery script`);
      return new Function(`${found[0]}; return ${name};`)() as (n: number) => string;
    };
    const usd = source('usd');
    const tokens = source('tokens');
    for (const n of [0, 0.004, 0.0326, 0.1, 0.99999, 1, 12.5, 1234.5, 98765.4321]) {
      expect(usd(n)).toBe(usdPlainText(n));
      expect(tokens(n)).toBe(tokensPlainText(n));
    }
  });
});
