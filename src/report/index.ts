// The cost report of a run (report.json, report.csv, report.md) and its gallery (index.html).

export {
  assembleReport,
  buildReport,
  collectReportInput,
  type QuotaKeyInput,
  quotaOfKey,
  type ReportInput,
  type ReportOptions,
  UnknownRunError,
} from './build.js';
export { CSV_COLUMNS, reportCsv, toCsv } from './csv.js';
export { promptOf, readGalleryExtras } from './extras.js';
export { type GalleryExtra, renderGallery } from './gallery.js';
export { reportMarkdown } from './markdown.js';
export {
  type Report,
  type ReportFile,
  type ReportSummary,
  type ReportTask,
  reportJsonSchema,
  reportSchema,
} from './schema.js';
export { REPORT_FILES, type WrittenReport, writeReport } from './write.js';
