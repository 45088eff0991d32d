// Writes schemas/report.schema.json, the documented shape of report.json, from the zod schema in
// src/report/schema.ts; test/report/schema.test.ts fails when the committed file drifts.
// Run: npx tsx scripts/write-report-schema.ts (scripts/write-schemas.ts runs it too)

import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { reportJsonSchema } from '../src/report/schema.js';

export const REPORT_SCHEMA_FILE = fileURLToPath(new URL('../schemas/report.schema.json', import.meta.url));

export function reportSchemaText(): string {
  return `${JSON.stringify(reportJsonSchema(), null, 2)}\n`;
}

export async function writeReportSchema(): Promise<void> {
  await writeFile(REPORT_SCHEMA_FILE, reportSchemaText());
  console.log(`wrote ${REPORT_SCHEMA_FILE}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await writeReportSchema();
}
