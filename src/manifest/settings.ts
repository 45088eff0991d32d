// The run-wide settings of a manifest, with the run id rendered from its template.

import { resolve } from 'node:path';
import { isTimeZone, type Stamp, stampOf } from './clock.js';
import type { Problems } from './problems.js';
import { NAME_PATTERN, NAME_RULE } from './schema.js';
import { lookupIn } from './scope.js';
import type { SourceIndex } from './source-index.js';
import { parseTemplate, renderTemplate } from './template.js';
import type { ManifestSettings } from './types.js';
import { describeValue, type PlainObject } from './values.js';

export interface SettingsContext {
  cwd: string;
  now: Date;
  index: SourceIndex;
  problems: Problems;
}

export interface SettingsResult {
  settings: ManifestSettings;
  stamp: Stamp;
  vars: PlainObject;
}

export function readSettings(doc: PlainObject, ctx: SettingsContext): SettingsResult {
  const text = (key: string): string | undefined => (typeof doc[key] === 'string' ? doc[key] : undefined);
  const positive = (key: string): number | undefined =>
    typeof doc[key] === 'number' && doc[key] > 0 ? doc[key] : undefined;
  const name = text('name') ?? '';
  const timezone = text('timezone');
  const stamp = stampOf(ctx.now, timezone !== undefined && isTimeZone(timezone) ? timezone : 'UTC');
  const vars = isRecord(doc.vars) ? doc.vars : {};
  const run = text('run');
  const runId = run === undefined ? name : renderRunId(run, { name, vars, stamp }, ctx);
  const concurrency = doc.concurrency;
  const settings: ManifestSettings = {
    version: 1,
    name,
    runId,
    concurrency:
      typeof concurrency === 'number' && Number.isInteger(concurrency) && concurrency >= 1 ? concurrency : 4,
    order: doc.order === 'manifest' ? 'manifest' : 'longest',
    output: outputOf(text('output'), ctx.cwd),
    retries:
      typeof doc.retries === 'number' && Number.isInteger(doc.retries) && doc.retries >= 0 ? doc.retries : 0,
    review: doc.review === true,
  };
  const optional: Array<[keyof ManifestSettings, unknown]> = [
    ['run', run],
    ['schedule', text('schedule')],
    ['timezone', timezone],
    ['budget', positive('budget')],
    ['budgetPerPeriod', positive('budget_per_period')],
    ['callbackUrl', text('callback_url')],
    ['listen', text('listen')],
  ];
  for (const [key, value] of optional) if (value !== undefined) Object.assign(settings, { [key]: value });
  return { settings, stamp, vars };
}

function isRecord(value: unknown): value is PlainObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function renderRunId(
  run: string,
  scope: { name: string; vars: PlainObject; stamp: Stamp },
  ctx: SettingsContext,
): string {
  const parsed = parseTemplate(run);
  for (const error of parsed.errors) {
    ctx.problems.add({
      pos: ctx.index.inScalar('run', error.raw, error.occurrence),
      path: 'run',
      message: error.message,
    });
  }
  if (parsed.errors.length > 0) return scope.name;
  let value: unknown = run;
  if (parsed.template) {
    const lookup = lookupIn({
      vars: scope.vars,
      builtins: { name: scope.name, date: scope.stamp.date, datetime: scope.stamp.datetime },
    });
    const result = renderTemplate(parsed.template, lookup);
    if (!result.ok) {
      const { raw, occurrence } = result.placeholder;
      ctx.problems.add({
        pos: ctx.index.inScalar('run', raw, occurrence),
        path: 'run',
        message: result.message,
      });
      return scope.name;
    }
    value =
      typeof result.value === 'number' || typeof result.value === 'boolean'
        ? String(result.value)
        : result.value;
  }
  if (typeof value !== 'string' || !NAME_PATTERN.test(value)) {
    ctx.problems.add({
      pos: ctx.index.at('run'),
      path: 'run',
      message: `the run id ${NAME_RULE}, got ${describeValue(value)}`,
    });
    return scope.name;
  }
  return value;
}

/**
 * Where results go: a local folder (absolute, a relative one resolved against the working folder), a
 * bucket as `s3://bucket/prefix` (kept as written, without a trailing slash), or `storage`: the bucket
 * of the account's `storage:` settings, resolved when the run starts.
 */
export function outputOf(written: string | undefined, cwd: string): string {
  if (written === 'storage') return written;
  if (written !== undefined && /^s3:\/\//i.test(written)) return written.replace(/\/+$/, '');
  return resolve(cwd, written ?? 'out');
}
