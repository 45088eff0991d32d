// The names a template can look up, and the walk along a dotted path. Only own properties are visible,
// so `constructor`, `__proto__` or `toString` never reach into JavaScript's prototypes.

import type { Lookup, LookupResult } from './template.js';
import { describeValue, isPlainObject, type PlainObject } from './values.js';

/**
 * Names that are not vars or matrix keys; a var or matrix key may not take them. `index` is the copy
 * number when `repeat` > 1, else the row number with `foreach`, else 1. `date` and `datetime` come from
 * the injected clock in the manifest's timezone (UTC without one).
 */
export const BUILTIN_NAMES = ['name', 'run', 'date', 'datetime', 'index', 'row', 'after'] as const;

export interface Scope {
  vars: PlainObject;
  builtins: Partial<Record<(typeof BUILTIN_NAMES)[number], unknown>>;
  /** Matrix values of this combination. */
  combo?: PlainObject;
}

const INDEX = /^(?:0|[1-9]\d*)$/;

export function lookupIn(scope: Scope): Lookup {
  return (path) => {
    const [first, ...rest] = path;
    if (first === undefined) return { ok: false, message: 'empty name' };
    let value: unknown;
    if (
      Object.hasOwn(scope.builtins, first) &&
      scope.builtins[first as keyof Scope['builtins']] !== undefined
    ) {
      value = scope.builtins[first as keyof Scope['builtins']];
    } else if (scope.combo && Object.hasOwn(scope.combo, first)) {
      value = scope.combo[first];
    } else if (Object.hasOwn(scope.vars, first)) {
      value = scope.vars[first];
    } else {
      return { ok: false, message: unknownName(first, scope) };
    }
    return walk(value, first, rest);
  };
}

function unknownName(name: string, scope: Scope): string {
  const known = new Set<string>(Object.keys(scope.vars));
  for (const key of Object.keys(scope.combo ?? {})) known.add(key);
  for (const key of BUILTIN_NAMES) if (scope.builtins[key] !== undefined) known.add(key);
  const hint = name === 'row' ? ' (`row` exists only in tasks with foreach)' : '';
  return `unknown name "${name}"${hint}; known names are: ${listNames([...known])}`;
}

function walk(start: unknown, first: string, rest: readonly string[]): LookupResult {
  let value = start;
  let prefix = first;
  for (const segment of rest) {
    if (Array.isArray(value)) {
      if (!INDEX.test(segment) || Number(segment) >= value.length) {
        return {
          ok: false,
          message: `"${prefix}" is a list of ${value.length}; "${segment}" is not one of its item numbers (0 to ${value.length - 1})`,
        };
      }
      value = value[Number(segment)];
    } else if (isPlainObject(value)) {
      if (!Object.hasOwn(value, segment)) {
        return {
          ok: false,
          message: `"${prefix}" has no field "${segment}"; its fields are: ${listNames(Object.keys(value))}`,
        };
      }
      value = value[segment];
    } else {
      return {
        ok: false,
        message: `"${prefix}" is ${describeValue(value)}, which has no field "${segment}"`,
      };
    }
    prefix = `${prefix}.${segment}`;
  }
  return { ok: true, value };
}

function listNames(names: string[]): string {
  if (names.length === 0) return '(none)';
  const sorted = [...names].sort();
  return sorted.length > 30 ? `${sorted.slice(0, 30).join(', ')}, ...` : sorted.join(', ');
}
