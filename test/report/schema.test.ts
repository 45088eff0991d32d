import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { REPORT_SCHEMA_FILE, reportSchemaText } from '../../scripts/write-report-schema.js';
import { reportSchema } from '../../src/report/index.js';
import { TASK_STATES } from '../../src/store/index.js';

describe('schemas/report.schema.json', () => {
  it('is the committed file (run `npx tsx scripts/write-report-schema.ts` after changing src/report/schema.ts)', async () => {
    expect(await readFile(REPORT_SCHEMA_FILE, 'utf8')).toBe(reportSchemaText());
  });

  it('documents a closed, versioned shape with every task status', () => {
    const schema = JSON.parse(reportSchemaText()) as {
      title: string;
      required: string[];
      additionalProperties: boolean;
      properties: {
        version: { const: number };
        tasks: { items: { properties: { status: { enum: string[] } } } };
      };
    };
    expect(schema.title).toBe('mediabatch cost report');
    expect(schema.properties.version.const).toBe(2);
    expect(schema.additionalProperties).toBe(false);
    // Every key is required but the ones added since version 2 came out (compatible additions).
    const optional = ['account', 'review', 'shards'];
    expect(schema.required).toEqual(Object.keys(reportSchema.shape).filter((k) => !optional.includes(k)));
    expect(schema.properties.tasks.items.properties.status.enum).toEqual([...TASK_STATES]);
  });
});
