// Matrix combinations with include/exclude as CI matrices define them (GitHub Actions semantics):
// exclude removes every combination that matches all the keys of an entry; then each include entry
// extends every combination whose original values it matches (values added by includes may be
// overwritten), and becomes a combination of its own when it matches none.

import { deepEqual, type PlainObject, setOwn } from './values.js';

export interface MatrixPlan {
  keys: string[];
  lists: unknown[][];
  include: PlainObject[];
  exclude: PlainObject[];
}

export function matrixPlan(matrix: PlainObject | undefined): MatrixPlan {
  const plan: MatrixPlan = { keys: [], lists: [], include: [], exclude: [] };
  if (!matrix) return plan;
  for (const key of Object.keys(matrix)) {
    const value = matrix[key];
    if (key === 'include' || key === 'exclude') {
      if (Array.isArray(value)) plan[key] = value as PlainObject[];
    } else if (Array.isArray(value)) {
      plan.keys.push(key);
      plan.lists.push(value);
    }
  }
  return plan;
}

/** Combinations before exclude and include; what must stay small enough to enumerate. */
export function productSize(plan: MatrixPlan): number {
  return plan.lists.reduce((size, list) => size * list.length, plan.keys.length === 0 ? 0 : 1);
}

function* product(plan: MatrixPlan): Generator<PlainObject> {
  const { keys, lists } = plan;
  if (keys.length === 0) return;
  const at = keys.map(() => 0);
  for (;;) {
    const combo: PlainObject = {};
    keys.forEach((key, k) => {
      setOwn(combo, key, lists[k]?.[at[k] ?? 0]);
    });
    yield combo;
    let k = keys.length - 1;
    while (k >= 0 && (at[k] ?? 0) + 1 >= (lists[k]?.length ?? 0)) {
      at[k] = 0;
      k--;
    }
    if (k < 0) return;
    at[k] = (at[k] ?? 0) + 1;
  }
}

function matches(combo: PlainObject, entry: PlainObject, keys: readonly string[]): boolean {
  return keys.every((key) => !Object.hasOwn(entry, key) || deepEqual(combo[key], entry[key]));
}

function excluded(combo: PlainObject, plan: MatrixPlan): boolean {
  return plan.exclude.some((entry) => matches(combo, entry, Object.keys(entry)));
}

/** Exact number of combinations without keeping them; a task without matrix has one. */
export function countCombos(plan: MatrixPlan): number {
  if (plan.keys.length === 0 && plan.include.length === 0) return 1;
  if (plan.include.length === 0 && plan.exclude.length === 0) return productSize(plan);
  let kept = 0;
  const matched = plan.include.map(() => false);
  for (const combo of product(plan)) {
    if (excluded(combo, plan)) continue;
    kept++;
    plan.include.forEach((entry, i) => {
      if (!matched[i] && matches(combo, entry, plan.keys)) matched[i] = true;
    });
  }
  return kept + matched.filter((m) => !m).length;
}

/** The combinations in order: the product (first key outermost) minus exclude, then unmatched includes. */
export function combos(plan: MatrixPlan): PlainObject[] {
  if (plan.keys.length === 0 && plan.include.length === 0) return [{}];
  const result: PlainObject[] = [];
  for (const combo of product(plan)) if (!excluded(combo, plan)) result.push(combo);
  const base = result.length;
  for (const entry of plan.include) {
    let matchedAny = false;
    for (let i = 0; i < base; i++) {
      const combo = result[i];
      if (combo && matches(combo, entry, plan.keys)) {
        for (const key of Object.keys(entry)) setOwn(combo, key, entry[key]);
        matchedAny = true;
      }
    }
    if (!matchedAny) {
      const added: PlainObject = {};
      for (const key of Object.keys(entry)) setOwn(added, key, entry[key]);
      result.push(added);
    }
  }
  return result;
}

/** `product=mug, style=studio`, to say which combination made a task. */
export function describeCombo(combo: PlainObject): string {
  return Object.keys(combo)
    .map((key) => {
      const value = combo[key];
      return `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`;
    })
    .join(', ');
}
