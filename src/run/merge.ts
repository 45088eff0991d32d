// `report --merge`: finds the shards' report.json files (given one by one, in a folder, or under
// an s3:// prefix), merges them (src/report/merge.ts) and writes the run's one report and gallery beside
// the results: into the folder, or put into the bucket under the same prefix.

import { mkdtemp, readdir, readFile, realpath, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { MergeError, mergeShardReports, type ShardReportInput } from '../report/merge.js';
import { writeMergedReport } from '../report/merge-write.js';
import { type Report, reportSchema } from '../report/schema.js';
import { reportFiles } from '../report/write.js';
import { mergeCommandLine } from '../results/invocation.js';
import { isBucketLocation, resolveOutput } from '../results/output.js';
import type { StorageConfig } from '../storage/config.js';
import { createStorage, type Storage } from '../storage/index.js';
import { bucketExtraReader, putReportFiles } from './bucket-report.js';

/** A shard's report file: `report.shard-<i>-of-<n>.json`. */
export const SHARD_REPORT_FILE = /^report\.shard-\d+-of-\d+\.json$/;

export interface MergeOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  now: Date;
  /** The account's bucket settings (endpoint, region) for s3:// inputs. */
  storage?: StorageConfig;
  /** Where to write the merged report; the folder (or prefix) of the first input otherwise. */
  out?: string;
}

export interface MergeOutcome {
  report: Report;
  /** Where the merged files are: paths, or s3:// URLs. */
  files: { json: string; markdown: string; gallery: string };
}

export async function mergeRunReports(args: readonly string[], o: MergeOptions): Promise<MergeOutcome> {
  if (args.length === 0)
    throw new MergeError("--merge: give the shards' report files, their folder, or an s3:// prefix");
  const buckets = new Map<string, Storage>();
  try {
    const inputs: ShardReportInput[] = [];
    for (const arg of args) inputs.push(...(await readInput(arg, o, buckets)));
    if (inputs.length === 0) {
      throw new MergeError(
        `${args.join(', ')}: no report.shard-<i>-of-<n>.json found there; the shards write theirs in <output>/<run>/`,
      );
    }
    const report = mergeShardReports(inputs, o.now);
    const first = args[0] as string;
    const target =
      o.out ?? (isBucketLocation(first) ? first.replace(/\/+$/, '') : await folderOf(resolve(o.cwd, first)));
    await refuseToOverwrite(inputs, target, args, o);
    if (!isBucketLocation(target)) {
      const dir = resolve(o.cwd, target);
      const files = await writeMergedReport(report, dir);
      return { report, files };
    }
    return { report, files: await writeToBucket(report, target, bucketOf(target, o, buckets)) };
  } finally {
    for (const s of buckets.values()) s.destroy();
  }
}

/**
 * The merge never writes over one of its inputs: given shard reports kept as `shard-1/report.json` (as CI
 * artifacts arrive), the merged report.json would replace shard 1's, and the next merge would fail. It
 * refuses, with the command that writes elsewhere, rather than picking another name itself: the merged
 * report's links to results are relative to the folder it is written in, which the person knows (the
 * run's folder, where the shards' results are) and a name chosen here would not.
 */
async function refuseToOverwrite(
  inputs: readonly ShardReportInput[],
  target: string,
  args: readonly string[],
  o: MergeOptions,
): Promise<void> {
  const written = isBucketLocation(target)
    ? Object.values(reportFiles('')).map((f) => `${target}/${basename(f)}`)
    : Object.values(reportFiles(resolve(o.cwd, target)));
  const same = async (path: string) => (isBucketLocation(path) ? path : await realOrSame(path));
  const outputs = new Set(await Promise.all(written.map(same)));
  for (const input of inputs) {
    if (!outputs.has(await same(input.source))) continue;
    const out = `${basename(input.report.run.shard?.run ?? 'merged')}-merged`;
    const again = mergeCommandLine(args, out);
    throw new MergeError(
      `${input.source}: the merged report would be written over this input: give another folder with --out, e.g. \`${again}\``,
    );
  }
}

async function realOrSame(path: string): Promise<string> {
  try {
    return await realpath(path);
  } catch {
    // Not there yet: nothing to overwrite under that name, but its folder may be a link to an input's.
    try {
      return join(await realpath(dirname(path)), basename(path));
    } catch {
      return path;
    }
  }
}

async function folderOf(path: string): Promise<string> {
  return (await stat(path)).isDirectory() ? path : dirname(path);
}

function bucketOf(
  url: string,
  o: MergeOptions,
  buckets: Map<string, Storage>,
): { storage: Storage; prefix: string } {
  const resolved = resolveOutput(url, o.storage, o.env);
  if (!resolved.bucket) throw new MergeError(`${url}: not an s3://bucket/prefix`);
  const key = `${resolved.bucket.bucket}`;
  let storage = buckets.get(key);
  if (!storage) {
    storage = createStorage(resolved.bucket, { env: o.env });
    buckets.set(key, storage);
  }
  return { storage, prefix: resolved.bucket.prefix };
}

async function readInput(
  arg: string,
  o: MergeOptions,
  buckets: Map<string, Storage>,
): Promise<ShardReportInput[]> {
  if (isBucketLocation(arg)) {
    const { storage, prefix } = bucketOf(arg, o, buckets);
    const isFile = /\.json$/.test(prefix);
    const keys = isFile
      ? [prefix]
      : (await storage.listNames(prefix)).filter((k) => SHARD_REPORT_FILE.test(basename(k)));
    const out: ShardReportInput[] = [];
    for (const key of keys) {
      const source = `s3://${storage.config.bucket}/${key}`;
      out.push({ source, report: parseReport(source, (await storage.getBytes(key)).toString('utf8')) });
    }
    return out;
  }
  const path = resolve(o.cwd, arg);
  let info: Awaited<ReturnType<typeof stat>>;
  try {
    info = await stat(path);
  } catch {
    throw new MergeError(`${arg}: no such file or folder`);
  }
  const files = info.isDirectory()
    ? (await readdir(path))
        .filter((name) => SHARD_REPORT_FILE.test(name))
        .sort()
        .map((name) => join(path, name))
    : [path];
  const out: ShardReportInput[] = [];
  for (const file of files)
    out.push({ source: file, report: parseReport(file, await readFile(file, 'utf8')) });
  return out;
}

function parseReport(source: string, text: string): Report {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new MergeError(`${source}: not JSON (${(error as Error).message})`);
  }
  const parsed = reportSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new MergeError(
      `${source}: not a mediabatch report.json (${issue?.path.join('.') || 'root'}: ${issue?.message ?? 'invalid'})`,
    );
  }
  return parsed.data;
}

/** Written locally, then put under the run's prefix, like a bucket run's own report. */
async function writeToBucket(
  report: Report,
  url: string,
  bucket: { storage: Storage; prefix: string },
): Promise<MergeOutcome['files']> {
  const temp = await mkdtemp(join(tmpdir(), 'mediabatch-merge-'));
  try {
    const written = await writeMergedReport(report, url, {
      writeTo: join(temp, 'run'),
      readExtra: bucketExtraReader(bucket.storage, bucket.prefix),
    });
    await putReportFiles(bucket.storage, bucket.prefix, written);
    const at = (path: string) => `${url}/${basename(path)}`;
    return { json: at(written.json), markdown: at(written.markdown), gallery: at(written.gallery) };
  } finally {
    await rm(temp, { recursive: true, force: true });
  }
}
