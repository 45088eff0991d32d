// What a run tells a program that watches it: one event per thing that happened to a task or to the run.
// `run --json` writes them as NDJSON on stdout (the human display goes to stderr), and the library hands
// them to `onEvent`. Versioned: a field is only ever added; a change of meaning gets a new `v`.

import { z } from 'zod';

export const RUN_EVENTS_VERSION = 1;

const base = {
  v: z.literal(RUN_EVENTS_VERSION),
  at: z.string().describe('When it happened, ISO 8601 UTC.'),
  run: z.string().describe('The run id.'),
};
const task = { ...base, task: z.string().describe('The task id.') };

export const runEventSchema = z
  .discriminatedUnion('event', [
    z
      .object({
        ...task,
        event: z.literal('submitted'),
        img_uuid: z.string(),
        cost: z.number().describe('Tokens charged; the list price when the API did not say (cost_assumed).'),
        cost_assumed: z.boolean(),
        attempt: z.number().int().describe('1 for the first job of the task, 2 after a retried failure, …'),
      })
      .describe('The API accepted the task: it is charged, and its job is watched.'),
    z
      .object({ ...task, event: z.literal('rejected'), message: z.string() })
      .describe('The API refused the request; nothing was charged.'),
    z
      .object({ ...task, event: z.literal('in_doubt'), reason: z.string() })
      .describe('The request was sent and its answer lost: it may have been charged.'),
    z
      .object({ ...task, event: z.literal('recovered'), img_uuid: z.string() })
      .describe('A task in doubt was proved accepted by its callback; its job is watched.'),
    z
      .object({
        ...task,
        event: z.literal('done'),
        files: z.array(
          z.object({
            path: z.string(),
            kind: z.enum(['image', 'audio', 'video', 'json']),
            bytes: z.number().int(),
            sha256: z.string(),
          }),
        ),
      })
      .describe('Every result file of the task is on disk.'),
    z
      .object({
        ...task,
        event: z.literal('failed'),
        refunded: z.number().nullable(),
        retrying: z.boolean().describe('True when the task is submitted again (retries).'),
      })
      .describe('The service failed the job; it refunds its tokens.'),
    z
      .object({ ...task, event: z.literal('unfetched'), reason: z.string() })
      .describe('Charged, the job succeeded, the result is not on disk yet; a later run fetches it.'),
    z
      .object({ ...task, event: z.literal('stalled'), reason: z.string() })
      .describe('No result long past the job deadline; still watched.'),
    z
      .object({ ...task, event: z.literal('lost'), reason: z.string() })
      .describe('Charged, and the service no longer has the result.'),
    z
      .object({ ...task, event: z.literal('blocked'), reason: z.string() })
      .describe(
        'A chained task whose upstream gives it no result in this run: never submitted, never charged.',
      ),
    z
      .object({ ...base, event: z.literal('stopped'), reason: z.string(), message: z.string() })
      .describe('The run stopped submitting early (interrupted, money ran out, budget, disk, …).'),
    z
      .object({
        ...base,
        event: z.literal('summary'),
        counts: z.record(z.string(), z.number().int()).describe('Tasks by state.'),
        charged: z.number(),
        refunded: z.number(),
        net: z.number(),
        exit_code: z.number().int(),
      })
      .describe('The last event of a run command: where every task stands and what it cost.'),
  ])
  .meta({ title: 'mediabatch run events', description: 'NDJSON lines written by `mediabatch run --json`.' });

export type RunEvent = z.infer<typeof runEventSchema>;

/** Distributes Omit over the union, so each event keeps its own fields. */
type WithoutCommon<T> = T extends unknown ? Omit<T, 'v' | 'at' | 'run'> : never;
/** An event as the runner raises it; the version, the time and the run id are added by `stamp`. */
export type RunEventBody = WithoutCommon<RunEvent>;

export function stamp(body: RunEventBody, run: string, at: Date): RunEvent {
  return { v: RUN_EVENTS_VERSION, at: at.toISOString(), run, ...body } as RunEvent;
}

export function runEventsJsonSchema(): object {
  return z.toJSONSchema(runEventSchema, { target: 'draft-2020-12' });
}
