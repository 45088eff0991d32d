// Fetching a finished job's results and writing its files. A paid result is never given up lightly: a
// refused or expired link is re-signed by a fresh job record, a local disk problem leaves the task
// `unfetched` (and stops paying for more), and only the service saying it no longer has the job makes it
// `lost`. A task is `done` exactly when all its files and job.json are on disk and recorded.

import { basename, dirname, extname, join } from 'node:path';
import { type DownloadResult, diskAdvice, downloadResultToObject } from '../../api/download.js';
import type { JobRecord } from '../../api/schemas.js';
import type { RequestBody, ResultItemKind } from '../../catalog/types.js';
import { bucketPut, putText } from '../../results/bucket.js';
import { taskFolderName } from '../../results/names.js';
import type { NewFile, TaskRecord } from '../../store/index.js';
import { withoutSignedQueries } from '../../store/index.js';
import {
  ensureFolderUnder,
  folderIn,
  removeLeftoverTemps,
  removeLeftoverTempsFor,
  syncFolder,
  UnsafePathError,
  writeFileAtomic,
} from '../../util/fsatomic.js';
import { type FileToFetch, planResults, type ResultPlan } from '../results.js';
import { messageOf, type RunCore } from './core.js';
import type { Watched } from './types.js';

const LOCAL_HINT = 'free space or fix the folder, then run the same command again to fetch it';
const PAID_NOTE = 'the result is paid and still on the service';

type Fetched =
  | { type: 'ok'; result: Extract<DownloadResult, { ok: true }> & { path: string }; url: string }
  | { type: 'unfetched'; reason: string; local: boolean }
  | { type: 'lost'; reason: string }
  | { type: 'halted' };

/** The files of one job being fetched: its latest record, what that record says to fetch, and where. */
interface JobFetch {
  watched: Watched;
  body: RequestBody;
  record: JobRecord;
  plan: ResultPlan;
  folder: string;
  place: (file: FileToFetch) => string;
}

export class Fetcher {
  readonly #core: RunCore;
  /** Ends the watch of a task (the watcher's `unwatch`), once its results are settled either way. */
  readonly #leave: (taskId: string) => void;
  readonly #downloading = new Set<string>();
  /** The run's folder, checked once per run (see #taskFolder). */
  #runFolder: Promise<string> | undefined;

  constructor(core: RunCore, leave: (taskId: string) => void) {
    this.#core = core;
    this.#leave = leave;
  }

  isDownloading(taskId: string): boolean {
    return this.#downloading.has(taskId);
  }

  start(watched: Watched, record: JobRecord): void {
    const core = this.#core;
    const taskId = watched.task.taskId;
    if (this.#downloading.has(taskId)) return;
    this.#downloading.add(taskId);
    void core.track(
      core
        .downloadLimit(() => this.#downloadJob(watched, record))
        .finally(() => {
          this.#downloading.delete(taskId);
          this.#leave(taskId);
          core.progress();
        }),
      `fetching the results of ${taskId}`,
    );
  }

  /** Paid, result not on disk: said so, kept for every later run. A local cause also stops submitting. */
  async unfetched(watched: Watched, reason: string, local: boolean): Promise<void> {
    const core = this.#core;
    const taskId = watched.task.taskId;
    await core.writes.write(() =>
      core.deps.store.tasks.moveTask(core.opts.runId, taskId, 'unfetched', reason),
    );
    core.emit({ event: 'unfetched', task: taskId, reason });
    core.leftUnfinished.set(taskId, reason);
    core.log.error({ task: taskId, img_uuid: watched.task.imgUuid }, reason);
    // The disk will not get better by itself: paying for more results that cannot be written is pointless.
    if (local) core.requestStop('local-disk', reason);
    this.#leave(taskId);
    core.progress();
  }

  async #downloadJob(watched: Watched, first: JobRecord): Promise<void> {
    const core = this.#core;
    const { store } = core.deps;
    const { runId } = core.opts;
    const task = watched.task;
    const body = JSON.parse(task.wireBody) as RequestBody;
    const plan = planResults(watched.entry, body, first.json, core.policy.maxResultItems);
    if (task.state === 'unfetched') {
      await core.writes.write(() => store.tasks.moveTask(runId, task.taskId, 'downloading', null));
    }
    if (plan.files.length === 0) {
      await this.unfetched(watched, `the job's results cannot be used: ${plan.problems.join('; ')}`, false);
      return;
    }
    const placing = await this.#prepareFolder(watched, plan);
    if (placing === undefined) return;
    const job: JobFetch = { watched, body, record: first, plan, ...placing };
    const done = await this.#fetchAll(job);
    if (done === undefined) return;
    const jobFile = jobFileOf(task, job.plan, done.names, job.record);
    if (!(await this.#writeJobFiles(job, jobFile))) return;
    // The files and the task's end in one commit: a task is done exactly when all its files are recorded.
    await core.writes.write(() => {
      for (const file of done.files) store.files.recordFile(runId, task.taskId, file);
      store.tasks.markDone(runId, task.taskId);
    });
    // Its links just worked: a downstream submitted soon can take them without asking the service again.
    if (core.chained) core.upstreamRecords.remember(job.record.img_uuid, job.record, core.now());
    core.emit({
      event: 'done',
      task: task.taskId,
      files: done.files.map((f) => ({ path: f.path, kind: f.kind, bytes: f.bytes, sha256: f.sha256 })),
    });
    core.log.info({ task: task.taskId, files: job.plan.files.length }, 'done');
  }

  /** sheet.json and job.json beside the files, made durable; false when the task became unfetched. */
  async #writeJobFiles(job: JobFetch, jobFile: object): Promise<boolean> {
    const bucket = this.#core.opts.bucket;
    const sheet = job.plan.sheet === undefined ? undefined : `${JSON.stringify(job.plan.sheet, null, 2)}\n`;
    const text = `${JSON.stringify(jobFile, null, 2)}\n`;
    if (bucket) {
      try {
        if (sheet !== undefined) await putText(bucket, `${job.folder}/sheet.json`, sheet, 'application/json');
        await putText(bucket, `${job.folder}/job.json`, text, 'application/json');
        return true;
      } catch (error) {
        await this.unfetched(job.watched, `${messageOf(error)}; ${PAID_NOTE}`, true);
        return false;
      }
    }
    try {
      const ready = { folderReady: true };
      if (sheet !== undefined) await writeFileAtomic(join(job.folder, 'sheet.json'), sheet, ready);
      await writeFileAtomic(join(job.folder, 'job.json'), text, ready);
      // One fsync of the task's folder makes every rename into it durable: its files' and job.json's.
      await syncFolder(job.folder);
      return true;
    } catch (error) {
      await this.unfetched(job.watched, localProblem(error, join(job.folder, 'job.json')), true);
      return false;
    }
  }

  /**
   * A task's folder in the run's folder. The run's folder is checked once per run, from the output folder,
   * so that one planted as a link is refused; each task's then costs one mkdir. A run folder
   * that went away meanwhile is made and checked again.
   */
  async #taskFolder(folderName: string): Promise<{ path: string; created: boolean }> {
    const { runDir } = this.#core.opts;
    for (let attempt = 0; ; attempt++) {
      this.#runFolder ??= ensureFolderUnder(dirname(runDir), basename(runDir));
      try {
        return await folderIn(await this.#runFolder, folderName);
      } catch (error) {
        this.#runFolder = undefined;
        if (attempt > 0 || (error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
    }
  }

  /** The task's folder, made safe and cleared of a killed process's temporaries; undefined: unfetched. */
  async #prepareFolder(
    watched: Watched,
    plan: ResultPlan,
  ): Promise<{ folder: string; place: (file: FileToFetch) => string } | undefined> {
    const { runDir, bucket } = this.#core.opts;
    const task = watched.task;
    const folderName = taskFolderName(task.taskId);
    if (bucket) {
      // In a bucket: keys, no folders to make or clear (an object is whole or absent).
      const prefix = `${bucket.runKey}/${folderName}`;
      const named = task.fileName;
      return {
        folder: prefix,
        place: (file) =>
          named === null ? `${prefix}/${file.fileName}` : `${bucket.runKey}/${namedFile(named, file)}`,
      };
    }
    let folder: string;
    try {
      const made = await this.#taskFolder(folderName);
      folder = made.path;
      // A process killed while writing here left its temporary files; this run holds the lease. A folder
      // this process just made has none.
      if (!made.created) await removeLeftoverTemps(folder);
    } catch (error) {
      await this.unfetched(watched, localProblem(error, join(runDir, folderName)), true);
      return undefined;
    }
    // With the manifest's file_name the files go beside the other tasks' in the run folder, under that name.
    const named = task.fileName;
    const place = (file: FileToFetch): string =>
      named === null ? join(folder, file.fileName) : join(runDir, namedFile(named, file));
    if (named !== null) {
      for (const file of plan.files) await removeLeftoverTempsFor(runDir, basename(place(file)));
    }
    return { folder, place };
  }

  /** Every file of the job, in order; undefined when the task ended otherwise (unfetched, lost, halted). */
  async #fetchAll(job: JobFetch): Promise<{ files: NewFile[]; names: Map<number, string> } | undefined> {
    const core = this.#core;
    const task = job.watched.task;
    const files: NewFile[] = [];
    const names = new Map<number, string>();
    let bytesLeft = core.policy.maxJobBytes;
    for (const file of job.plan.files) {
      if (core.halt.signal.aborted) return undefined;
      const fetched = await this.#fetchFile(job, file.position, bytesLeft);
      if (fetched.type === 'halted') return undefined;
      if (fetched.type === 'lost') {
        await core.writes.write(() =>
          core.deps.store.tasks.moveTask(core.opts.runId, task.taskId, 'lost', fetched.reason),
        );
        core.emit({ event: 'lost', task: task.taskId, reason: fetched.reason });
        core.log.error({ task: task.taskId, img_uuid: task.imgUuid }, fetched.reason);
        return undefined;
      }
      if (fetched.type === 'unfetched') {
        await this.unfetched(job.watched, fetched.reason, fetched.local);
        return undefined;
      }
      const { result } = fetched;
      bytesLeft -= result.bytes;
      names.set(file.position, basename(result.path));
      files.push({
        index: file.position,
        kind: result.kind !== 'unknown' ? result.kind : isMediaKind(file.kind) ? file.kind : 'image',
        path: result.path,
        bytes: result.bytes,
        sha256: result.sha256,
        url: fetched.url,
      });
    }
    return { files, names };
  }

  /**
   * Fetches the file at `position`. A link the CDN refuses (403/404/410) or past its expiry is not the
   * end: a fresh job record re-signs it, a bounded number of times. Only the service saying it no longer
   * has the job gives the result up.
   */
  async #fetchFile(job: JobFetch, position: number, maxBytes: number): Promise<Fetched> {
    const core = this.#core;
    const { watched } = job;
    const taskId = watched.task.taskId;
    for (let refresh = 0; ; refresh++) {
      const file = job.plan.files.find((f) => f.position === position);
      if (!file)
        return {
          type: 'unfetched',
          reason: `result file ${position} is no longer listed by the job`,
          local: false,
        };
      const dest = job.place(file);
      const expiry = file.expiresAt ?? job.record.link_expired_at ?? undefined;
      const result = await this.#downloadWithRetries(file.url, dest, taskId, maxBytes, expiry);
      if (core.halt.signal.aborted) return { type: 'halted' };
      if (result.ok) return { type: 'ok', result: { ...result, path: result.path ?? dest }, url: file.url };
      if (result.type === 'disk')
        return { type: 'unfetched', reason: `${result.message}; ${PAID_NOTE}`, local: true };
      const refusedLink = result.type === 'expired' || result.type === 'link-refused';
      if (!refusedLink || refresh >= core.policy.linkRefreshes) {
        const what = refusedLink
          ? `the result link was refused ${refresh + 1} times, fresh links included`
          : result.message;
        return {
          type: 'unfetched',
          reason: `${file.fileName} could not be fetched (${what}); the job is charged: run again to fetch it`,
          local: false,
        };
      }
      await core.sleep(core.backoff(refresh), core.halt.signal);
      const fresh = await core.jobRecordAgain(watched.task.imgUuid ?? '');
      if (fresh.type === 'not-found' && !withinNotFoundWindow(core, watched)) {
        return {
          type: 'lost',
          reason: `paid, result lost: the service no longer has job ${watched.task.imgUuid} (${fresh.message})`,
        };
      }
      if (fresh.type === 'ok' && fresh.value.img_uuid === watched.task.imgUuid && hasResults(fresh.value)) {
        core.log.info(
          { task: taskId, file: file.fileName },
          'result link refused; fetched a fresh job record',
        );
        job.record = fresh.value;
        job.plan = planResults(watched.entry, job.body, fresh.value.json, core.policy.maxResultItems);
      }
    }
  }

  async #downloadWithRetries(
    url: string,
    dest: string,
    taskId: string,
    maxBytes: number,
    linkExpiresAt: string | number | undefined,
  ): Promise<DownloadResult> {
    const core = this.#core;
    let result: DownloadResult = { ok: false, type: 'network', message: 'not tried', retrySafe: true };
    const bucket = core.opts.bucket;
    for (let attempt = 0; attempt < 4; attempt++) {
      if (bucket) {
        result = await downloadResultToObject(url, dest, bucketPut(bucket), {
          maxBytes: Math.min(core.opts.maxDownloadBytes, maxBytes),
          timeoutMs: core.opts.downloadTimeoutMs,
          signal: core.halt.signal,
          detectType: true,
          now: core.now,
          ...(linkExpiresAt !== undefined ? { linkExpiresAt } : {}),
        });
        if (result.ok || !result.retrySafe || core.halt.signal.aborted) return result;
        core.log.warn({ task: taskId, reason: result.message }, 'download failed; retrying');
        await core.sleep(core.backoff(attempt), core.halt.signal);
        continue;
      }
      result = await core.deps.download(url, dest, {
        maxBytes: Math.min(core.opts.maxDownloadBytes, maxBytes),
        timeoutMs: core.opts.downloadTimeoutMs,
        signal: core.halt.signal,
        detectType: true,
        root: core.opts.runDir,
        // The folder was made safe and cleared by #prepareFolder; a task folder is fsynced once, after job.json.
        folderReady: true,
        syncFolder: dirname(dest) === core.opts.runDir,
        now: core.now,
        ...(linkExpiresAt !== undefined ? { linkExpiresAt } : {}),
      });
      if (result.ok || !result.retrySafe || core.halt.signal.aborted) return result;
      core.log.warn({ task: taskId, reason: result.message }, 'download failed; retrying');
      await core.sleep(core.backoff(attempt), core.halt.signal);
    }
    return result;
  }
}

/** Right after a submission the service may not know the job yet: a not-found then is waited on. */
export function withinNotFoundWindow(core: RunCore, watched: Watched): boolean {
  const since = watched.task.submittedAt?.getTime() ?? 0;
  return core.now() - since < core.policy.notFoundWindowMs;
}

export function hasResults(record: JobRecord): boolean {
  return Array.isArray(record.json) && record.json.length > 0;
}

/** The task folder's job.json: what was fetched under which name, and the job record without signatures. */
function jobFileOf(task: TaskRecord, plan: ResultPlan, names: Map<number, string>, record: JobRecord) {
  return {
    task: task.taskId,
    model: task.model,
    img_uuid: task.imgUuid,
    files: plan.files.map((f) => names.get(f.position) ?? f.fileName),
    ...(plan.songs.length > 0
      ? {
          songs: plan.songs.map((s) => ({
            ...s,
            file: names.get(positionOf(plan, s.file)) ?? s.file,
          })),
        }
      : {}),
    ...(plan.problems.length > 0 ? { problems: plan.problems } : {}),
    job: withoutSignedQueries(record),
  };
}

function isMediaKind(kind: string): kind is ResultItemKind {
  return kind === 'image' || kind === 'audio' || kind === 'video' || kind === 'json';
}

function positionOf(plan: ResultPlan, fileName: string): number {
  return plan.files.find((f) => f.fileName === fileName)?.position ?? -1;
}

/** One line for a file that could not be written on this machine: what happened, where, what to do. */
function localProblem(error: unknown, path: string): string {
  if (error instanceof UnsafePathError) return `${error.message}; ${PAID_NOTE}`;
  const code = (error as { code?: unknown }).code;
  // The same words as a download that fails on the disk: one condition, one sentence, whichever file hit it.
  const advice = typeof code === 'string' ? diskAdvice(code) : undefined;
  const what = advice?.[0] ?? (typeof code === 'string' ? code : messageOf(error));
  return `${what} writing ${path}: ${advice?.[1] ?? LOCAL_HINT}; ${PAID_NOTE}`;
}

/** `<name>.<ext>` for a task's first file, `<name>-2.<ext>` for its second, and so on. */
function namedFile(name: string, file: FileToFetch): string {
  const ext = extname(file.fileName);
  return file.position === 1 ? `${name}${ext}` : `${name}-${file.position}${ext}`;
}
