import type { ManifestProblem } from '../manifest/types.js';

/** Lines shown for one broken rule at one place in the file before the rest are only counted. */
export const SHOWN_PER_SITE = 5;

/**
 * A bad value in `defaults`, or in a task expanded a thousand times by a matrix or a foreach, breaks
 * the same rule at the same place in every task it reaches. The first few such tasks are shown and the
 * rest counted, rather than printing thousands of lines that differ only by task id. Values differ
 * from task to task (", got 5001 characters"), so the rule is compared without them.
 */
export function collapseRepeats(problems: readonly ManifestProblem[]): ManifestProblem[] {
  const sites = new Map<string, { shown: ManifestProblem[]; more: number }>();
  for (const problem of problems) {
    const { file, line, col } = problem.pos;
    const rule = problem.message.replace(/, got .*$/s, '');
    const key = `${file}\0${line}\0${col}\0${problem.path}\0${rule}`;
    const site = sites.get(key) ?? { shown: [], more: 0 };
    sites.set(key, site);
    if (site.shown.length < SHOWN_PER_SITE) site.shown.push(problem);
    else site.more++;
  }
  const out: ManifestProblem[] = [];
  for (const { shown, more } of sites.values()) {
    const last = shown.at(-1);
    if (more > 0 && last) {
      const tasks = `${more.toLocaleString('en-US')} more ${more === 1 ? 'task' : 'tasks'}`;
      shown[shown.length - 1] = { ...last, message: `${last.message} (and ${tasks} like this)` };
    }
    out.push(...shown);
  }
  return out;
}
