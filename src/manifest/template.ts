// Logic-free `{{ path }}` templates: a placeholder only looks a name up. Rendering is a single pass over
// the template's own text, so a looked-up value that contains `{{x}}` is inserted as it is, never expanded.

import { describeValue, isPlainObject, setOwn } from './values.js';

export interface Placeholder {
  /** As written, e.g. `{{ row.text }}`; used to find its column in the source line. */
  raw: string;
  path: readonly string[];
  /** How many identical `raw` texts come before it in the same string. */
  occurrence: number;
}

export type Part = string | Placeholder;

/** A string with at least one placeholder. */
export interface Template {
  parts: Part[];
}

export interface TemplateSyntaxError {
  raw: string;
  occurrence: number;
  message: string;
}

export type LookupResult = { ok: true; value: unknown } | { ok: false; message: string };
export type Lookup = (path: readonly string[]) => LookupResult;

const NAME = /^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*$/;

/**
 * Finds the placeholders of a string. `${x}`, `<%= x %>` and `{x}` are not ours and stay as text (prompts
 * may contain them); an empty `{{ }}`, an unclosed `{{` or `{{ a + b }}` are mistakes and are reported.
 */
export function parseTemplate(text: string): {
  template: Template | undefined;
  errors: TemplateSyntaxError[];
} {
  if (!text.includes('{{')) return { template: undefined, errors: [] };
  const parts: Part[] = [];
  const errors: TemplateSyntaxError[] = [];
  const seen = new Map<string, number>();
  const occurrenceOf = (raw: string): number => {
    const n = seen.get(raw) ?? 0;
    seen.set(raw, n + 1);
    return n;
  };
  let cursor = 0;
  let hasPlaceholder = false;
  for (;;) {
    const open = text.indexOf('{{', cursor);
    if (open === -1) break;
    const close = text.indexOf('}}', open + 2);
    if (close === -1) {
      const raw = text.slice(open);
      errors.push({
        raw: '{{',
        occurrence: countBefore(text, '{{', open),
        message: `unclosed "{{" in ${JSON.stringify(raw.length > 30 ? `${raw.slice(0, 27)}...` : raw)}; close it with "}}"`,
      });
      break;
    }
    const raw = text.slice(open, close + 2);
    const name = text.slice(open + 2, close).trim();
    const occurrence = occurrenceOf(raw);
    if (name === '') {
      errors.push({
        raw,
        occurrence,
        message: `empty placeholder "${raw}"; put a name inside, like {{brand}}`,
      });
    } else if (!NAME.test(name)) {
      errors.push({
        raw,
        occurrence,
        message: `"${raw}" is not a name; templates only look names up (letters, digits, _ and -, joined by dots) and never compute`,
      });
    }
    if (open > cursor) parts.push(text.slice(cursor, open));
    parts.push({ raw, path: name.split('.'), occurrence });
    hasPlaceholder = true;
    cursor = close + 2;
  }
  if (cursor < text.length) parts.push(text.slice(cursor));
  return { template: hasPlaceholder && errors.length === 0 ? { parts } : undefined, errors };
}

function countBefore(text: string, needle: string, end: number): number {
  let count = 0;
  for (let at = text.indexOf(needle); at !== -1 && at < end; at = text.indexOf(needle, at + needle.length))
    count++;
  return count;
}

export type RenderResult =
  | { ok: true; value: unknown }
  | { ok: false; placeholder: Placeholder; message: string };

/** A string that is exactly one placeholder keeps the value's type; anything else is text. */
export function renderTemplate(template: Template, lookup: Lookup): RenderResult {
  const { parts } = template;
  const only = parts[0];
  if (parts.length === 1 && only !== undefined && typeof only !== 'string') {
    const found = lookup(only.path);
    return found.ok ? found : { ok: false, placeholder: only, message: found.message };
  }
  let text = '';
  for (const part of parts) {
    if (typeof part === 'string') {
      text += part;
      continue;
    }
    const found = lookup(part.path);
    if (!found.ok) return { ok: false, placeholder: part, message: found.message };
    const value = found.value;
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') {
      text += String(value);
    } else {
      return {
        ok: false,
        placeholder: part,
        message: `"${part.path.join('.')}" is ${describeValue(value)}; only text, numbers and true/false can be part of a longer text (a list or object can only be a whole value)`,
      };
    }
  }
  return { ok: true, value: text };
}

/** A value from the manifest prepared once and rendered once per task; parts without templates are shared. */
export type CompiledValue =
  | { kind: 'literal'; value: unknown }
  | { kind: 'text'; template: Template; source: string }
  | { kind: 'object'; entries: Array<[string, CompiledValue]> }
  | { kind: 'list'; items: CompiledValue[] };

export interface CompileError extends TemplateSyntaxError {
  /** Dotted path of the string in its file. */
  source: string;
}

export function compileValue(value: unknown, source: string, errors: CompileError[]): CompiledValue {
  if (typeof value === 'string') {
    const parsed = parseTemplate(value);
    for (const error of parsed.errors) errors.push({ ...error, source });
    return parsed.template ? { kind: 'text', template: parsed.template, source } : { kind: 'literal', value };
  }
  if (Array.isArray(value)) {
    const items = value.map((item, i) => compileValue(item, `${source}.${i}`, errors));
    return items.every((item) => item.kind === 'literal')
      ? { kind: 'literal', value }
      : { kind: 'list', items };
  }
  if (isPlainObject(value)) {
    const entries: Array<[string, CompiledValue]> = Object.keys(value).map((key) => [
      key,
      compileValue(value[key], `${source}.${key}`, errors),
    ]);
    return entries.every(([, item]) => item.kind === 'literal')
      ? { kind: 'literal', value }
      : { kind: 'object', entries };
  }
  return { kind: 'literal', value };
}

export type RenderError = (source: string, placeholder: Placeholder, message: string) => void;

/** Renders a compiled value; a failed placeholder is reported and leaves `undefined` in its place. */
export function renderValue(compiled: CompiledValue, lookup: Lookup, onError: RenderError): unknown {
  switch (compiled.kind) {
    case 'literal':
      return compiled.value;
    case 'text': {
      const result = renderTemplate(compiled.template, lookup);
      if (result.ok) return result.value;
      onError(compiled.source, result.placeholder, result.message);
      return undefined;
    }
    case 'list':
      return compiled.items.map((item) => renderValue(item, lookup, onError));
    case 'object': {
      const object: Record<string, unknown> = {};
      for (const [key, item] of compiled.entries) setOwn(object, key, renderValue(item, lookup, onError));
      return object;
    }
  }
}
