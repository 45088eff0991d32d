// What a re-roll adds to a run's worst case, as the next `run` will weigh it against the budget. A re-roll
// is not only its own price: the re-rolled result goes back to pending at its worst case, and every task
// downstream of it is priced again, at its plan's price (a clip filled in from the earlier still at its
// exact price goes back to the plan's range; one skipped because the still was rejected waits again). A
// prompt that showed only the re-roll's own price let a person confirm a re-roll that made the next `run`
// refuse. Pure: the tasks and links in, the figures out, in micro-tokens.

import { fromMicro, toMicro } from '../util/money.js';

/** What the computation reads of a task (a TaskRecord of the store fits). */
export interface WorstTask {
  taskId: string;
  state: string;
  review: boolean;
  verdict: 'approved' | 'rejected' | null;
  estimate: { max: number };
  /** The plan's estimate of a chained task whose references were filled in (then `estimate` is exact). */
  plannedEstimate: { max: number } | null;
}

export interface WorstCaseInput {
  /** The results to re-roll. */
  rerolled: readonly WorstTask[];
  /** Every task downstream of them, at any depth, and each one's direct upstreams. */
  downstreams: readonly WorstTask[];
  upstreamsOf: (taskId: string) => readonly string[];
  /** An upstream that is neither re-rolled nor downstream (its state decides whether a skip stays). */
  taskOf: (taskId: string) => WorstTask | undefined;
}

export interface RerollWorstCase {
  /** The re-rolls' own worst cases, in tokens. */
  own: number;
  /** What the downstreams priced again add (0 when none is pending or skipped). */
  downstreams: number;
  /** The downstream tasks priced again (pending ones re-priced, skipped ones waiting again). */
  repriced: string[];
  /** own + downstreams. */
  adds: number;
}

/** A task that gives its downstreams nothing once the re-rolls are recorded: skipped stays skipped. */
function blocks(up: WorstTask | undefined, rerolled: ReadonlySet<string>, waitsAgain: ReadonlySet<string>) {
  if (up === undefined || rerolled.has(up.taskId)) return false;
  if (up.state === 'done' && up.review && up.verdict === 'rejected') return true;
  return up.state === 'skipped' && !waitsAgain.has(up.taskId);
}

/**
 * The downstreams skipped now that wait again after the re-roll: those whose every upstream is re-rolled,
 * or gives a result, or waits again itself (the store unskips them, then skips again the ones still behind
 * a rejected result).
 */
function skippedThatWaitAgain(input: WorstCaseInput, rerolled: ReadonlySet<string>): Set<string> {
  const byId = new Map(input.downstreams.map((t) => [t.taskId, t]));
  const waits = new Set(input.downstreams.filter((t) => t.state === 'skipped').map((t) => t.taskId));
  for (let changed = true; changed; ) {
    changed = false;
    for (const id of waits) {
      const blocked = input
        .upstreamsOf(id)
        .some((up) => blocks(byId.get(up) ?? input.taskOf(up), rerolled, waits));
      if (blocked) {
        waits.delete(id);
        changed = true;
      }
    }
  }
  return waits;
}

export function rerollWorstCase(input: WorstCaseInput): RerollWorstCase {
  const rerolled = new Set(input.rerolled.map((t) => t.taskId));
  const own = input.rerolled.reduce((n, t) => n + toMicro(t.estimate.max), 0);
  const waitsAgain = skippedThatWaitAgain(input, rerolled);
  let downstreams = 0;
  const repriced: string[] = [];
  for (const t of input.downstreams) {
    const planned = toMicro(t.plannedEstimate?.max ?? t.estimate.max);
    if (t.state === 'pending') {
      const more = planned - toMicro(t.estimate.max);
      if (more !== 0) repriced.push(t.taskId);
      downstreams += more;
    } else if (t.state === 'skipped' && waitsAgain.has(t.taskId)) {
      repriced.push(t.taskId);
      downstreams += planned;
    }
  }
  return {
    own: fromMicro(own),
    downstreams: fromMicro(downstreams),
    repriced,
    adds: fromMicro(own + downstreams),
  };
}
