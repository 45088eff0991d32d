// Turns zod's issues on the raw document into located problems in the house style:
// `concurrency: must be >= 1, got 0`, `tasks.0.modle: unknown key "modle"; known keys are: ...`.

import type * as z from 'zod';
import { MODEL_IDS } from '../catalog/types.js';
import { MANIFEST_KEYS, TASK_KEYS } from './schema.js';
import { joinPath, type SourceIndex } from './source-index.js';
import type { ManifestProblem } from './types.js';
import { describeValue } from './values.js';

const EXPECTED: Record<string, string> = {
  string: 'text',
  number: 'a number',
  int: 'a whole number',
  boolean: 'true or false',
  array: 'a list',
  object: 'a mapping (key: value)',
  record: 'a mapping (key: value)',
};

export function schemaProblems(issues: readonly z.core.$ZodIssue[], index: SourceIndex): ManifestProblem[] {
  const problems: ManifestProblem[] = [];
  for (const issue of issues) {
    const path = issue.path.map(String).join('.');
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        const keyPath = joinPath(path, key);
        const value = isRecord(issue.input) ? issue.input[key] : undefined;
        problems.push({ pos: index.keyAt(keyPath), path: keyPath, message: unknownKey(path, key, value) });
      }
      continue;
    }
    problems.push({ pos: index.at(path), path, message: issueMessage(issue) });
  }
  return problems;
}

function unknownKey(parent: string, key: string, value: unknown): string {
  if (parent === 'defaults') {
    // `defaults: { model: flat-image }` reads like a default model; say how the mapping is shaped instead.
    return `unknown model "${key}": defaults is keyed by model id, with that model's request fields under it, like ${defaultsExample(value)}; known models are: ${MODEL_IDS.join(', ')}`;
  }
  const known = parent === '' ? MANIFEST_KEYS : /^tasks\.\d+$/.test(parent) ? TASK_KEYS : [];
  return `unknown key "${key}"; known keys are: ${known.join(', ')}`;
}

function issueMessage(issue: z.core.$ZodIssue): string {
  const got = `, got ${describeValue(issue.input)}`;
  switch (issue.code) {
    case 'invalid_type':
      if (issue.input === undefined) return 'is required';
      return `must be ${EXPECTED[issue.expected] ?? issue.expected}${got}`;
    case 'too_small':
      if (issue.origin === 'array') {
        return Number(issue.minimum) <= 1
          ? 'must not be an empty list'
          : `must have at least ${issue.minimum} items`;
      }
      if (issue.origin === 'string') return 'must not be empty';
      return `must be ${issue.inclusive ? '>=' : '>'} ${issue.minimum}${got}`;
    case 'too_big':
      return `must be ${issue.inclusive ? '<=' : '<'} ${issue.maximum}${got}`;
    default:
      return `${issue.message}${got}`;
  }
}

/** An example of `defaults` for the model the user seems to mean (the value they wrote, if it is one). */
function defaultsExample(value: unknown): string {
  const model = (MODEL_IDS as readonly unknown[]).includes(value) ? String(value) : 'flat-image';
  const fields = model === 'flat-image' ? 'ratio: "16:9"' : '<field>: <value>';
  return `defaults: { ${model}: { ${fields} } }`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
