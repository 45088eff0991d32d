// Figure 6: one large result from a loopback server, stored by downloadResult (SHA-256, fsync before the
// rename) and by curl followed by `sync FILE` on the same link, alternating, several times each, for
// each size: throughput ratio, CPU and peak RSS of each, and the load of the machine around them.
//
// Why an honest bench differs from a naive one (measured 2026-11-26, 2 shared cores):
// - The server runs in a process of its own (bench/download-server.ts), as a CDN would; served from the
//   bench's own process it shared an event loop and a garbage collector with the orchestration.
// - The bytes are random, not one repeated byte, and both tools read the same server.
// - curl is also timed against /dev/null: the server's own pace, the ceiling of both.
// - Both clients are timed by their own clock (the child around downloadResult, curl's time_total plus the
//   `sync FILE` after it); neither counts process start-up.
// - CPU seconds are reported beside the wall time: ours uses about 4x curl's CPU (hash, HTTP parsing in
//   JavaScript, copies), so on a machine busy with other work its ratio falls further than curl's. The
//   1-minute load average before and after each size says how busy the machine was.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { REPO } from '../test/helpers/child.js';
import { round, spawnMeasured } from './lib/measure.js';
import { writeResultsPart } from './lib/results.js';

/** The target: ours at least this share of curl + sync. */
export const DOWNLOAD_TARGET = 0.8;

interface Sample {
  mbPerSecond: number;
  cpuSeconds: number;
  peakRssMb: number;
}

export interface DownloadFigures {
  megabytes: number;
  /** Downloads of each, ours and curl + sync alternating which goes first; the figures are their medians. */
  repetitions: number;
  oursMbPerSecond: number;
  /** CPU seconds of our whole process (its writing thread included) during the download. */
  oursCpuSeconds: number;
  /** The highest of the repetitions. */
  oursPeakRssMb: number;
  /** The same child downloading 1 MB: what node and tsx hold before any result. */
  oursBaselineRssMb: number;
  /** The anchor: curl -o, then `sync FILE`. */
  curlMbPerSecond: number | null;
  curlCpuSeconds: number | null;
  curlPeakRssMb: number | null;
  /** curl into /dev/null: how fast the server serves, the ceiling of both. */
  serverMbPerSecond: number | null;
  /** Median of each repetition's ours / (curl + sync); null without curl. */
  ratio: number | null;
  /** Each repetition's ours / (curl + sync), in order. */
  ratios: number[];
  /** The 1-minute load average before and after this size's repetitions (2 cores: above 2 is contention). */
  load: [before: number, after: number];
  note?: string;
}

const CHILD = fileURLToPath(new URL('./download-child.ts', import.meta.url));
const SERVER = fileURLToPath(new URL('./download-server.ts', import.meta.url));
const TSX = pathToFileURL(join(REPO, 'node_modules/tsx/dist/loader.mjs')).href;

function whichCurl(): string | undefined {
  try {
    return execFileSync('which', ['curl'], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] ?? Number.NaN)
    : ((sorted[middle - 1] ?? Number.NaN) + (sorted[middle] ?? Number.NaN)) / 2;
}

/** Starts the result server in a process of its own; resolves with its base URL and a stop function. */
async function startServer(): Promise<{ base: string; stop: () => Promise<void> }> {
  const proc = spawn(process.execPath, ['--import', TSX, SERVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      const found = /port (\d+)/.exec(out);
      if (found) resolve(Number(found[1]));
    });
    proc.once('exit', (code) => reject(new Error(`download server exited (${code}) before listening`)));
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  return {
    base: `http://127.0.0.1:${port}`,
    stop: async () => {
      proc.kill('SIGTERM');
      await exited;
    },
  };
}

async function runOurs(url: string, dest: string, bytes: number): Promise<Sample> {
  const ours = await spawnMeasured([process.execPath, '--import', TSX, CHILD, url, dest], { cwd: REPO });
  const answer = JSON.parse(ours.stdout.trim().split('\n').pop() ?? '{}') as {
    bytes?: number;
    ms?: number;
    cpuMs?: number;
  };
  if (ours.code !== 0 || answer.bytes !== bytes || !answer.ms) {
    throw new Error(`download failed (${ours.code}): ${ours.stdout} ${ours.stderr}`);
  }
  await rm(dest);
  return {
    mbPerSecond: bytes / 1024 ** 2 / (answer.ms / 1000),
    cpuSeconds: (answer.cpuMs ?? Number.NaN) / 1000,
    peakRssMb: ours.peakRssMb,
  };
}

/** curl -o then `sync FILE` (coreutils: fsync of that file), as durable as ours; or into /dev/null. */
async function runCurl(curl: string, url: string, dest: string | null, bytes: number): Promise<Sample> {
  // curl's own clock (time_total), like the child's: neither counts process start-up.
  const viaCurl = await spawnMeasured([curl, '-s', '-o', dest ?? '/dev/null', '-w', '%{time_total}', url], {
    cwd: REPO,
  });
  const curlSeconds = Number(viaCurl.stdout.trim());
  if (viaCurl.code !== 0 || !(curlSeconds > 0))
    throw new Error(`curl failed (${viaCurl.code}): ${viaCurl.stderr}`);
  let syncSeconds = 0;
  if (dest !== null) {
    if (!existsSync(dest) || (await stat(dest)).size !== bytes)
      throw new Error(`curl wrote no whole ${dest}`);
    const syncStart = performance.now();
    execFileSync('sync', [dest]);
    syncSeconds = (performance.now() - syncStart) / 1000;
    await rm(dest);
  }
  return {
    mbPerSecond: bytes / 1024 ** 2 / (curlSeconds + syncSeconds),
    cpuSeconds: viaCurl.cpuSeconds,
    peakRssMb: viaCurl.peakRssMb,
  };
}

/**
 * One size: ours and curl + sync alternating which goes first (neither always follows the other's freed
 * pages), curl into /dev/null after each pair. Each file is removed right after it is timed.
 */
async function measureSize(
  base: string,
  dir: string,
  megabytes: number,
  repetitions: number,
): Promise<DownloadFigures> {
  const bytes = Math.round(megabytes * 1024 * 1024);
  const url = `${base}/${bytes}`;
  const curl = whichCurl();
  const load0 = loadavg()[0] ?? Number.NaN;
  const baseline = await runOurs(`${base}/${1024 * 1024}`, join(dir, 'small.mp4'), 1024 * 1024);
  const ours: Sample[] = [];
  const theirs: Sample[] = [];
  const server: Sample[] = [];
  const ratios: number[] = [];
  for (let i = 0; i < repetitions; i++) {
    if (curl && i % 2 === 1) theirs.push(await runCurl(curl, url, join(dir, 'curl.mp4'), bytes));
    ours.push(await runOurs(url, join(dir, 'ours.mp4'), bytes));
    if (curl && i % 2 === 0) theirs.push(await runCurl(curl, url, join(dir, 'curl.mp4'), bytes));
    if (curl) server.push(await runCurl(curl, url, null, bytes));
    const mine = ours[i];
    const other = theirs[i];
    if (mine && other) ratios.push(round(mine.mbPerSecond / other.mbPerSecond));
  }
  const med = (samples: Sample[], key: keyof Sample, digits: number) =>
    samples.length === 0 ? null : round(median(samples.map((s) => s[key])), digits);
  return {
    megabytes,
    repetitions,
    oursMbPerSecond: med(ours, 'mbPerSecond', 0) ?? Number.NaN,
    oursCpuSeconds: med(ours, 'cpuSeconds', 2) ?? Number.NaN,
    oursPeakRssMb: Math.max(...ours.map((o) => o.peakRssMb)),
    oursBaselineRssMb: baseline.peakRssMb,
    curlMbPerSecond: med(theirs, 'mbPerSecond', 0),
    curlCpuSeconds: med(theirs, 'cpuSeconds', 2),
    curlPeakRssMb: curl ? Math.max(...theirs.map((o) => o.peakRssMb)) : null,
    serverMbPerSecond: med(server, 'mbPerSecond', 0),
    ratio: curl ? round(median(ratios)) : null,
    ratios,
    load: [round(load0, 1), round(loadavg()[0] ?? Number.NaN, 1)],
    note: curl
      ? `median of ${repetitions}, alternating which goes first; ours includes sha256 and fsync before the rename, curl is timed with a sync of its file after it`
      : 'curl is not installed: no comparison',
  };
}

/** Figure 6 for each size, against one server process. */
export async function measureDownloads(sizes = [200, 500], repetitions = 5): Promise<DownloadFigures[]> {
  const server = await startServer();
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-dl-'));
  try {
    const figures: DownloadFigures[] = [];
    for (const megabytes of sizes) figures.push(await measureSize(server.base, dir, megabytes, repetitions));
    return figures;
  } finally {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

/** One line per size: the figure beside its target and the anchor measured in the same run. */
export function downloadRow(f: DownloadFigures): [string, string, string] {
  const spread = f.ratios.length > 0 ? ` (${Math.min(...f.ratios)}-${Math.max(...f.ratios)})` : '';
  return [
    `6 ${f.megabytes} MB download / (curl + sync), median of ${f.repetitions}`,
    `${f.ratio ?? '-'}${spread}: ours ${f.oursMbPerSecond} MB/s, ${f.oursCpuSeconds} s CPU; curl + sync ${f.curlMbPerSecond ?? '-'} MB/s, ${f.curlCpuSeconds ?? '-'} s CPU; server ${f.serverMbPerSecond ?? '-'} MB/s; load ${f.load[0]}-${f.load[1]}`,
    f.ratio === null ? 'no curl' : `>= ${DOWNLOAD_TARGET} ${f.ratio >= DOWNLOAD_TARGET ? 'met' : 'NOT met'}`,
  ];
}

// Figure 6 alone: npx tsx bench/download.ts [--megabytes 200,500] [--repetitions 5] [--json] [--write]
// (--write: into bench/results.json, stamped as measured again)
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      megabytes: { type: 'string', default: '200,500' },
      repetitions: { type: 'string', default: '5' },
      json: { type: 'boolean', default: false },
      write: { type: 'boolean', default: false },
    },
  });
  const sizes = (values.megabytes ?? '').split(',').map(Number);
  const repetitions = Number(values.repetitions);
  if (!sizes.every((mb) => mb > 0) || !Number.isInteger(repetitions) || repetitions < 1) {
    throw new Error(
      `--megabytes and --repetitions: positive numbers, got ${values.megabytes} and ${repetitions}`,
    );
  }
  const figures = await measureDownloads(sizes, repetitions);
  if (values.json) console.log(JSON.stringify(figures));
  else for (const row of figures.map(downloadRow)) console.log(row.join('  '));
  if (values.write) await writeResultsPart('download', () => figures);
}
