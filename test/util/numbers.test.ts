// A token amount and its unit, one way on every surface: the terminal and reports (src/util/numbers.ts),
// the page (assets/view/format.js) and the gallery's script repeat the rule. The unit is singular only
// for an amount that reads 1 as printed.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GALLERY_JS } from '../../src/report/gallery-script.js';
import { fmtTokensExactWithUnit, fmtTokensWithUnit, withTokenUnit } from '../../src/util/numbers.js';
import { REPO } from '../helpers/child.js';

/** The page's own tokens() and tokensWithUnit(), run here: the module itself needs a browser to load. */
function pageFormat(): { tokensWithUnit: (n: number | null) => string } {
  const source = readFileSync(join(REPO, 'assets', 'view', 'format.js'), 'utf8');
  const format = /const tokenFormat = .*;/.exec(source)?.[0];
  const fns =
    /export function tokens\([\s\S]*?\n}\n[\s\S]*?export function tokensWithUnit\([\s\S]*?\n}\n/.exec(
      source,
    )?.[0];
  if (format === undefined || fns === undefined)
    throw new Error('no tokens() or tokensWithUnit() in format.js');
  return new Function(`${format}\n${fns.replaceAll('export ', '')}; return { tokensWithUnit };`)();
}

const AMOUNTS = [0, 0.2, 0.99999, 1, 1.00001, 1.5, 2, 1604.25, -1, -0.5];

describe('a token amount with its unit', () => {
  it.each([
    [1, '1 token'],
    [0.99999, '1 token'],
    [-1, '-1 token'],
    [0, '0 tokens'],
    [0.2, '0.2 tokens'],
    [1.5, '1.5 tokens'],
    [2, '2 tokens'],
    [1604.25, '1,604.25 tokens'],
  ])('%d tokens read %s', (n, text) => {
    expect(fmtTokensWithUnit(n)).toBe(text);
  });

  it.each([
    [1, '1 token'],
    [0.9999999, '1 token'],
    [0.999999, '0.999999 tokens'],
    [1.000001, '1.000001 tokens'],
  ])('%d tokens to the micro-token read %s', (n, text) => {
    expect(fmtTokensExactWithUnit(n)).toBe(text);
  });

  it('takes a range as written: never one', () => {
    expect(withTokenUnit('0.2–1')).toBe('0.2–1 tokens');
    expect(withTokenUnit('1')).toBe('1 token');
  });

  it('reads the same on the page', () => {
    const { tokensWithUnit } = pageFormat();
    for (const n of AMOUNTS) expect(tokensWithUnit(n), String(n)).toBe(fmtTokensWithUnit(n));
    expect(tokensWithUnit(null)).toBe('–');
  });

  it("reads the same in the gallery's script", () => {
    const found = /var TOKENS[\s\S]*?(?=\n {2}function bytes)/.exec(GALLERY_JS);
    if (found === null) throw new Error('no number formats in the gallery script');
    const { tokens, unit } = new Function(`${found[0]}; return { tokens, unit };`)() as Record<
      'tokens' | 'unit',
      (n: number | string) => string
    >;
    for (const n of AMOUNTS) expect(tokens(n) + unit(tokens(n)), String(n)).toBe(fmtTokensWithUnit(n));
  });
});
