// Turns a model's declarative rules into a CatalogEntry: refuses fields the manifest sets, unknown fields
// and alias conflicts, folds aliases into canonical fields, checks each field, then the cross-field rules.
// Every issue is collected; none stops the others from being found.
import { type FieldCheck, foldFileObject, isPlainObject, show } from './fields.js';
import type {
  CatalogEntry,
  CheckResult,
  Endpoint,
  Estimate,
  MediaDurations,
  MediaField,
  ModelId,
  PriceTable,
  RequestBody,
  RequestIssue,
  ResultShape,
} from './types.js';

export interface Alias {
  /** Canonical field the alias's value moves to. */
  to: string;
  /** Checks the alias's own value, so an error names the field the user wrote. */
  check?: FieldCheck;
  /** Reshapes the value for the canonical field, e.g. a single voice id into a list. */
  map?: (value: unknown) => unknown;
}

export const CALLBACK_SET_BY_MANIFEST =
  'set by the manifest (callback_url: at the top), not in input; remove it';

/** Fields a manifest sets elsewhere; writing them under `input` would bypass the manifest. */
const SET_BY_MANIFEST: Readonly<Record<string, string>> = {
  model: "set by the manifest (the task's model:), not in input; remove it",
  custom_callback_url: CALLBACK_SET_BY_MANIFEST,
};

export interface ModelDef {
  model: ModelId;
  endpoint: Endpoint;
  wireModel: string | null;
  kind: 'video' | 'image' | 'audio';
  /** Canonical fields with their checkers, in the order error messages list them. */
  fields: Readonly<Record<string, FieldCheck>>;
  aliases?: Readonly<Record<string, Alias>>;
  /** Field names that are known but refused, with the message to give. */
  refused?: Readonly<Record<string, string>>;
  /** Names accepted in input that `normalise` folds away (they are not canonical fields nor plain aliases). */
  folded?: readonly string[];
  /** Model-specific reshaping before anything else, e.g. frame aliases into a list. */
  normalise?: (input: RequestBody, issues: RequestIssue[]) => RequestBody;
  required?: readonly string[];
  /** Cross-field rules. `valid` holds only the fields that passed their own check; `body` every field given. */
  rules?: (valid: RequestBody, issues: RequestIssue[], body: RequestBody) => void;
  mediaFields?: readonly MediaField[];
  result: ResultShape;
  resultFor?: (body: RequestBody) => ResultShape;
  checkMedia?: (body: RequestBody, media: MediaDurations) => RequestIssue[];
  estimate: (body: RequestBody, media: MediaDurations, prices: PriceTable, hintSeconds?: number) => Estimate;
}

/** The input with each `{ file: path }` as `file:path`; the input itself when it has none (the common case: no copy). */
function withFilesFolded(input: RequestBody): RequestBody {
  let out: RequestBody | undefined;
  for (const [key, value] of Object.entries(input)) {
    const folded = foldFileObject(value);
    if (folded === value) continue;
    out ??= { ...input };
    out[key] = folded;
  }
  return out ?? input;
}

function own<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

export function defineEntry(def: ModelDef): CatalogEntry {
  const aliases = def.aliases ?? {};
  const refused = def.refused ?? {};
  const knownFields = Object.freeze([
    ...Object.keys(def.fields),
    ...Object.keys(aliases),
    ...(def.folded ?? []),
  ]);
  const unknownMessage = `unknown field; known fields are: ${knownFields.join(', ')}`;

  function check(input: RequestBody): CheckResult {
    if (!isPlainObject(input)) {
      return {
        ok: false,
        issues: [{ path: '', message: `must be a mapping of request fields, got ${show(input)}` }],
      };
    }
    const issues: RequestIssue[] = [];
    const given = withFilesFolded(input);
    const source = def.normalise ? def.normalise({ ...given }, issues) : given;
    const body: RequestBody = {};
    for (const [key, value] of Object.entries(source)) {
      // Own keys only: `constructor` or `__proto__` in a manifest must not find Object.prototype's.
      const manifestMessage = own(SET_BY_MANIFEST, key);
      const refusal = own(refused, key);
      const alias = own(aliases, key);
      if (manifestMessage !== undefined) issues.push({ path: key, message: manifestMessage });
      else if (refusal !== undefined) issues.push({ path: key, message: refusal });
      else if (alias !== undefined) {
        if (Object.hasOwn(source, alias.to)) {
          issues.push({ path: key, message: `alias of ${alias.to}; give only one of them` });
          continue;
        }
        const aliasIssues = alias.check ? alias.check(value, key) : [];
        issues.push(...aliasIssues);
        if (aliasIssues.length === 0) body[alias.to] = alias.map ? alias.map(value) : value;
      } else if (Object.hasOwn(def.fields, key)) body[key] = value;
      else issues.push({ path: key, message: unknownMessage });
    }

    const valid: RequestBody = {};
    for (const [key, value] of Object.entries(body)) {
      const fieldIssues = def.fields[key]?.(value, key) ?? [];
      issues.push(...fieldIssues);
      if (fieldIssues.length === 0) valid[key] = value;
    }
    for (const key of def.required ?? []) {
      if (!Object.hasOwn(body, key)) issues.push({ path: key, message: 'is required' });
    }
    def.rules?.(valid, issues, body);
    return issues.length === 0 ? { ok: true, body } : { ok: false, issues };
  }

  function fieldSamples(name: string): { field: string; samples: readonly unknown[] } | undefined {
    const alias = own(aliases, name);
    // An alias that reshapes its value (a single voice id into a list) has no samples of the canonical field.
    if (alias !== undefined && alias.map !== undefined) return undefined;
    const field = alias?.to ?? name;
    const samples = (alias?.check ?? own(def.fields, field))?.samples;
    return samples === undefined || samples.length === 0 ? undefined : { field, samples };
  }

  const result = def.result;
  return Object.freeze({
    model: def.model,
    endpoint: def.endpoint,
    wireModel: def.wireModel,
    kind: def.kind,
    knownFields,
    mediaFields: Object.freeze([...(def.mediaFields ?? [])]),
    result,
    resultFor: def.resultFor ?? (() => result),
    check,
    fieldSamples,
    checkMedia: def.checkMedia ?? (() => []),
    estimate: def.estimate,
  });
}
