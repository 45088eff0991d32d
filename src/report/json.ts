// report.json a piece at a time, byte for byte what `JSON.stringify(report, null, 2)` writes: the fixed
// parts come from stringifying the report with both lists empty, and each list is written element by
// element in between, so a run of 100,000 tasks is never one string. Pure.

import { type ReportHead, reportOf } from './build.js';
import type { Report, ReportTask } from './schema.js';

/**
 * Where the empty lists sit in the stringified skeleton. A JSON string cannot hold a raw line break, so
 * a line break followed by two spaces and the key can only be the key itself, at the top level.
 */
const IN_DOUBT_AT = '\n  "in_doubt": ';
const TASKS_AT = '\n  "tasks": ';
const EMPTY = '[]';
/** Array elements of a top-level key are indented by two levels of two spaces. */
const ELEMENT_INDENT = '    ';

export function* reportJsonChunks(
  head: ReportHead,
  inDoubt: Iterable<Report['in_doubt'][number]>,
  tasks: Iterable<ReportTask>,
): Generator<string, void, void> {
  const parts = reportJsonParts(head);
  yield parts.beforeInDoubt;
  yield* jsonArray(inDoubt);
  yield parts.beforeTasks;
  yield* jsonArray(tasks);
  yield parts.after;
}

/**
 * The fixed text of report.json around its two lists: before the in-doubt list, between it and the task
 * list, and after the task list. A writer fed the tasks one at a time puts each list's elements
 * (jsonElement, then jsonArrayEnd) in between.
 */
export function reportJsonParts(head: ReportHead): {
  beforeInDoubt: string;
  beforeTasks: string;
  after: string;
} {
  const skeleton = JSON.stringify(reportOf(head, [], []), null, 2);
  const inDoubtAt = skeleton.indexOf(IN_DOUBT_AT + EMPTY) + IN_DOUBT_AT.length;
  const tasksAt = skeleton.indexOf(TASKS_AT + EMPTY) + TASKS_AT.length;
  if (inDoubtAt < IN_DOUBT_AT.length || tasksAt < TASKS_AT.length || tasksAt < inDoubtAt) {
    throw new Error('report.json: the lists are not where the report format puts them: this is a bug');
  }
  return {
    beforeInDoubt: skeleton.slice(0, inDoubtAt),
    beforeTasks: skeleton.slice(inDoubtAt + EMPTY.length, tasksAt),
    after: `${skeleton.slice(tasksAt + EMPTY.length)}\n`,
  };
}

export function* jsonArray(items: Iterable<unknown>): Generator<string, void, void> {
  let first = true;
  for (const item of items) {
    yield jsonElement(item, first);
    first = false;
  }
  yield jsonArrayEnd(first);
}

/** One element of a top-level list of report.json, `first` of its list or not. */
export function jsonElement(item: unknown, first: boolean): string {
  const text = JSON.stringify(item, null, 2).replaceAll('\n', `\n${ELEMENT_INDENT}`);
  return `${first ? '[' : ','}\n${ELEMENT_INDENT}${text}`;
}

/** The end of a top-level list; `empty` when it had no element. */
export function jsonArrayEnd(empty: boolean): string {
  return empty ? EMPTY : '\n  ]';
}
