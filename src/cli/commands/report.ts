// `report [run]`: (re)writes report.json, report.csv, report.md and index.html into the run's folder and
// prints report.md (or report.json with --json). The newest run when none is named.

import { basename } from 'node:path';
import type { Config } from '../../config.js';
import { resultsRunId } from '../../plan/shard.js';
import { copyReportFile, reportFiles, writeReport } from '../../report/index.js';
import { newRunCommandLine, stateInLine } from '../../results/invocation.js';
import { isBucketLocation, resolveOutput } from '../../results/output.js';
import { shownRunState } from '../../run/lease.js';
import { writeBucketReport } from '../../run/lifecycle.js';
import { checkRunFolder } from '../../run/marker.js';
import { createStorage, joinKey } from '../../storage/index.js';
import type { RunRecord, Store } from '../../store/index.js';
import { stateLocation } from '../../store/location.js';
import { sayOnEarlyInterrupt } from '../closing.js';
import { EXIT, ExitError } from '../errors.js';
import { displayPath } from '../format.js';
import { openExistingStore, type ReadContext, readerOf, runFolder, unknownRunError } from '../read.js';
import { askedRun, type ShardFlags } from '../shard.js';

export interface ReportContext extends ReadContext {
  config: Pick<Config, 'quota' | 'storage'>;
}

export async function reportCommand(
  asked: string | undefined,
  opts: { json?: boolean } & ShardFlags,
  ctx: ReportContext,
): Promise<number> {
  const { io } = ctx;
  sayOnEarlyInterrupt('each report file is written whole or not at all; run the same command again');
  const store = openExistingStore(ctx);
  try {
    const runs = () => store?.runs.listRuns() ?? [];
    const id = askedRun(asked, opts, io.env, runs, ctx.statePath) ?? runs()[0]?.id;
    if (id === undefined) {
      throw new ExitError(
        EXIT.invalid,
        `no runs yet in ${stateInLine(ctx.statePath)}: start one with \`${newRunCommandLine(readerOf(ctx))}\`, then report on it`,
      );
    }
    const run = store?.runs.getRun(id);
    if (store === undefined || run === undefined) throw unknownRunError(id, store, ctx.statePath);
    const folder = runFolder(run, io.cwd);
    if (isBucketLocation(folder)) return await bucketReport(store, run, folder, opts, ctx);
    let written: Awaited<ReturnType<typeof writeReport>>;
    try {
      await checkRunFolder(folder, stateLocation(io.cwd, ctx.statePath), id, (p) => displayPath(io.cwd, p));
      written = await writeReport(store, id, folder, {
        now: io.now(),
        ...(ctx.config.quota !== undefined ? { quota: ctx.config.quota } : {}),
        reader: readerOf(ctx),
        shownState: (r) => shownRunState(store, r, io.now()),
      });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EACCES' || code === 'EROFS' || code === 'ENOSPC' || code === 'ENOTDIR') {
        throw new ExitError(
          EXIT.invalid,
          `${displayPath(io.cwd, folder)}: cannot write the report (${(error as Error).message}): check the folder's permissions and free space`,
        );
      }
      throw error;
    }
    // From the files just written, a piece at a time: report.json of a large run is tens of megabytes.
    await copyReportFile(opts.json ? written.files.json : written.files.markdown, io.stdout);
    // On stderr, so that stdout is exactly the report (`mediabatch report > costs.md`).
    io.stderr.write(
      `Wrote ${fileList(Object.values(written.files).map((f) => basename(f)))} in ${displayPath(io.cwd, folder)}\n`,
    );
    return EXIT.ok;
  } finally {
    store?.close();
  }
}

/** A run whose results are in a bucket: its report is written there again, and printed. */
async function bucketReport(
  store: Store,
  run: RunRecord,
  folder: string,
  opts: { json?: boolean },
  ctx: ReportContext,
): Promise<number> {
  const { io } = ctx;
  const output = folder.slice(0, folder.length - resultsRunId(run.id).length - 1);
  const resolved = resolveOutput(output, ctx.config.storage, io.env);
  if (!resolved.bucket) throw new Error(`internal: ${folder} is not in a bucket`);
  const storage = createStorage(resolved.bucket, { env: io.env });
  await writeBucketReport(
    { store, runId: run.id, runDir: folder },
    { storage, runKey: joinKey(resolved.bucket.prefix, resultsRunId(run.id)) },
    {
      now: io.now(),
      ...(ctx.config.quota !== undefined ? { quota: ctx.config.quota } : {}),
      reader: readerOf(ctx),
      shownState: (r) => shownRunState(store, r, io.now()),
    },
    (files) => copyReportFile(opts.json ? files.json : files.markdown, io.stdout),
  );
  const names = Object.values(reportFiles('', run.id)).map((f) => basename(f));
  io.stderr.write(`Wrote ${fileList(names)} in ${folder}\n`);
  return EXIT.ok;
}

/** `a, b, c and d`. */
function fileList(names: readonly string[]): string {
  return names.length < 2 ? names.join('') : `${names.slice(0, -1).join(', ')} and ${names.at(-1)}`;
}
