// Money has one owner: no file but the money module (src/money/index.ts) assigns to a figure of the run's
// money (the runner's counters, its slots, its budget), and no file but the store's reservations module
// (src/store/reservations.ts, and the migrations of either backend that create the tables and their triggers) writes the
// tables the budget is decided from. Read over the sources, like the shape test.

import { readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tsFiles } from '../../scripts/code-shape.js';

const ROOT = resolve(import.meta.dirname, '../..');
const SRC = tsFiles(join(ROOT, 'src'));

/** An assignment, compound assignment or ++/-- (not a comparison, not an arrow). */
const WRITE = String.raw`\s*(?:\+\+|--|[-+*/]?=(?![=>]))`;
/** The runner's money as it was written from six files: core.money.*, inFlight, inDoubtMax, … */
const MONEY_FIELD = new RegExp(
  String.raw`(?:\b(?:core|this)\.(?:money(?:\.\w+)?|inFlight\w*|inDoubtMax|budgetMicro|estimateChange|committed\w*)|\bmoney\.\w+)${WRITE}`,
  'g',
);
const MONEY_SQL = /\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(?:reservations|run_money)\b/gi;

/** Lines of `source` the pattern matches, as `file:line: text`. */
function hits(file: string, source: string, pattern: RegExp): string[] {
  const found: string[] = [];
  source.split('\n').forEach((line, i) => {
    if (/^\s*(?:\/\/|\*)/.test(line)) return;
    pattern.lastIndex = 0;
    // Creating the owner is not writing a figure.
    if (pattern.test(line) && !/=\s*new RunMoney\(/.test(line))
      found.push(`${file}:${i + 1}: ${line.trim()}`);
  });
  return found;
}

function scan(pattern: RegExp, owners: readonly string[]): string[] {
  return SRC.flatMap((path) => {
    const file = relative(ROOT, path);
    if (owners.includes(file)) return [];
    return hits(file, readFileSync(path, 'utf8'), pattern);
  });
}

describe('money has one owner', () => {
  it('no file but src/money/index.ts assigns to a money figure of the run', () => {
    expect(scan(MONEY_FIELD, ['src/money/index.ts'])).toEqual([]);
  });

  it('no file but src/store/reservations.ts (and the migrations) writes the reservations or run_money', () => {
    expect(
      scan(MONEY_SQL, ['src/store/reservations.ts', 'src/store/migrations.ts', 'src/store/pg/migrations.ts']),
    ).toEqual([]);
  });

  it('finds the writes of the code before money had an owner', () => {
    const before = 'core.money.inFlightMax += taskMax;\n      if (slot) core.inFlight++;\n';
    expect(hits('submit.ts', before, MONEY_FIELD)).toHaveLength(2);
  });

  it('the patterns find what they are for (a check that finds nothing proves nothing)', () => {
    const sample = [
      'core.money.charged += toMicro(cost);',
      '  core.inFlight++;',
      'this.money.inFlightMax -= taskMax;',
      'core.money = other;',
      'if (core.money.slots >= concurrency) wait();',
      '// core.money.charged += 1 in a comment',
      'const f = (money) => money.charged === 0;',
      'this.money = new RunMoney(store, runId, budget);',
    ].join('\n');
    expect(hits('sample.ts', sample, MONEY_FIELD)).toEqual([
      'sample.ts:1: core.money.charged += toMicro(cost);',
      'sample.ts:2: core.inFlight++;',
      'sample.ts:3: this.money.inFlightMax -= taskMax;',
      'sample.ts:4: core.money = other;',
    ]);
    const sql = "db.prepare(`UPDATE reservations SET state = 'held'`);\n'SELECT * FROM run_money'";
    expect(hits('sql.ts', sql, MONEY_SQL)).toEqual([
      "sql.ts:1: db.prepare(`UPDATE reservations SET state = 'held'`);",
    ]);
  });
});
