// Small reusable checkers for one request field. Each returns every issue it finds, located at `path`,
// in one message style: ``duration: must be 5 or 10, got 7``.
import type { RequestIssue } from './types.js';

export type FieldCheck = ((value: unknown, path: string) => RequestIssue[]) & {
  /**
   * Valid values at the edges of what the field takes (every choice of an enum, a number's bounds, the
   * shortest and longest string): a chained task's field filled in from an upstream's result is checked
   * with them before the run, and priced over them (src/plan/chains.ts).
   */
  readonly samples?: readonly unknown[];
};

function withSamples(
  check: (value: unknown, path: string) => RequestIssue[],
  samples: readonly unknown[],
): FieldCheck {
  return Object.assign(check, { samples: Object.freeze([...samples]) });
}

/** A number field's sample values: its bounds, or 0 when it has none. */
function bounds(min: number | undefined, max: number | undefined): number[] {
  const edges = [min, max].filter((n): n is number => n !== undefined);
  return edges.length === 0 ? [0] : [...new Set(edges)];
}

const OK: RequestIssue[] = [];

/** A value as a person reads it in an error message; long strings are cut. */
export function show(value: unknown): string {
  if (typeof value === 'string')
    return JSON.stringify(value.length > 40 ? `${value.slice(0, 37)}...` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return String(value);
  if (Array.isArray(value)) return `a list of ${value.length}`;
  if (typeof value === 'object') return 'a mapping';
  return typeof value;
}

/** The spec counts "characters": count Unicode code points, so an emoji is one, not two UTF-16 units. */
export function charCount(s: string): number {
  // Without surrogates every UTF-16 unit is a code point (a regex scan is much faster than iterating).
  if (!/[\uD800-\uDFFF]/.test(s)) return s.length;
  let n = 0;
  for (const _ of s) n++;
  return n;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const one = (path: string, message: string): RequestIssue[] => [{ path, message }];

/** `a or b`, `one of a, b, c`. */
export function choices(values: readonly (string | number)[]): string {
  return values.length === 2 ? `${values[0]} or ${values[1]}` : `one of ${values.join(', ')}`;
}

export function str(opts: { min?: number; max?: number } = {}): FieldCheck {
  const { min = 0, max } = opts;
  const shortest = Math.max(min, 1);
  const samples = [...new Set([shortest, max ?? shortest])]
    .filter((n) => max === undefined || n <= max)
    .map((n) => 'a'.repeat(n));
  return withSamples((value, path) => {
    if (typeof value !== 'string') return one(path, `must be a string, got ${show(value)}`);
    const n = charCount(value);
    if (n >= min && (max === undefined || n <= max)) return OK;
    if (max === undefined)
      return one(path, min === 1 ? 'must not be empty' : `must be at least ${min} characters`);
    const rule = min > 0 ? `must be ${min} to ${max} characters` : `must be at most ${max} characters`;
    return one(path, `${rule}, got ${n}`);
  }, samples);
}

export function oneOf(values: readonly (string | number)[]): FieldCheck {
  return withSamples(
    (value, path) =>
      (typeof value === 'string' || typeof value === 'number') && values.includes(value)
        ? OK
        : one(path, `must be ${choices(values)}, got ${show(value)}`),
    values,
  );
}

function rangeText(min: number | undefined, max: number | undefined): string {
  if (min !== undefined && max !== undefined) return `from ${min} to ${max}`;
  if (min !== undefined) return `>= ${min}`;
  return `<= ${max}`;
}

export function int(min?: number, max?: number): FieldCheck {
  return withSamples(
    (value, path) =>
      typeof value === 'number' &&
      Number.isSafeInteger(value) &&
      (min === undefined || value >= min) &&
      (max === undefined || value <= max)
        ? OK
        : one(path, `must be an integer ${rangeText(min, max)}, got ${show(value)}`),
    bounds(min, max),
  );
}

/** A finite number in [min, max]; `decimals` refuses finer values than the service keeps. */
export function num(min?: number, max?: number, decimals?: number): FieldCheck {
  return withSamples(
    (value, path) => {
      if (
        typeof value !== 'number' ||
        !Number.isFinite(value) ||
        (min !== undefined && value < min) ||
        (max !== undefined && value > max)
      ) {
        return one(path, `must be a number ${rangeText(min, max)}, got ${show(value)}`);
      }
      if (decimals !== undefined && !hasAtMostDecimals(value, decimals)) {
        return one(path, `must have at most ${decimals} decimals, got ${value}`);
      }
      return OK;
    },
    bounds(min, max),
  );
}

function hasAtMostDecimals(value: number, decimals: number): boolean {
  const scaled = value * 10 ** decimals;
  return Math.abs(scaled - Math.round(scaled)) < 1e-6;
}

export const bool: FieldCheck = withSamples(
  (value, path) => (typeof value === 'boolean' ? OK : one(path, `must be true or false, got ${show(value)}`)),
  [false, true],
);

export function isHttpUrl(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}

/** `file:relative/path`: a local input, uploaded by `run` and sent as a link (src/run/runner/uploads.ts). */
export function isLocalFile(value: unknown): value is string {
  return typeof value === 'string' && /^file:[^/]/.test(value) && !value.startsWith('file://');
}

/**
 * `{ file: path }`, the manifest's other way to write a local input, as `file:path` (items of a list too),
 * so that everything after the check (pricing, uploads, the stored request) knows one form. Anything
 * else is returned as it is.
 */
export function foldFileObject(value: unknown): unknown {
  if (Array.isArray(value)) {
    const items = value.map(foldFileObject);
    // The same list when nothing changed, so callers can tell by identity.
    return items.every((item, i) => item === value[i]) ? value : items;
  }
  if (!isPlainObject(value)) return value;
  const keys = Object.keys(value);
  const file = value['file'];
  return keys.length === 1 && typeof file === 'string' && file !== '' ? `file:${file}` : value;
}

export const httpUrl: FieldCheck = withSamples(
  (value, path) =>
    isHttpUrl(value) || isLocalFile(value) ? OK : one(path, `must be an http(s) URL, got ${show(value)}`),
  ['https://after.invalid/sample'],
);

/** A list of `min` to `max` items, each checked by `item` at `path.i`. */
export function list(item: FieldCheck, min: number, max: number, noun: string): FieldCheck {
  return (value, path) => {
    if (!Array.isArray(value) || value.length < min || value.length > max) {
      const count = min === max ? `${min}` : min === 0 ? `at most ${max}` : `${min} to ${max}`;
      return one(path, `must be a list of ${count} ${noun}, got ${show(value)}`);
    }
    return value.flatMap((v, i) => item(v, `${path}.${i}`));
  };
}

/** A JSON scalar of any type: for fields whose type the spec does not show. */
export const scalar: FieldCheck = (value, path) =>
  typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
    ? OK
    : one(path, `must be a string, number or boolean, got ${show(value)}`);
