// The cost report of a run (report.json, report.csv, report.md) and its gallery (index.html).

export {
  assembleReport,
  buildReport,
  collectReportInput,
  headOfReport,
  type QuotaKeyInput,
  quotaOfKey,
  type ReportHead,
  type ReportInput,
  type ReportOptions,
  UnknownRunError,
} from './build.js';
export { CSV_COLUMNS, reportCsv, toCsv } from './csv.js';
export { promptOf, readGalleryExtras } from './extras.js';
export { type GalleryExtra, renderGallery } from './gallery.js';
export { collectReportHead } from './head.js';
export { reportJsonChunks } from './json.js';
export { MARKDOWN_LIST_LIMIT, reportMarkdown } from './markdown.js';
export {
  type Report,
  type ReportFile,
  type ReportSummary,
  type ReportTask,
  reportJsonSchema,
  reportSchema,
} from './schema.js';
export { copyReportFile, REPORT_FILES, reportFiles, type WrittenReport, writeReport } from './write.js';
