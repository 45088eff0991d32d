// The store's SQL is written once, for SQLite. On PostgreSQL each statement is rewritten here, once, when
// first run: placeholders become $n, and the few SQLite forms PostgreSQL spells otherwise are respelt.
// What only SQLite has as a function (total, json_each, instr, json_extract, …) is defined in the
// database instead (src/store/pg/compat.ts), so most statements need no rewriting at all.

import { type BulkInsert, bulkInsertOf } from './bulk.js';

/** A statement in PostgreSQL's dialect and how to bind its parameters. */
export interface PgStatementText {
  text: string;
  /** Positional (`?`): how many. */
  positional: number;
  /** Named (`:name`, `@name`, `$name`): the names in $n order. */
  names: readonly string[];
  /** Whether it may change rows (anything but a SELECT). */
  writes: boolean;
  /** A multi-row INSERT of alike rows: sent as one array per column instead (bulk.ts). */
  bulk?: BulkInsert;
}

const LITERAL = /'(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*/g;

/** Replaces literals by \uE000n\uE000 so the rewrites below never touch them; returns them to put back. */
function mask(sql: string): { code: string; literals: string[] } {
  const literals: string[] = [];
  const code = sql.replace(LITERAL, (literal) => {
    literals.push(literal);
    return `\uE000${literals.length - 1}\uE000`;
  });
  return { code, literals };
}

function unmask(code: string, literals: readonly string[]): string {
  return code.replace(/\uE000(\d+)\uE000/g, (_, i: string) => literals[Number(i)] ?? '');
}

/** `?` and `:name` / `@name` / `$name` → `$1`, `$2`, … (a name used twice is one parameter). */
function placeholders(code: string): { code: string; positional: number; names: string[] } {
  let positional = 0;
  const names: string[] = [];
  const out = code.replace(/\?|(?<![:\w])[:@$]([A-Za-z_]\w*)/g, (_match, name: string | undefined) => {
    if (name === undefined) {
      positional += 1;
      return `$${positional}`;
    }
    let index = names.indexOf(name);
    if (index < 0) index = names.push(name) - 1;
    return `$${index + 1}`;
  });
  if (positional > 0 && names.length > 0) {
    throw new Error(`a statement mixes ? and named parameters: ${code.slice(0, 80)}`);
  }
  return { code: out, positional, names };
}

/** The end of the parenthesised list opening at `open` (the index of its "("), and its top-level commas. */
function closing(code: string, open: number): { end: number; commas: number } {
  let depth = 0;
  let commas = 0;
  for (let i = open; i < code.length; i++) {
    const c = code[i];
    if (c === '(') depth += 1;
    else if (c === ')') {
      depth -= 1;
      if (depth === 0) return { end: i, commas };
    } else if (c === ',' && depth === 1) commas += 1;
  }
  return { end: code.length, commas };
}

/** SQLite's two-argument max/min are GREATEST/LEAST; json_object is json_build_object (as text). */
function scalarFunctions(code: string): string {
  let out = code;
  const pattern = /\b(max|min|json_object)\s*\(/gi;
  let match: RegExpExecArray | null = pattern.exec(out);
  while (match !== null) {
    const name = (match[1] ?? '').toLowerCase();
    const open = match.index + match[0].length - 1;
    const { end, commas } = closing(out, open);
    const args = out.slice(open, end + 1);
    let replacement: string | undefined;
    if (name === 'json_object') replacement = `(json_build_object${args}::text)`;
    else if (commas > 0) replacement = `${name === 'max' ? 'GREATEST' : 'LEAST'}${args}`;
    if (replacement !== undefined) {
      out = out.slice(0, match.index) + replacement + out.slice(end + 1);
      pattern.lastIndex = match.index + 1;
    }
    match = pattern.exec(out);
  }
  return out;
}

/** INSERT OR IGNORE → INSERT … ON CONFLICT DO NOTHING (before a RETURNING, if any). */
function insertOrIgnore(code: string): string {
  if (!/\bINSERT\s+OR\s+IGNORE\b/i.test(code)) return code;
  const body = code.replace(/\bINSERT\s+OR\s+IGNORE\b/i, 'INSERT');
  const returning = body.search(/\bRETURNING\b/i);
  return returning < 0
    ? `${body.trimEnd()} ON CONFLICT DO NOTHING`
    : `${body.slice(0, returning)}ON CONFLICT DO NOTHING ${body.slice(returning)}`;
}

/** Rewrites one SQLite statement of the store for PostgreSQL. */
export function toPostgres(sql: string): PgStatementText {
  const { code: masked, literals } = mask(sql);
  const { code: numbered, positional, names } = placeholders(masked);
  let code = numbered
    // `a IS NOT b` / `a IS b` compare with NULL as a value in SQLite.
    .replace(/\bIS\s+NOT\s+(?!NULL\b|DISTINCT\b|TRUE\b|FALSE\b)/gi, 'IS DISTINCT FROM ')
    .replace(/\bIS\s+(?!NOT\b|NULL\b|DISTINCT\b|TRUE\b|FALSE\b)/gi, 'IS NOT DISTINCT FROM ')
    // `+column` only keeps SQLite from choosing an index.
    .replace(/(\b(?:AND|OR|WHERE|ON|BY)\s+|[(,=]\s*)\+(?=[A-Za-z_])/gi, '$1')
    // PostgreSQL folds unquoted names to lower case: a camelCase alias keeps its case quoted.
    .replace(/\bAS\s+([A-Za-z_]\w*)\b/g, (match, alias: string) =>
      /[a-z]/.test(alias) && /[A-Z]/.test(alias) ? `AS "${alias}"` : match,
    )
    // SQLite's index hints; PostgreSQL's planner chooses alone.
    .replace(/\s+INDEXED\s+BY\s+\w+/gi, '')
    // SQLite's INTEGER is 64 bits; PostgreSQL's is 32.
    .replace(/\bAS\s+INTEGER\b/gi, 'AS BIGINT')
    // json_each's values are text; compared with a row number they are numbers.
    .replace(/\b(rowid\s+IN\s*\(\s*SELECT\s+value)\b/gi, '$1::bigint');
  code = scalarFunctions(code);
  code = insertOrIgnore(code);
  const bulk = names.length === 0 ? bulkInsertOf(masked, (c) => unmask(c, literals)) : undefined;
  return {
    text: unmask(code, literals),
    positional,
    names,
    writes: !/^\s*SELECT\b/i.test(sql),
    ...(bulk !== undefined ? { bulk } : {}),
  };
}
