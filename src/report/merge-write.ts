// Writes the merged report of a run split into shards (src/report/merge.ts) with the same writers as a
// run's own report: report.json, report.csv, report.md and one gallery, index.html, in the run's folder
// beside every shard's task folders (the file paths in the report are relative to it).

import { basename, dirname } from 'node:path';
import { ensureFolderUnder, type TextSink, writeFileAtomicStream } from '../util/fsatomic.js';
import { headOfReport } from './build.js';
import { csvChunks } from './csv.js';
import { type ExtraReader, extrasOf, promptOf } from './extras.js';
import { GALLERY_BOTTOM, GALLERY_IN_DOUBT_LIMIT, galleryCard, galleryTop } from './gallery.js';
import { reportJsonChunks } from './json.js';
import { FAILURE_STATES, MARKDOWN_LIST_LIMIT, markdownChunks } from './markdown.js';
import type { Report } from './schema.js';
import { reportFiles, type WrittenReport } from './write.js';

/** Cards read per batch for the gallery's extras (sheets, songs): a page, as a run's report reads them. */
const PAGE = 500;

export async function writeMergedReport(
  report: Report,
  /** The run's folder: where the shards' task folders are. */
  runDir: string,
  opts: { writeTo?: string; readExtra?: ExtraReader } = {},
): Promise<WrittenReport['files']> {
  const folder = opts.writeTo ?? runDir;
  await ensureFolderUnder(dirname(folder), basename(folder));
  const files = reportFiles(folder);
  const head = headOfReport(report);
  const { tasks, in_doubt: inDoubt } = report;
  const limited = <T>(items: readonly T[]) => items.slice(0, MARKDOWN_LIST_LIMIT);
  await writeFileAtomicStream(files.json, (sink) => drain(sink, reportJsonChunks(head, inDoubt, tasks)));
  await writeFileAtomicStream(files.csv, (sink) => drain(sink, csvChunks(tasks)));
  await writeFileAtomicStream(files.markdown, (sink) =>
    drain(
      sink,
      markdownChunks(head, {
        inDoubt: limited(inDoubt),
        notOnDisk: limited(
          tasks.filter((t) => t.status === 'unfetched' || t.status === 'stalled' || t.status === 'lost'),
        ),
        problems: limited(tasks.filter((t) => FAILURE_STATES.includes(t.status))),
        tasks: limited(tasks),
      }),
    ),
  );
  await writeFileAtomicStream(files.gallery, async (sink) => {
    await sink.write(galleryTop(head, inDoubt.slice(0, GALLERY_IN_DOUBT_LIMIT)));
    for (let at = 0; at < tasks.length; at += PAGE) {
      const cards = tasks.slice(at, at + PAGE).map((task) => ({
        task,
        prompt: task.request ? promptOf(JSON.stringify(task.request)) : undefined,
      }));
      const extras = await extrasOf(cards, runDir, opts.readExtra);
      const text = cards.map(({ task }) => galleryCard(task, extras.get(task.id))).join(',');
      await sink.write((at === 0 ? '' : ',') + text);
    }
    await sink.write(GALLERY_BOTTOM);
  });
  return files;
}

async function drain(sink: TextSink, chunks: Iterable<string>): Promise<void> {
  for (const chunk of chunks) await sink.write(chunk);
}
