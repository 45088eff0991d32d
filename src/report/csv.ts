// report.csv: one row per task, RFC 4180 (comma, CRLF, fields quoted when they hold a comma, a quote or a
// line break, quotes doubled), UTF-8 without a byte-order mark. Pure; streamed a row at a time.

import type { Report, ReportTask } from './schema.js';

type Cell = string | number | boolean | null;

interface Column {
  name: string;
  value: (t: ReportTask) => Cell;
  /** Free text that a spreadsheet could take for a formula. */
  text?: boolean;
}

export const CSV_COLUMNS: readonly Column[] = [
  { name: 'task_id', value: (t) => t.id, text: true },
  { name: 'model', value: (t) => t.model, text: true },
  { name: 'img_uuid', value: (t) => t.img_uuid, text: true },
  { name: 'status', value: (t) => t.status },
  { name: 'job_status', value: (t) => t.job_status, text: true },
  { name: 'estimate_tokens', value: (t) => t.estimate.tokens },
  { name: 'estimate_min', value: (t) => t.estimate.min },
  { name: 'estimate_max', value: (t) => t.estimate.max },
  { name: 'estimate_basis', value: (t) => t.estimate.basis, text: true },
  { name: 'estimate_assumed', value: (t) => t.estimate.assumed },
  { name: 'charged_tokens', value: (t) => t.charged },
  { name: 'refunded_tokens', value: (t) => t.refunded },
  { name: 'net_tokens', value: (t) => t.net },
  { name: 'net_usd', value: (t) => t.net_usd },
  { name: 'jobs', value: (t) => t.jobs },
  { name: 'attempts', value: (t) => t.attempts },
  { name: 'charged_attempts', value: (t) => t.charged_attempts },
  { name: 'cost_assumed', value: (t) => t.cost_assumed },
  { name: 'recovered_from_doubt', value: (t) => t.recovered_from_doubt },
  { name: 'submitted_at', value: (t) => t.submitted_at },
  { name: 'finished_at', value: (t) => t.finished_at },
  { name: 'job_duration_s', value: (t) => t.job_duration_s },
  { name: 'elapsed_s', value: (t) => t.elapsed_s },
  { name: 'files', value: (t) => t.files.map((f) => f.path).join(';'), text: true },
  { name: 'file_bytes', value: (t) => t.files.map((f) => f.bytes).join(';') },
  { name: 'total_bytes', value: (t) => t.bytes },
  { name: 'error', value: (t) => t.error, text: true },
  { name: 'after', value: (t) => afterText(t), text: true },
  { name: 'planned_estimate_min', value: (t) => t.planned_estimate?.min ?? null },
  { name: 'planned_estimate_max', value: (t) => t.planned_estimate?.max ?? null },
  // A reviewed task's status (waiting, awaiting, approved, rejected) and its attempt; empty otherwise.
  { name: 'review', value: (t) => t.review?.status ?? null },
  { name: 'attempt', value: (t) => t.review?.attempt ?? null },
];

export function reportCsv(report: Report): string {
  return [...csvChunks(report.tasks)].join('');
}

/** report.csv a line at a time: the header, then one row per task as the tasks are read. */
export function* csvChunks(tasks: Iterable<ReportTask>): Generator<string, void, void> {
  yield csvHeader();
  for (const task of tasks) yield csvRow(task);
}

/** report.csv's first line: the columns' names. */
export function csvHeader(): string {
  return toCsv([CSV_COLUMNS.map((c) => c.name)]);
}

/** One task's line of report.csv. */
export function csvRow(task: ReportTask): string {
  return toCsv([CSV_COLUMNS.map((c) => (c.text ? defuseFormula(c.value(task)) : c.value(task)))]);
}

/** RFC 4180 text of the rows, each line ended by CRLF. Null is an empty field. */
export function toCsv(rows: readonly (readonly Cell[])[]): string {
  return rows.map((row) => `${row.map(csvField).join(',')}\r\n`).join('');
}

export function csvField(cell: Cell): string {
  if (cell === null) return '';
  const text = String(cell);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/**
 * A spreadsheet runs a cell that starts with = + - @ (or a tab or CR before them) as a formula; task ids
 * and errors are user or server text, so such a cell gets a leading apostrophe, which spreadsheets show
 * as text (OWASP's advice for CSV injection).
 */
export function defuseFormula(cell: Cell): Cell {
  return typeof cell === 'string' && /^[=+\-@\t\r]/.test(cell) ? `'${cell}` : cell;
}

/** The tasks a chained task waits for: `hero-mug`, or `still=hero-mug;voice=voice-1` for named ones. */
export function afterText(t: Pick<ReportTask, 'after'>): string {
  return t.after.map((u) => (u.name === '' ? u.task : `${u.name}=${u.task}`)).join(';');
}
