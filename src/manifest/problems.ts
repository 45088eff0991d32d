import type { ManifestProblem } from './types.js';
import { formatCount } from './values.js';

/** Distinct task ids named on a folded problem's line; the rest are counted. */
export const FIRST_IDS = 3;

/**
 * `file:line:col  task <id>  <field.path>: <rule>`; the task part only when the problem belongs to one,
 * `<n> tasks (<first ids>, …)` when it was folded over several.
 */
export function formatProblem(p: ManifestProblem): string {
  const where = `${p.pos.file}:${p.pos.line}:${p.pos.col}`;
  const what = p.path === '' ? p.message : `${p.path}: ${p.message}`;
  return `${where}${taskPart(p)}  ${what}`;
}

function taskPart(p: ManifestProblem): string {
  const count = p.tasks?.count ?? 1;
  if (count > 1) {
    const first = p.tasks?.first ?? [];
    // Fewer ids than FIRST_IDS kept means every distinct one is shown (tasks may share an id: duplicates).
    const more = first.length >= FIRST_IDS && count > first.length ? ', …' : '';
    const ids = first.length === 0 ? '' : ` (${first.join(', ')}${more})`;
    return `  ${formatCount(count)} tasks${ids}`;
  }
  return p.taskId === undefined ? '' : `  task ${p.taskId}`;
}

/**
 * What makes two problems one line: the place, the field and the rule. A value differs from task to task
 * (", got 5001 characters"), so the rule is compared without it.
 */
function defaultKey(p: ManifestProblem): string {
  return p.message.replace(/, got .*$/s, '');
}

/**
 * Folds problems as they come: the same rule broken at the same place by many tasks (a bad value in
 * `defaults`, in a matrix of 1,000 combinations, a template typo every row repeats) is one problem that
 * counts its tasks and keeps the first ids, whatever kind of problem it is. Memory is one entry per line.
 */
export class ProblemFold {
  readonly #lines = new Map<string, ManifestProblem>();
  #added = 0;

  /** Every problem added, folded or not (grows with each add, so a caller can tell whether one came). */
  get size(): number {
    return this.#added;
  }

  /** `same`: what makes problems at one place the same, when not their rule (a template's placeholder). */
  add(problem: ManifestProblem, same?: string): void {
    this.#added += problem.tasks?.count ?? 1;
    const { file, line, col } = problem.pos;
    const key = `${file}\0${line}\0${col}\0${problem.path}\0${same ?? defaultKey(problem)}`;
    const seen = this.#lines.get(key);
    if (seen === undefined) this.#lines.set(key, { ...problem });
    else seen.tasks = joined(seen, problem);
  }

  /** The lines, in the order their first problem came. */
  lines(): ManifestProblem[] {
    return [...this.#lines.values()];
  }
}

function idsOf(p: ManifestProblem): readonly string[] {
  return p.tasks?.first ?? (p.taskId === undefined ? [] : [p.taskId]);
}

function joined(a: ManifestProblem, b: ManifestProblem): NonNullable<ManifestProblem['tasks']> {
  const first = [...idsOf(a)];
  for (const id of idsOf(b)) if (first.length < FIRST_IDS && !first.includes(id)) first.push(id);
  return { count: (a.tasks?.count ?? 1) + (b.tasks?.count ?? 1), first };
}

/** The same problems folded (see ProblemFold), in the order they came. */
export function foldProblems(problems: Iterable<ManifestProblem>): ManifestProblem[] {
  const fold = new ProblemFold();
  for (const problem of problems) fold.add(problem);
  return fold.lines();
}

/** Sorted by file (in order of first mention), line and column; problems at one place keep their order. */
export function sortProblems(problems: readonly ManifestProblem[], firstFile?: string): ManifestProblem[] {
  const files = new Map<string, number>();
  if (firstFile !== undefined) files.set(firstFile, 0);
  for (const { pos } of problems) if (!files.has(pos.file)) files.set(pos.file, files.size);
  return [...problems].sort(
    (a, b) =>
      (files.get(a.pos.file) ?? 0) - (files.get(b.pos.file) ?? 0) ||
      a.pos.line - b.pos.line ||
      a.pos.col - b.pos.col,
  );
}

/** Every problem of a load, folded (see ProblemFold). */
export class Problems {
  readonly #fold = new ProblemFold();
  readonly #unique = new Set<string>();

  /** Every problem added, folded ones included: it grows with each one. */
  get size(): number {
    return this.#fold.size;
  }

  add(problem: ManifestProblem): void {
    this.#fold.add(problem);
  }

  addAll(problems: readonly ManifestProblem[]): void {
    for (const problem of problems) this.#fold.add(problem);
  }

  /** A problem that is the same as others at `site` whatever its message says (a template's placeholder). */
  addOnce(site: string, problem: ManifestProblem): void {
    this.#fold.add(problem, site);
  }

  /** A problem of something several tasks share (a data file they all read): kept once, not counted again. */
  addUnique(key: string, problem: ManifestProblem): void {
    if (this.#unique.has(key)) return;
    this.#unique.add(key);
    this.#fold.add(problem);
  }

  /** Sorted by file (in order of first mention), line and column. */
  list(): ManifestProblem[] {
    return sortProblems(this.#fold.lines());
  }
}
