// Text from task ids, prompts, errors and the server ends up in CSV, Markdown and HTML: each format's
// escaping, as tables of what a reader would otherwise see go wrong.
import { parse as parseCsv } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { csvField, defuseFormula, toCsv } from '../../src/report/csv.js';
import { esc, jsonForScript } from '../../src/report/gallery.js';
import { code, text } from '../../src/report/markdown.js';

describe('CSV (RFC 4180)', () => {
  it.each([
    ['plain', 'plain'],
    ['a,b', '"a,b"'],
    ['say "hi"', '"say ""hi"""'],
    ['two\nlines', '"two\nlines"'],
    ['cr\r\nlf', '"cr\r\nlf"'],
    [null, ''],
    [0.15, '0.15'],
    [true, 'true'],
  ])('writes %j as %j', (cell, field) => {
    expect(csvField(cell)).toBe(field);
  });

  it('reads back, through a CSV library, exactly what was written', () => {
    const rows = [
      ['id', 'error'],
      ['<script>alert(1)</script>', 'line one\r\nline "two", with a comma'],
      ['ünïcødé ✓', ''],
    ];
    expect(parseCsv(toCsv(rows))).toEqual(rows);
  });

  it.each([
    ['=HYPERLINK("http://x")', `'=HYPERLINK("http://x")`],
    ['+1', `'+1`],
    ['-cmd', `'-cmd`],
    ['@SUM(A1)', `'@SUM(A1)`],
    ['\t=1', `'\t=1`],
    ['hero-1', 'hero-1'],
    [-3, -3],
  ])('keeps a spreadsheet from running %j as a formula', (cell, out) => {
    expect(defuseFormula(cell)).toBe(out);
  });
});

describe('Markdown', () => {
  it.each([
    ['flow22_spicy', 'flow22_spicy'],
    ['_emphasis_', '\\_emphasis\\_'],
    ['a | b', 'a \\| b'],
    ['<img src=x onerror=alert(1)>', '\\<img src=x onerror=alert(1)\\>'],
    ['[link](http://x)', '\\[link\\](http://x)'],
    ['**bold**', '\\*\\*bold\\*\\*'],
    ['two\nlines', 'two lines'],
  ])('makes %j inert as %j', (input, output) => {
    expect(text(input)).toBe(output);
  });

  it.each([
    ['hero-1', '`hero-1`'],
    ['a`b', '``a`b``'],
    ['`x`', '`` `x` ``'],
    ['a|b', '`a\\|b`'],
  ])('puts %j in code style as %j', (input, output) => {
    expect(code(input)).toBe(output);
  });
});

describe('HTML', () => {
  it.each([
    ['<script>alert(1)</script>', '&lt;script&gt;alert(1)&lt;/script&gt;'],
    [`"'><img>`, '&quot;&#39;&gt;&lt;img&gt;'],
    ['a & b', 'a &amp; b'],
  ])('escapes %j as %j', (input, output) => {
    expect(esc(input)).toBe(output);
  });

  it('inlines JSON that cannot close its <script> element and parses back unchanged', () => {
    const value = { id: '</script><script>alert(1)</script>', note: '<!-- & \u2028 \u2029 -->' };
    const inline = jsonForScript(value);
    expect(inline).not.toMatch(/[<>&\u2028\u2029]/);
    expect(JSON.parse(inline)).toEqual(value);
  });
});
