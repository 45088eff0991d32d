// Writes the four files of a run's report into its folder, each atomically (temporary name, fsync,
// rename), so a reader never sees half a report.

import { join } from 'node:path';
import type { Store } from '../store/index.js';
import { writeFileAtomic } from '../util/fsatomic.js';
import { assembleReport, collectReportInput, type ReportOptions } from './build.js';
import { reportCsv } from './csv.js';
import { readGalleryExtras } from './extras.js';
import { renderGallery } from './gallery.js';
import { reportMarkdown } from './markdown.js';
import type { Report } from './schema.js';

export const REPORT_FILES = {
  json: 'report.json',
  csv: 'report.csv',
  markdown: 'report.md',
  gallery: 'index.html',
} as const;

export interface WrittenReport {
  report: Report;
  markdown: string;
  /** Absolute paths of the files written. */
  files: { json: string; csv: string; markdown: string; gallery: string };
}

export async function writeReport(
  store: Store,
  runId: string,
  runDir: string,
  opts: Omit<ReportOptions, 'runDir'>,
): Promise<WrittenReport> {
  const input = collectReportInput(store, runId, { ...opts, runDir });
  const report = assembleReport(input);
  const markdown = reportMarkdown(report);
  const extras = await readGalleryExtras(report, input.tasks, runDir);
  const files = {
    json: join(runDir, REPORT_FILES.json),
    csv: join(runDir, REPORT_FILES.csv),
    markdown: join(runDir, REPORT_FILES.markdown),
    gallery: join(runDir, REPORT_FILES.gallery),
  };
  await writeFileAtomic(files.json, `${JSON.stringify(report, null, 2)}\n`);
  await writeFileAtomic(files.csv, reportCsv(report));
  await writeFileAtomic(files.markdown, markdown);
  await writeFileAtomic(files.gallery, renderGallery(report, extras));
  return { report, markdown, files };
}
