// Chains: `after:` names the task(s) whose result a task takes, and `{{after…}}` placeholders in
// its input name the part of that result. The placeholders cannot be rendered when the manifest is
// expanded (the result does not exist yet): they stay in the request as written, `{{after.image}}`, and
// are filled in when the task is submitted. This module is the grammar of those references. Pure.

import { type Output, SONG_FIELDS, type SongField } from '../catalog/outputs.js';
import type { CompiledValue, Placeholder } from './template.js';

export { type Output, SONG_FIELDS, type SongField };

/** The name of the single upstream of `after: "<task id>"`: references read `{{after.image}}`. */
export const SINGLE = '';

/** One `{{after…}}`: which upstream (by name, SINGLE for the lone one) and what of its result. */
export interface Reference {
  name: string;
  output: Output;
  /** The placeholder's path as written, `after.still.image`, without braces. */
  path: string;
}

const POSITIVE = /^[1-9]\d{0,3}$/;

export const OUTPUTS_HELP =
  'one of image, video, audio, files.N, img_uuid, songs.N.audio_id (or .title, .style, .lyrics, .audio_duration) or sheet.<key>; N counts from 1 (files.1 is the first file, songs.1 the first song)';

/**
 * Reads a placeholder path that starts with `after`. `names`: the names of a mapping `after`, or
 * undefined for a single upstream. Returns the reference, or why it is not one (in words).
 */
export function parseReference(
  path: readonly string[],
  names: readonly string[] | undefined,
): { ok: true; reference: Reference } | { ok: false; message: string } {
  const written = path.join('.');
  let rest = path.slice(1);
  let name = SINGLE;
  if (names !== undefined) {
    const first = rest[0];
    if (first === undefined || !names.includes(first)) {
      return {
        ok: false,
        message: `"${written}" must name one of this task's upstreams (after.${names.join(', after.')}), like {{after.${names[0] ?? 'name'}.image}}`,
      };
    }
    name = first;
    rest = rest.slice(1);
  }
  const prefix = name === SINGLE ? 'after' : `after.${name}`;
  const [what, second, third, ...more] = rest;
  // files.0 and songs.0 are what a reader used to lists from 0 writes first: say so before the list.
  const fromZero =
    (what === 'files' || what === 'songs') && second === '0'
      ? ` (${what}.0: N counts from 1, so the first is ${[prefix, what, '1', ...rest.slice(2)].join('.')})`
      : '';
  const wrong = (): { ok: false; message: string } => ({
    ok: false,
    message: `"${written}" names no part of a result${fromZero}; what follows "${prefix}." is ${OUTPUTS_HELP}`,
  });
  let output: Output | undefined;
  if ((what === 'image' || what === 'video' || what === 'audio') && second === undefined) {
    output = { kind: what };
  } else if (what === 'img_uuid' && second === undefined) {
    output = { kind: 'img_uuid' };
  } else if (what === 'files' && second !== undefined && POSITIVE.test(second) && third === undefined) {
    output = { kind: 'file', n: Number(second) };
  } else if (
    what === 'songs' &&
    second !== undefined &&
    POSITIVE.test(second) &&
    third !== undefined &&
    (SONG_FIELDS as readonly string[]).includes(third) &&
    more.length === 0
  ) {
    output = { kind: 'song', n: Number(second), field: third as SongField };
  } else if (what === 'sheet' && second !== undefined && third === undefined) {
    output = { kind: 'sheet', key: second };
  }
  if (output === undefined) return wrong();
  return { ok: true, reference: { name, output, path: written } };
}

/** The text a reference keeps in the stored request until it is filled in. */
export function referenceText(path: string): string {
  return `{{${path}}}`;
}

const IN_TEXT = /\{\{\s*(after(?:\.[A-Za-z0-9_-]+)+)\s*\}\}/g;

/** The `{{after…}}` references in a request's strings, as `after.x.y` paths (each once). */
export function referencesIn(value: unknown, found = new Set<string>()): Set<string> {
  if (typeof value === 'string') {
    if (value.includes('{{')) for (const match of value.matchAll(IN_TEXT)) if (match[1]) found.add(match[1]);
  } else if (Array.isArray(value)) {
    for (const item of value) referencesIn(item, found);
  } else if (value !== null && typeof value === 'object') {
    for (const item of Object.values(value)) referencesIn(item, found);
  }
  return found;
}

/**
 * Replaces the references in a request with values: a string that is exactly one reference takes the
 * value with its type (a number stays a number), any other string gets the value as text (a sheet's
 * nested object as JSON). `value` returns undefined for a reference it cannot fill (left as written).
 */
export function fillReferences(body: unknown, value: (path: string) => unknown): unknown {
  if (typeof body === 'string') {
    if (!body.includes('{{')) return body;
    const whole = /^\{\{\s*(after(?:\.[A-Za-z0-9_-]+)+)\s*\}\}$/.exec(body);
    if (whole?.[1]) {
      const v = value(whole[1]);
      return v === undefined ? body : v;
    }
    return body.replace(IN_TEXT, (text, path: string) => {
      const v = value(path);
      if (v === undefined) return text;
      return v !== null && typeof v === 'object' ? JSON.stringify(v) : String(v);
    });
  }
  if (Array.isArray(body)) return body.map((item) => fillReferences(item, value));
  if (body !== null && typeof body === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(body)) out[key] = fillReferences(item, value);
    return out;
  }
  return body;
}

/** Where a declaration's input (or defaults) writes `{{after…}}`: each placeholder with its source path. */
export function placeholdersOfAfter(
  compiled: CompiledValue,
): Array<{ source: string; placeholder: Placeholder }> {
  const found: Array<{ source: string; placeholder: Placeholder }> = [];
  const walk = (value: CompiledValue) => {
    if (value.kind === 'text') {
      for (const part of value.template.parts) {
        if (typeof part !== 'string' && part.path[0] === 'after')
          found.push({ source: value.source, placeholder: part });
      }
    } else if (value.kind === 'object') {
      for (const [, item] of value.entries) walk(item);
    } else if (value.kind === 'list') {
      for (const item of value.items) walk(item);
    }
  };
  walk(compiled);
  return found;
}
