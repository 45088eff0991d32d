// `run --only id,glob,…`: which tasks a run may submit. Globs know `*` (any run of characters) and `?`
// (one character); everything else is literal, so task ids with dots or brackets need no escaping.

import type { Store, TaskState } from '../store/index.js';

export type Selection = { ok: true; taskIds: string[] } | { ok: false; message: string };

function globToRegExp(glob: string): RegExp {
  const body = [...glob]
    .map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[.+^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(`^${body}$`);
}

/** The task ids (in manifest order) that match any pattern; every pattern must match at least one. */
export function selectTasks(patterns: string, taskIds: readonly string[]): Selection {
  const list = patterns
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
  if (list.length === 0)
    return { ok: false, message: '--only: give task ids or globs, e.g. --only "hero-*,line-3"' };
  const matchers = list.map((p) => ({ pattern: p, re: globToRegExp(p), hits: 0 }));
  const chosen: string[] = [];
  for (const id of taskIds) {
    let hit = false;
    for (const m of matchers) {
      if (m.re.test(id)) {
        m.hits++;
        hit = true;
      }
    }
    if (hit) chosen.push(id);
  }
  const missed = matchers.filter((m) => m.hits === 0).map((m) => m.pattern);
  if (missed.length > 0) {
    const sample = taskIds.slice(0, 5).join(', ');
    return {
      ok: false,
      message: `--only: no task matches ${missed.join(', ')}; task ids of this manifest look like: ${sample}${taskIds.length > 5 ? ', …' : ''}`,
    };
  }
  return { ok: true, taskIds: chosen };
}

/** A selected task that waits for a task the selection leaves out, which is not done yet. */
export interface LeftOutUpstream {
  taskId: string;
  upstreamId: string;
  /** The upstream's state; undefined when it is not in the run. */
  state: TaskState | undefined;
}

/**
 * The selected tasks that cannot go in this run: an upstream they wait for is left out and not done
 * (it will not be produced, so they stay pending). Looks only at chained tasks.
 */
export function leftOutUpstreams(
  store: Store,
  runId: string,
  selected: readonly string[],
): LeftOutUpstream[] {
  const chosen = new Set(selected);
  const found: LeftOutUpstream[] = [];
  for (const [taskId, links] of store.chains.upstreamsOfRun(runId)) {
    if (!chosen.has(taskId)) continue;
    for (const { upstreamId } of links) {
      if (chosen.has(upstreamId)) continue;
      const state = store.tasks.getTask(runId, upstreamId)?.state;
      if (state !== 'done') found.push({ taskId, upstreamId, state });
    }
  }
  return found;
}
