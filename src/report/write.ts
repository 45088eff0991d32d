// Writes the four files of a run's report into its folder, each atomically (temporary name, fsync,
// rename), so a reader never sees half a report. The run-level figures are the store's aggregates and
// the tasks are streamed a page at a time into each file, so memory stays flat whatever the run's size
// (100,000 tasks: see bench/report-memory.ts).

import { once } from 'node:events';
import { createReadStream } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { parseShardRunId } from '../plan/shard.js';
import { reviewFacts } from '../review/index.js';
import { NOT_ON_DISK, type ReportPagesOptions, type ReportTaskRow, type Store } from '../store/index.js';
import {
  ensureFolderUnder,
  removeLeftoverTemps,
  type TextSink,
  writeFileAtomicStream,
} from '../util/fsatomic.js';
import { inDoubtEntry, type ReportHead, type ReportOptions, reportTask } from './build.js';
import { csvHeader, csvRow } from './csv.js';
import { type ExtraReader, extrasOf, promptOfText } from './extras.js';
import { GALLERY_BOTTOM, GALLERY_IN_DOUBT_LIMIT, galleryCard, galleryTop } from './gallery.js';
import { collectReportHead } from './head.js';
import { jsonArray, jsonArrayEnd, jsonElement, reportJsonParts } from './json.js';
import { FAILURE_STATES, MARKDOWN_LIST_LIMIT, markdownChunks } from './markdown.js';
import type { Report, ReportTask, TaskReview } from './schema.js';

export const REPORT_FILES = {
  json: 'report.json',
  csv: 'report.csv',
  markdown: 'report.md',
  gallery: 'index.html',
} as const;

export interface WrittenReport {
  /** Every run-level figure of report.json (all but its task lists). */
  head: ReportHead;
  /** Absolute paths of the files written. */
  files: { json: string; csv: string; markdown: string; gallery: string };
}

/**
 * Where a run's report files are. A shard's sit beside its run's results under names of their own
 * (`report.shard-1-of-3.json`, `index.shard-1-of-3.html`): the shards share the folder, and
 * `report --merge` writes the run's own report.json and index.html there from them.
 */
export function reportFiles(runDir: string, runId?: string): WrittenReport['files'] {
  const shard = runId === undefined ? undefined : parseShardRunId(runId)?.shard;
  const tag = (name: string) =>
    shard ? name.replace(/\.(\w+)$/, `.shard-${shard.index}-of-${shard.count}.$1`) : name;
  return {
    json: join(runDir, tag(REPORT_FILES.json)),
    csv: join(runDir, tag(REPORT_FILES.csv)),
    markdown: join(runDir, tag(REPORT_FILES.markdown)),
    gallery: join(runDir, tag(REPORT_FILES.gallery)),
  };
}

export async function writeReport(
  store: Store,
  runId: string,
  runDir: string,
  opts: Omit<ReportOptions, 'runDir'> & {
    /**
     * Where the files are written when the run's folder is not on this disk (a bucket): a local folder the
     * caller uploads from. Paths in the report stay relative to `runDir`.
     */
    writeTo?: string;
    /** Reads a task's sheet.json or job.json where the run's folder is not on this disk (a bucket). */
    readExtra?: ExtraReader;
  },
): Promise<WrittenReport> {
  const { writeTo, readExtra, ...reportOpts } = opts;
  const head = collectReportHead(store, runId, { ...reportOpts, runDir });
  const folder = writeTo ?? runDir;
  // The run's folder sits in the user's output folder, which may be a link they made; the run's folder
  // itself must be a real folder, or the report could be written wherever a planted link points.
  await ensureFolderUnder(dirname(folder), basename(folder));
  // A report written by a process that was killed leaves its temporary files; ones older than this
  // process cannot belong to a writer still at work beside us.
  await removeLeftoverTemps(folder, Date.now() - process.uptime() * 1000);
  const files = reportFiles(folder, runId);
  const pages = (o: ReportPagesOptions = {}) => store.reportReads.reportTaskPages(runId, o);
  // Reviewed tasks are the few a person looks at: their decisions are held, not streamed.
  const reviews = reviewFacts(store, runId);
  const tasks = (o: ReportPagesOptions = {}) => reportTasks(pages(o), runDir, reviews);
  const inDoubt = (limit?: number) =>
    inDoubtEntries(pages({ states: ['in_doubt'], ...(limit === undefined ? {} : { limit }) }), runDir);

  // report.json, report.csv and index.html list every task: one read of the tasks, page by page, feeds
  // all three (each page read once, not once per file: on PostgreSQL a page is four statements).
  await writeFileAtomicStream(files.json, (json) =>
    writeFileAtomicStream(files.csv, (csv) =>
      writeFileAtomicStream(files.gallery, async (gallery) => {
        const parts = reportJsonParts(head);
        await json.write(parts.beforeInDoubt);
        await drain(json, jsonArray(inDoubt()));
        await json.write(parts.beforeTasks);
        await csv.write(csvHeader());
        await gallery.write(galleryTop(head, [...inDoubt(GALLERY_IN_DOUBT_LIMIT)]));
        let first = true;
        for (const page of pages()) {
          const cards = page.map((row) => ({
            task: reportTask(row, row.spend, row.files, runDir, row.attempts, reviews.get(row.taskId)),
            prompt: promptOfText(row.requestText),
          }));
          const extras = await extrasOf(cards, runDir, readExtra);
          for (const { task } of cards) {
            await json.write(jsonElement(task, first));
            await csv.write(csvRow(task));
            await gallery.write((first ? '' : ',') + galleryCard(task, extras.get(task.id)));
            first = false;
          }
        }
        await json.write(jsonArrayEnd(first) + parts.after);
        await gallery.write(GALLERY_BOTTOM);
      }),
    ),
  );
  await writeFileAtomicStream(files.markdown, (sink) =>
    drain(
      sink,
      markdownChunks(head, {
        inDoubt: inDoubt(MARKDOWN_LIST_LIMIT),
        notOnDisk: tasks({ states: NOT_ON_DISK, limit: MARKDOWN_LIST_LIMIT }),
        problems: tasks({ states: FAILURE_STATES, limit: MARKDOWN_LIST_LIMIT }),
        tasks: tasks({ limit: MARKDOWN_LIST_LIMIT }),
      }),
    ),
  );
  return { head, files };
}

/**
 * Copies a written report file (report.json for `report --json`, report.md) to `out` in pieces,
 * waiting whenever `out` asks to (a pipe's 'drain'), so printing a large report holds one piece.
 */
export async function copyReportFile(path: string, out: { write(text: string): unknown }): Promise<void> {
  for await (const piece of createReadStream(path, { encoding: 'utf8', highWaterMark: 256 * 1024 })) {
    if (out.write(piece as string) === false && isEmitter(out)) await once(out, 'drain');
  }
}

function isEmitter(value: object): value is NodeJS.EventEmitter {
  return 'once' in value && typeof value.once === 'function';
}

/** The report rows of the tasks, one at a time, as the store hands them out a page at a time. */
function* reportTasks(
  pages: Iterable<ReportTaskRow[]>,
  runDir: string,
  reviews: ReadonlyMap<string, TaskReview>,
): Generator<ReportTask, void, void> {
  for (const page of pages)
    for (const row of page)
      yield reportTask(row, row.spend, row.files, runDir, row.attempts, reviews.get(row.taskId));
}

function* inDoubtEntries(
  pages: Iterable<ReportTaskRow[]>,
  runDir: string,
): Generator<Report['in_doubt'][number], void, void> {
  for (const page of pages) {
    for (const row of page)
      yield inDoubtEntry(reportTask(row, row.spend, row.files, runDir, row.attempts), row.lastSentAt);
  }
}

async function drain(sink: TextSink, chunks: Iterable<string>): Promise<void> {
  for (const chunk of chunks) await sink.write(chunk);
}
