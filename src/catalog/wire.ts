// The exact JSON on the wire, both ways: what mediabatch sends, and what the sandbox reads back.
import { STREAM_CALLBACK_ALIAS } from './field-names.js';
import { isHttpUrl, isPlainObject, show } from './fields.js';
import { type CatalogEntry, ENDPOINTS, type RequestBody, type RequestIssue } from './types.js';

/** The exact JSON sent: canonical body plus `model` (unless wireModel is null) plus custom_callback_url when given. */
export function toWireBody(
  entry: CatalogEntry,
  body: RequestBody,
  callbackUrl?: string,
): Record<string, unknown> {
  const { model: _model, custom_callback_url: _callback, ...fields } = body;
  return {
    ...(entry.wireModel === null ? {} : { model: entry.wireModel }),
    ...fields,
    ...(callbackUrl === undefined ? {} : { custom_callback_url: callbackUrl }),
  };
}

export type WireRead =
  | { ok: true; entry: CatalogEntry; input: RequestBody; callbackUrl?: string }
  | { ok: false; issues: RequestIssue[] };

/**
 * Reads a wire request for an endpoint path. Finds the entry (face swap endpoint -> video-face-swap; others by
 * `model`, which must belong to that endpoint), takes the callback URL from top-level custom_callback_url,
 * args.custom_callback_url, or (stream-2-0-fast only) its alias, and returns the remaining fields as `input`,
 * NOT yet checked: the caller runs `entry.check(input)` and sends the checked body on.
 */
export function readWireBody(catalog: readonly CatalogEntry[], endpoint: string, wire: unknown): WireRead {
  const known: readonly string[] = Object.values(ENDPOINTS);
  if (!known.includes(endpoint)) {
    return fail('', `unknown endpoint ${endpoint}; known endpoints: ${known.join(', ')}`);
  }
  if (!isPlainObject(wire)) return fail('', `body must be a JSON object, got ${show(wire)}`);
  const issues: RequestIssue[] = [];
  const input: RequestBody = { ...wire };
  const entry = findByWire(catalog, endpoint, input, issues);
  delete input.model;

  const given: { path: string; value: unknown }[] = [];
  const take = (from: RequestBody, key: string, path: string) => {
    if (!Object.hasOwn(from, key)) return;
    given.push({ path, value: from[key] });
    delete from[key];
  };
  take(input, 'custom_callback_url', 'custom_callback_url');
  if (Object.hasOwn(input, 'args')) {
    const args = input.args;
    delete input.args;
    if (!isPlainObject(args)) issues.push({ path: 'args', message: `must be an object, got ${show(args)}` });
    else {
      const rest = { ...args };
      take(rest, 'custom_callback_url', 'args.custom_callback_url');
      for (const key of Object.keys(rest)) {
        issues.push({
          path: `args.${key}`,
          message: 'unknown field; known fields in args: custom_callback_url',
        });
      }
    }
  }
  if (entry?.model === 'stream-2-0-fast') take(input, STREAM_CALLBACK_ALIAS, STREAM_CALLBACK_ALIAS);

  const first = given[0];
  for (const other of given.slice(1)) {
    if (other.value !== first?.value) {
      issues.push({
        path: other.path,
        message: `callback URL given twice with different values (${first?.path} and ${other.path}); give it once`,
      });
    }
  }
  if (first !== undefined && !isHttpUrl(first.value)) {
    issues.push({ path: first.path, message: `must be an http(s) URL, got ${show(first.value)}` });
  }
  if (entry === undefined || issues.length > 0) return { ok: false, issues };
  return typeof first?.value === 'string'
    ? { ok: true, entry, input, callbackUrl: first.value }
    : { ok: true, entry, input };
}

function findByWire(
  catalog: readonly CatalogEntry[],
  endpoint: string,
  input: RequestBody,
  issues: RequestIssue[],
): CatalogEntry | undefined {
  const here = catalog.filter((e) => e.endpoint === endpoint);
  if (endpoint === ENDPOINTS.faceSwap) {
    if (Object.hasOwn(input, 'model')) {
      issues.push({
        path: 'model',
        message: 'not accepted: the face swap endpoint has no model field; remove it',
      });
    }
    return here[0];
  }
  const names = here.map((e) => e.wireModel).join(', ');
  if (!Object.hasOwn(input, 'model')) {
    issues.push({ path: 'model', message: `is required; one of ${names}` });
    return undefined;
  }
  const entry = here.find((e) => e.wireModel === input.model);
  if (entry === undefined) {
    issues.push({
      path: 'model',
      message: `must be one of ${names} on ${endpoint}, got ${show(input.model)}`,
    });
  }
  return entry;
}

function fail(path: string, message: string): WireRead {
  return { ok: false, issues: [{ path, message }] };
}
