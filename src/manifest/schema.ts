// The raw manifest document as zod describes it: the shape editors check through the generated JSON Schema.
// Checks that need positions across values (templates, matrix keys, duplicate ids) live in expand.ts.

import * as z from 'zod';
import { MODEL_IDS } from '../catalog/types.js';
import { isTimeZone } from './clock.js';

export const NAME_PATTERN = /^[A-Za-z0-9_-]+$/;
export const NAME_RULE = 'must contain only letters, digits, - and _';
const TEMPLATE_PATTERN = /\{\{[\s\S]*\}\}/;
const LISTEN_PATTERN = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;
const CRON_PATTERN = /^\s*\S+(?:\s+\S+){4,5}\s*$/;

const INPUT_RULE = 'must be a mapping of request fields, or one {{placeholder}} that gives one';
const AFTER_RULE = 'must be a task id (a template like "voice-{{row.n}}") or a mapping of names to task ids';
const SECONDS_RULE = 'must be a number > 0, or a {{placeholder}} that gives one';

const anyMap = z.record(z.string(), z.unknown());

export const matrixSchema = z
  .object({
    include: z
      .array(anyMap)
      .optional()
      .describe(
        'Combinations to extend or add, as in CI matrices: extra keys join every matching combination.',
      ),
    exclude: z
      .array(anyMap)
      .optional()
      .describe('Combinations to drop: every combination matching all the keys of an entry is removed.'),
  })
  .catchall(z.array(z.unknown()).min(1))
  .describe('Cartesian product of the listed values; each key is a template name ({{product}}).');

export const taskSchema = z
  .strictObject({
    id: z
      .string()
      .min(1)
      .describe(
        'Unique task id after expansion, e.g. "hero-{{product}}"; names result folders and report rows.',
      ),
    model: z.string().min(1).describe('Model id, e.g. flat-image, speech-v3; may be a template ({{model}}).'),
    input: z
      .union([anyMap, z.string().regex(TEMPLATE_PATTERN, { error: INPUT_RULE })], { error: INPUT_RULE })
      .optional()
      .describe('The request body minus model and callback; strings may hold {{ }} templates.'),
    matrix: matrixSchema.optional(),
    foreach: z
      .string()
      .min(1)
      .optional()
      .describe(
        'A .csv, .json, .jsonl, .yaml or .yml file (relative to the manifest): one task per row, {{row.x}}.',
      ),
    repeat: z
      .int()
      .min(1)
      .optional()
      .describe('Make this many copies of the task; {{index}} numbers them from 1.'),
    media_seconds: z
      .union([z.number().positive(), z.string().regex(TEMPLATE_PATTERN, { error: SECONDS_RULE })], {
        error: SECONDS_RULE,
      })
      .optional()
      .describe('Length of the input media in seconds, for pricing when it cannot be probed.'),
    retries: z
      .int()
      .min(0)
      .max(10)
      .optional()
      .describe('Submit again, up to this many times, when the service fails the job (it refunds it).'),
    review: z
      .boolean()
      .optional()
      .describe(
        'Its result must be chosen (approved) before any task that waits for it (`after`) is submitted; see docs/review.md.',
      ),
    file_name: z
      .string()
      .min(1)
      .optional()
      .describe(
        'Result file name without extension, e.g. "{{id}}": files go to <output>/<run>/<name>.<ext> instead of <task>/1.<ext>.',
      ),
    after: z
      .union(
        [
          z.string().min(1),
          z
            // The pattern is for editors (JSON Schema); the check with its message is the superRefine below.
            .record(z.string().meta({ pattern: NAME_PATTERN.source }), z.string().min(1))
            .refine((names) => Object.keys(names).length > 0, { error: 'must name at least one task' }),
        ],
        { error: AFTER_RULE },
      )
      // The names are checked once the union chose the mapping: inside it, a bad name would be reported
      // as "must be a task id or a mapping", which it is.
      .superRefine((after, ctx) => {
        if (typeof after === 'string') return;
        for (const name of Object.keys(after)) {
          if (!NAME_PATTERN.test(name))
            ctx.addIssue({
              code: 'custom',
              path: [name],
              input: name,
              message: `the name ${NAME_RULE}`,
            });
        }
      })
      .optional()
      .describe(
        'The task whose result this one takes, as a task-id template ("voice-{{row.n}}"; {{after.audio}} in input), or a mapping of names to task-id templates ({{after.<name>.image}}). Submitted once they are done.',
      ),
  })
  .describe('One task, or many through matrix, foreach and repeat (expanded in that order).');

export const manifestSchema = z
  .strictObject({
    version: z.literal(1, { error: 'must be 1' }).describe('Manifest format version; always 1.'),
    name: z.string().regex(NAME_PATTERN, { error: NAME_RULE }).describe('The run id by default.'),
    run: z
      .string()
      .min(1)
      .optional()
      .describe('Run-id template, e.g. "{{name}}-{{date}}"; knows name, vars, date and datetime.'),
    schedule: z
      .string()
      .regex(CRON_PATTERN, { error: 'must be a cron expression of 5 or 6 fields, like "0 3 * * *"' })
      .optional()
      .describe('Cron expression used by `mediabatch schedule`.'),
    timezone: z
      .string()
      .refine(isTimeZone, { error: 'must be an IANA time zone, like Europe/Paris or UTC' })
      .optional()
      .describe('IANA time zone for schedule, {{date}} and {{datetime}}; UTC when absent.'),
    concurrency: z.int().min(1).default(4).describe('Tasks in flight at once.'),
    order: z
      .enum(['longest', 'manifest'])
      .default('longest')
      .describe(
        'Which pending task is submitted next: `longest` (the longest expected job first, so the slots finish together) or `manifest` (the order written).',
      ),
    budget: z.number().positive().optional().describe('Hard cap in tokens for this run.'),
    file_name: z
      .string()
      .min(1)
      .optional()
      .describe('Default file_name template of every task, e.g. "{{id}}" (see the task field).'),
    retries: z
      .int()
      .min(0)
      .max(10)
      .default(0)
      .describe(
        'Default for every task: submit again, up to this many times, when the service fails the job.',
      ),
    review: z
      .boolean()
      .default(false)
      .describe(
        'Default for every task: its result must be approved before its downstreams (`after`) are submitted.',
      ),
    budget_per_period: z
      .number()
      .positive()
      .optional()
      .describe('Cap in tokens for all runs in a quota period.'),
    output: z
      .string()
      .min(1)
      .default('out')
      .refine(
        (value) => !/^s3:/i.test(value) || /^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/.*)?$/.test(value),
        {
          error:
            'must be a folder, s3://bucket/prefix or storage (the bucket of storage: in mediabatch.config.yaml)',
        },
      )
      .describe(
        'Results go to <output>/<run>/: a folder (relative to the working folder), s3://bucket/prefix, or storage (the bucket of storage: in mediabatch.config.yaml).',
      ),
    callback_url: z
      .url({ protocol: /^https?$/, error: 'must be an http or https URL' })
      .optional()
      .describe('custom_callback_url given to every task.'),
    listen: z
      .string()
      .regex(LISTEN_PATTERN, { error: 'must be host:port, like 0.0.0.0:8788', abort: true })
      .refine((value) => isPort(value.slice(value.lastIndexOf(':') + 1)), {
        error: 'must end with a port from 1 to 65535',
      })
      .optional()
      .describe('host:port where the callback receiver listens.'),
    vars: anyMap.optional().describe('Names for templates: {{brand}}. Values are inserted as they are.'),
    defaults: z
      .partialRecord(z.enum(MODEL_IDS), anyMap)
      .optional()
      .describe('Per model, request fields merged under each task input (the task wins, field by field).'),
    tasks: z.array(taskSchema).min(1).describe('The tasks of the run.'),
  })
  .meta({
    title: 'mediabatch manifest',
    description: 'A batch of media-generation tasks run by mediabatch (version 1).',
  });

export type RawManifest = z.input<typeof manifestSchema>;

function isPort(text: string): boolean {
  const port = Number(text);
  return Number.isInteger(port) && port >= 1 && port <= 65535;
}

export const MANIFEST_KEYS = Object.keys(manifestSchema.shape);
export const TASK_KEYS = Object.keys(taskSchema.shape);

export function manifestJsonSchema(): object {
  return z.toJSONSchema(manifestSchema, { target: 'draft-2020-12', io: 'input' });
}
