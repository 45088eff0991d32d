// What each route of the view takes, as zod schemas that fastify runs before the handler (its validator
// compiler): path parameters, query parameters and the decision body. A parameter given twice, empty,
// unknown or of the wrong kind is a 400 with one line naming it, never a handler reading an array as text.

import type { FastifySchemaCompiler } from 'fastify';
import { z } from 'zod';
import { MediabatchError } from '../errors.js';
import { TASK_STATES, type TaskState, VERDICTS, type ViewCursor } from '../store/index.js';

/** A request the view cannot serve as asked; its message is the one line the answer gives (400). */
export class QueryError extends MediabatchError {
  override name = 'QueryError';
}

const MAX_TASKS = 500;
const MAX_NOTE = 2000;
const MAX_LIMIT = 200;

/** One query parameter's text: given once, not empty. */
function one(hint = '') {
  return z
    .string({
      error: (iss) =>
        iss.input === undefined
          ? `missing${hint}`
          : Array.isArray(iss.input)
            ? `given ${iss.input.length} times; give it once${hint}`
            : 'expected text',
    })
    .min(1, `empty; leave it out or give a value${hint}`);
}

/** The query of a route: only the parameters it knows (a misspelt one is not silently ignored). */
function query<S extends z.ZodRawShape>(shape: S) {
  const known = Object.keys(shape);
  return z.strictObject(shape, {
    error: (iss) =>
      iss.code === 'unrecognized_keys'
        ? `unknown parameter ${iss.keys.map((k) => JSON.stringify(k)).join(', ')}; ${known.length === 0 ? 'this address takes none' : `known: ${known.join(', ')}`}`
        : undefined,
  });
}

/** Text checked by `check`, which returns the value to use or a message. */
function checked<T>(base: z.ZodString, check: (text: string) => { value: T } | { error: string }) {
  return base.transform((text, ctx) => {
    const r = check(text);
    if ('error' in r) {
      ctx.addIssue({ code: 'custom', message: r.error, input: text });
      return z.NEVER;
    }
    return r.value;
  });
}

const LIST = ' (several values separated by commas)';

function states(text: string): { value: TaskState[] } | { error: string } {
  const list = text.split(',').map((s) => s.trim());
  const unknown = list.find((s) => !(TASK_STATES as readonly string[]).includes(s));
  if (unknown !== undefined) {
    return { error: `unknown state ${JSON.stringify(unknown)}; known: ${TASK_STATES.join(', ')}` };
  }
  return { value: list as TaskState[] };
}

function limit(text: string): { value: number } | { error: string } {
  const n = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isInteger(n) || n < 1 || n > MAX_LIMIT) {
    return { error: `expected a whole number from 1 to ${MAX_LIMIT}, got ${JSON.stringify(text)}` };
  }
  return { value: n };
}

function oneOf<const V extends string>(values: readonly V[]) {
  return (text: string): { value: V } | { error: string } =>
    (values as readonly string[]).includes(text)
      ? { value: text as V }
      : {
          error: `expected ${values.length === 1 ? values[0] : `${values.slice(0, -1).join(', ')} or ${values.at(-1)}`}, got ${JSON.stringify(text)}`,
        };
}

function cursor(text: string): { value: ViewCursor } | { error: string } {
  try {
    const c = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as Partial<ViewCursor> & {
      finishedAt?: unknown;
    };
    if (typeof c.taskId === 'string') {
      if (c.phase === 'finished' && typeof c.finishedAt === 'string') {
        return { value: { phase: 'finished', finishedAt: c.finishedAt, taskId: c.taskId } };
      }
      if (c.phase === 'unfinished' || c.phase === 'id')
        return { value: { phase: c.phase, taskId: c.taskId } };
    }
  } catch {
    // Worded below.
  }
  return { error: 'not a cursor this server gave; start again without it' };
}

function taskIds(text: string): { value: string[] } | { error: string } {
  const ids = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (ids.length === 0 || ids.length > MAX_TASKS) {
    return { error: `expected 1 to ${MAX_TASKS} task ids, separated by commas` };
  }
  return { value: [...new Set(ids)] };
}

/** GET /api/runs/:run/tasks */
export const taskListQuery = query({
  state: checked(one(LIST), states).optional(),
  model: one().optional(),
  q: one().optional(),
  review: checked(one(), oneOf(['awaiting'])).optional(),
  order: checked(one(), oneOf(['newest', 'id'])).optional(),
  cursor: checked(one(), cursor).optional(),
  limit: checked(one(), limit).optional(),
});
export type TaskListQuery = z.output<typeof taskListQuery>;

/** GET /api/runs/:run/reroll-price */
export const rerollPriceQuery = query({
  taskIds: checked(one(', the ids separated by commas'), taskIds),
});

/** Routes that take no query parameter. */
export const noQuery = query({});

export const runParams = z.object({ run: one() });
export const taskParams = z.object({ run: one(), task: one() });
export const fileParams = z.object({ run: one(), task: one(), idx: one() });
export const assetParams = z.object({ name: one() });

const SHAPE = '{taskIds, verdict, note?, expectedVersions?}';
const EVERY_ID = 'every task id must be a non-empty string';

/** POST /api/runs/:run/decisions */
export const decisionBody = z.strictObject(
  {
    taskIds: z
      .array(z.string({ error: EVERY_ID }).min(1, EVERY_ID), {
        error: `expected a list of 1 to ${MAX_TASKS} task ids`,
      })
      .min(1, `expected a list of 1 to ${MAX_TASKS} task ids`)
      .max(MAX_TASKS, `expected a list of 1 to ${MAX_TASKS} task ids`)
      .transform((ids) => [...new Set(ids)]),
    verdict: z.enum(VERDICTS, {
      error: (iss) => `expected one of ${VERDICTS.join(', ')}, got ${JSON.stringify(iss.input)}`,
    }),
    note: z
      .string({ error: `expected text of at most ${MAX_NOTE} characters` })
      .max(MAX_NOTE, `expected text of at most ${MAX_NOTE} characters`)
      .nullish()
      .transform((n) => (n === null || n === '' ? undefined : n)),
    expectedVersions: z
      .record(z.string(), z.int({ error: 'expected a whole number' }), {
        error: 'expected an object {taskId: version}',
      })
      .nullish()
      .transform((v) => v ?? undefined),
  },
  {
    error: (iss) =>
      iss.code === 'unrecognized_keys'
        ? `body: unknown field ${iss.keys.map((k) => JSON.stringify(k)).join(', ')}; expected ${SHAPE}`
        : `body: expected a JSON object ${SHAPE}`,
  },
);
export type DecisionBody = z.output<typeof decisionBody>;

/** The first problem, as one line: `<parameter>: <what is wrong>` (a list's position is not named). */
export function oneLine(error: z.ZodError): string {
  const issue = error.issues[0];
  if (issue === undefined) return 'the request is not one this view takes';
  const path = issue.path.filter((p): p is string => typeof p === 'string');
  return path.length === 0 ? issue.message : `${path.join('.')}: ${issue.message}`;
}

/** Fastify's validator compiler for the schemas above: the parsed value replaces what was sent. */
export const zodCompiler: FastifySchemaCompiler<z.ZodType> =
  ({ schema }) =>
  (data) => {
    const parsed = schema.safeParse(data);
    return parsed.success ? { value: parsed.data } : { error: new QueryError(oneLine(parsed.error)) };
  };
