// Rows for `foreach`: CSV (header row), JSON (a list of objects), JSONL (one object per line) and YAML
// (a list of mappings). Problems in a data file point into that file.

import { extname } from 'node:path';
import type { parse as CsvParse } from 'csv-parse/sync';
import { excerpt, FileRefused } from './files.js';
import { MAX_DATA_BYTES } from './limits.js';
import type { ManifestProblem, SourcePos } from './types.js';
import { describeValue, formatCount, isPlainObject, type PlainObject, setOwn } from './values.js';
import { parseYaml } from './yaml-tree.js';

export const FOREACH_FORMATS = ['.csv', '.json', '.jsonl', '.yaml', '.yml'] as const;

export type RowsResult = { ok: true; rows: PlainObject[] } | { ok: false; problems: ManifestProblem[] };

export interface RowSource {
  /** Absolute path to read. */
  path: string;
  /** The path as the user sees it in messages (relative to where they ran the command). */
  shown: string;
  /** Field path of the `foreach` in the manifest, e.g. `tasks.1.foreach`. */
  field: string;
  /** Where `foreach` is written in the manifest. */
  pos: SourcePos;
}

const MAX_ROW_PROBLEMS = 20;

export async function readRows(
  source: RowSource,
  readFile: (path: string) => Promise<Buffer>,
): Promise<RowsResult> {
  const format = extname(source.path).toLowerCase();
  const here = (message: string): RowsResult => ({
    ok: false,
    problems: [{ pos: source.pos, path: source.field, message }],
  });
  if (!(FOREACH_FORMATS as readonly string[]).includes(format)) {
    return here(`unsupported file type "${format || source.shown}"; use ${FOREACH_FORMATS.join(', ')}`);
  }
  let buffer: Buffer;
  try {
    buffer = await readFile(source.path);
  } catch (error) {
    if (error instanceof FileRefused) return here(refusal(source.shown, error));
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'no such file' : (code ?? 'unreadable');
    return here(`cannot read ${source.shown}: ${reason}; the path is relative to the manifest's folder`);
  }
  // An injected reader (tests, in-memory use) may not enforce the cap itself.
  if (buffer.length > MAX_DATA_BYTES) return here(refusal(source.shown, tooBig(source.path, buffer.length)));
  const text = buffer.toString('utf8');
  const problems = new RowProblems(source);
  // The CSV parser is loaded only for a CSV file: `validate` of a manifest without one starts faster.
  const rows =
    format === '.csv'
      ? csvRows((await import('csv-parse/sync')).parse, text, problems)
      : format === '.json'
        ? jsonRows(text, problems)
        : format === '.jsonl'
          ? jsonlRows(text, problems)
          : yamlRows(text, problems);
  const list = problems.list();
  return list.length > 0 ? { ok: false, problems: list } : { ok: true, rows };
}

const LIMIT_MB = MAX_DATA_BYTES / 1024 / 1024;

function tooBig(path: string, size: number): FileRefused {
  return new FileRefused(path, { kind: 'too-big', size });
}

function refusal(shown: string, error: FileRefused): string {
  const { reason } = error;
  switch (reason.kind) {
    case 'outside':
      return `data file ${shown} is outside the manifest's folder ${reason.dir}; move it there or pass --allow-outside-data`;
    case 'not-regular':
      return `data file ${shown} is ${reason.what}, not a regular file; give the path of a .csv, .json, .jsonl or .yaml file`;
    case 'too-big': {
      const size = reason.size === undefined ? '' : `${formatCount(reason.size)} bytes, `;
      return `${shown} is ${size}more than the ${LIMIT_MB} MB limit for data files; split it`;
    }
  }
}

/** Text quoted from a data file: short, and never a secret (the file may be an environment dump). */
const QUOTE_MAX = 60;
const MESSAGE_MAX = 200;

class RowProblems {
  #source: RowSource;
  #problems: ManifestProblem[] = [];
  #more = 0;

  constructor(source: RowSource) {
    this.#source = source;
  }

  at(line: number, col: number, message: string): void {
    this.add({ file: this.#source.shown, line, col }, message);
  }

  add(pos: SourcePos, message: string): void {
    if (this.#problems.length >= MAX_ROW_PROBLEMS) {
      this.#more++;
      return;
    }
    // Every message may carry text of the file (a header, a parser's snippet): made safe here, once.
    this.#problems.push({ pos, path: this.#source.field, message: excerpt(message, MESSAGE_MAX) });
  }

  file(): string {
    return this.#source.shown;
  }

  list(): ManifestProblem[] {
    const last = this.#problems.at(-1);
    if (last && this.#more > 0)
      last.message += ` (and ${formatCount(this.#more)} more problems in this file)`;
    return this.#problems;
  }
}

/** Strictly decimal: `12`, `-3.5`; `007`, `1e3`, `+1`, `.5` stay text, as do integers too large to be exact. */
const DECIMAL = /^-?(?:0|[1-9]\d*)(?:\.\d+)?$/;

export function csvValue(text: string): string | number {
  if (!DECIMAL.test(text)) return text;
  const value = Number(text);
  if (!text.includes('.') && !Number.isSafeInteger(value)) return text;
  return value;
}

function csvRows(parseCsv: typeof CsvParse, text: string, problems: RowProblems): PlainObject[] {
  let records: Array<{ record: string[]; info: { lines: number } }>;
  try {
    // With `info: true` each record comes as { record, info }; the typings do not follow the option.
    records = parseCsv(text, {
      bom: true,
      info: true,
      relax_column_count: true,
      skip_empty_lines: true,
    }) as unknown as typeof records;
  } catch (error) {
    const line = (error as { lines?: number }).lines ?? 1;
    problems.at(line, 1, `invalid CSV: ${excerpt((error as Error).message, QUOTE_MAX)}`);
    return [];
  }
  const [header, ...body] = records;
  if (!header) return [];
  const names = header.record;
  const seen = new Set<string>();
  names.forEach((name, i) => {
    if (name.trim() === '')
      problems.at(header.info.lines, 1, `column ${i + 1} has no name in the header row`);
    else if (seen.has(name))
      problems.at(
        header.info.lines,
        1,
        `column "${excerpt(name, QUOTE_MAX)}" appears twice in the header row`,
      );
    seen.add(name);
  });
  const rows: PlainObject[] = [];
  body.forEach(({ record, info }, i) => {
    if (record.length !== names.length) {
      problems.at(
        info.lines,
        1,
        `row ${i + 1} has ${record.length} values; the header has ${names.length} (${excerpt(names.join(', '), QUOTE_MAX)})`,
      );
      return;
    }
    const row: PlainObject = {};
    names.forEach((name, k) => {
      setOwn(row, name, csvValue(record[k] ?? ''));
    });
    rows.push(row);
  });
  return rows;
}

function jsonRows(text: string, problems: RowProblems): PlainObject[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    const { line, col } = jsonErrorPos(text, error);
    problems.at(line, col, `invalid JSON: ${excerpt((error as Error).message, QUOTE_MAX)}`);
    return [];
  }
  if (!Array.isArray(value)) {
    problems.at(1, 1, `must be a JSON list of objects ([{...}, ...]), got ${describeValue(value)}`);
    return [];
  }
  return objectsOnly(value, (_i, message) => problems.at(1, 1, message));
}

function jsonlRows(text: string, problems: RowProblems): PlainObject[] {
  const rows: PlainObject[] = [];
  const lines = text.split('\n');
  let rowNumber = 0;
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (line === '') return;
    rowNumber++;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (error) {
      problems.at(
        i + 1,
        1,
        `row ${rowNumber} is not valid JSON: ${excerpt((error as Error).message, QUOTE_MAX)}`,
      );
      return;
    }
    if (isPlainObject(value)) rows.push(value);
    else problems.at(i + 1, 1, `row ${rowNumber} must be a JSON object, got ${describeValue(value)}`);
  });
  return rows;
}

function yamlRows(text: string, problems: RowProblems): PlainObject[] {
  const parsed = parseYaml(text, problems.file(), { recordDepth: 1 });
  for (const problem of parsed.problems) problems.add(problem.pos, problem.message);
  if (parsed.problems.length > 0) return [];
  if (parsed.value === null || parsed.value === undefined) return [];
  if (!Array.isArray(parsed.value)) {
    problems.at(1, 1, `must be a YAML list of mappings (- key: value), got ${describeValue(parsed.value)}`);
    return [];
  }
  const index = parsed.index;
  return objectsOnly(parsed.value, (i, message) => problems.add(index.at(String(i)), message));
}

function objectsOnly(items: unknown[], report: (i: number, message: string) => void): PlainObject[] {
  const rows: PlainObject[] = [];
  items.forEach((item, i) => {
    if (isPlainObject(item)) rows.push(item);
    else report(i, `row ${i + 1} must be a mapping of fields, got ${describeValue(item)}`);
  });
  return rows;
}

function jsonErrorPos(text: string, error: unknown): { line: number; col: number } {
  const match = /position (\d+)/.exec(String((error as Error).message));
  if (!match) return { line: 1, col: 1 };
  const before = text.slice(0, Number(match[1]));
  const lineStart = before.lastIndexOf('\n') + 1;
  return { line: before.split('\n').length, col: before.length - lineStart + 1 };
}
