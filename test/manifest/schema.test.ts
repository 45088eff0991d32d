import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { MANIFEST_SCHEMA_FILE, manifestSchemaText } from '../../scripts/write-schemas.js';
import { manifestJsonSchema, manifestSchema } from '../../src/manifest/index.js';

describe('manifest JSON Schema', () => {
  it('is the committed schemas/manifest.schema.json (run `npx tsx scripts/write-schemas.ts` after changing the zod schema)', async () => {
    const committed = await readFile(MANIFEST_SCHEMA_FILE, 'utf8');
    expect(committed).toBe(manifestSchemaText());
  });

  it('describes every top-level and task key, and refuses others', () => {
    const schema = manifestJsonSchema() as {
      properties: Record<
        string,
        { description?: string; items?: { properties: object; additionalProperties: boolean } }
      >;
      additionalProperties: boolean;
      required: string[];
    };
    expect(Object.keys(schema.properties)).toEqual(Object.keys(manifestSchema.shape));
    expect(schema.additionalProperties).toBe(false);
    expect(schema.required).toEqual(['version', 'name', 'tasks']);
    const task = schema.properties.tasks?.items;
    expect(Object.keys(task?.properties ?? {})).toEqual([
      'id',
      'model',
      'input',
      'matrix',
      'foreach',
      'repeat',
      'media_seconds',
      'retries',
      'review',
      'file_name',
      'after',
    ]);
    expect(task?.additionalProperties).toBe(false);
    for (const [key, property] of Object.entries(schema.properties)) {
      expect(property.description, key).toBeTruthy();
    }
  });
});
