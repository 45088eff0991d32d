// Writes the JSON Schemas generated from the zod schemas; test/manifest/schema.test.ts fails when they drift.
// Run: npx tsx scripts/write-schemas.ts

import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { runAccountJsonSchema } from '../src/account/index.js';
import { manifestJsonSchema } from '../src/manifest/index.js';
import { runEventsJsonSchema } from '../src/run/events.js';
import { writeReportSchema } from './write-report-schema.js';

export const MANIFEST_SCHEMA_FILE = fileURLToPath(
  new URL('../schemas/manifest.schema.json', import.meta.url),
);

export function manifestSchemaText(): string {
  return `${JSON.stringify(manifestJsonSchema(), null, 2)}\n`;
}

export const RUN_EVENTS_SCHEMA_FILE = fileURLToPath(
  new URL('../schemas/run-events.schema.json', import.meta.url),
);

export function runEventsSchemaText(): string {
  return `${JSON.stringify(runEventsJsonSchema(), null, 2)}\n`;
}

export const RUN_ACCOUNT_SCHEMA_FILE = fileURLToPath(
  new URL('../schemas/run-account.schema.json', import.meta.url),
);

export function runAccountSchemaText(): string {
  return `${JSON.stringify(runAccountJsonSchema(), null, 2)}\n`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await writeFile(MANIFEST_SCHEMA_FILE, manifestSchemaText());
  console.log(`wrote ${MANIFEST_SCHEMA_FILE}`);
  await writeReportSchema();
  await writeFile(RUN_EVENTS_SCHEMA_FILE, runEventsSchemaText());
  console.log(`wrote ${RUN_EVENTS_SCHEMA_FILE}`);
  await writeFile(RUN_ACCOUNT_SCHEMA_FILE, runAccountSchemaText());
  console.log(`wrote ${RUN_ACCOUNT_SCHEMA_FILE}`);
}
