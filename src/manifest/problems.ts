import type { ManifestProblem } from './types.js';
import { formatCount } from './values.js';

/** `file:line:col  task <id>  <field.path>: <rule>`; the task part only when the problem belongs to one. */
export function formatProblem(p: ManifestProblem): string {
  const where = `${p.pos.file}:${p.pos.line}:${p.pos.col}`;
  const task = p.taskId === undefined ? '' : `  task ${p.taskId}`;
  const what = p.path === '' ? p.message : `${p.path}: ${p.message}`;
  return `${where}${task}  ${what}`;
}

/**
 * Every problem of a load. A mistake in a template repeats in each task it expands to, so such problems
 * are kept once per site with a count, instead of 100,000 identical lines.
 */
export class Problems {
  #list: ManifestProblem[] = [];
  #sites = new Map<string, { problem: ManifestProblem; more: number }>();

  get size(): number {
    return this.#list.length;
  }

  add(problem: ManifestProblem): void {
    this.#list.push(problem);
  }

  addAll(problems: readonly ManifestProblem[]): void {
    for (const problem of problems) this.#list.push(problem);
  }

  /** Keeps the first problem of `site`; later ones only count. */
  addOnce(site: string, problem: ManifestProblem): void {
    const seen = this.#sites.get(site);
    if (seen) {
      seen.more++;
      return;
    }
    this.#sites.set(site, { problem, more: 0 });
    this.#list.push(problem);
  }

  /** Sorted by file (in order of first mention), line and column. */
  list(): ManifestProblem[] {
    for (const { problem, more } of this.#sites.values()) {
      if (more > 0)
        problem.message += ` (and ${formatCount(more)} more ${more === 1 ? 'task' : 'tasks'} like this)`;
    }
    this.#sites.clear();
    const files = new Map<string, number>();
    for (const { pos } of this.#list) if (!files.has(pos.file)) files.set(pos.file, files.size);
    return [...this.#list].sort(
      (a, b) =>
        (files.get(a.pos.file) ?? 0) - (files.get(b.pos.file) ?? 0) ||
        a.pos.line - b.pos.line ||
        a.pos.col - b.pos.col,
    );
  }
}
