// Figure 6: a 500 MB result from a loopback server, streamed to disk by downloadResult (hash, fsync,
// rename included) and by curl on the same link, several times each: throughput ratio and peak RSS of each.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { REPO } from '../test/helpers/child.js';
import { round, spawnMeasured } from './lib/measure.js';

export interface DownloadFigures {
  megabytes: number;
  /** Downloads of each, ours and curl alternating which goes first; the figures are their medians. */
  repetitions: number;
  oursMbPerSecond: number;
  /** The highest of the repetitions. */
  oursPeakRssMb: number;
  /** The same child downloading 1 MB: what node and tsx hold before any result. */
  oursBaselineRssMb: number;
  curlMbPerSecond: number | null;
  curlPeakRssMb: number | null;
  /** Median of each repetition's ours / curl; null without curl. */
  ratio: number | null;
  /** Each repetition's ours / curl, in order. */
  ratios: number[];
  note?: string;
}

const CHILD = fileURLToPath(new URL('./download-child.ts', import.meta.url));
const TSX = pathToFileURL(join(REPO, 'node_modules/tsx/dist/loader.mjs')).href;

function whichCurl(): string | undefined {
  try {
    return execFileSync('which', ['curl'], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] ?? Number.NaN)
    : ((sorted[middle - 1] ?? Number.NaN) + (sorted[middle] ?? Number.NaN)) / 2;
}

/**
 * Each download's file is removed right after it is timed, so both tools write into memory in the same
 * state; which goes first alternates, so neither always follows the other's freed pages.
 */
export async function measureDownload(megabytes = 500, repetitions = 5): Promise<DownloadFigures> {
  let total = megabytes * 1024 * 1024;
  const chunk = Buffer.alloc(1024 * 1024, 0x5a);
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': String(total) });
    let sent = 0;
    const pump = () => {
      while (sent < total) {
        const piece = chunk.subarray(0, Math.min(chunk.length, total - sent));
        sent += piece.length;
        if (!res.write(piece)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/result.mp4`;
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-dl-'));
  const curl = whichCurl();

  const runOurs = async (): Promise<{ mbPerSecond: number; peakRssMb: number }> => {
    const ours = await spawnMeasured([process.execPath, '--import', TSX, CHILD, url, join(dir, 'ours.mp4')], {
      cwd: REPO,
    });
    const answer = JSON.parse(ours.stdout.trim().split('\n').pop() ?? '{}') as {
      bytes?: number;
      ms?: number;
    };
    if (ours.code !== 0 || answer.bytes !== total || !answer.ms) {
      throw new Error(`download failed (${ours.code}): ${ours.stdout} ${ours.stderr}`);
    }
    await rm(join(dir, 'ours.mp4'));
    return { mbPerSecond: megabytes / (answer.ms / 1000), peakRssMb: ours.peakRssMb };
  };

  const runCurl = async (command: string): Promise<{ mbPerSecond: number; peakRssMb: number }> => {
    const dest = join(dir, 'curl.mp4');
    // curl's own clock (time_total), like the child's: neither counts process start-up.
    const viaCurl = await spawnMeasured([command, '-s', '-o', dest, '-w', '%{time_total}', url], {
      cwd: dir,
    });
    const curlSeconds = Number(viaCurl.stdout.trim());
    if (viaCurl.code !== 0 || !existsSync(dest) || (await stat(dest)).size !== total || !(curlSeconds > 0)) {
      throw new Error(`curl failed (${viaCurl.code}): ${viaCurl.stderr}`);
    }
    // The fair comparison makes curl's file durable too: its data fsynced (coreutils `sync FILE`), as ours is.
    const syncStart = performance.now();
    execFileSync('sync', [dest]);
    const syncSeconds = (performance.now() - syncStart) / 1000;
    await rm(dest);
    return { mbPerSecond: megabytes / (curlSeconds + syncSeconds), peakRssMb: viaCurl.peakRssMb };
  };

  try {
    const small = total;
    total = 1024 * 1024;
    const baseline = await spawnMeasured(
      [process.execPath, '--import', TSX, CHILD, url, join(dir, 'small.mp4')],
      {
        cwd: REPO,
      },
    );
    total = small;
    const ours: { mbPerSecond: number; peakRssMb: number }[] = [];
    const theirs: { mbPerSecond: number; peakRssMb: number }[] = [];
    const ratios: number[] = [];
    for (let i = 0; i < repetitions; i++) {
      if (curl && i % 2 === 1) theirs.push(await runCurl(curl));
      ours.push(await runOurs());
      if (curl && i % 2 === 0) theirs.push(await runCurl(curl));
      const mine = ours[i];
      const other = theirs[i];
      if (mine && other) ratios.push(round(mine.mbPerSecond / other.mbPerSecond));
    }
    const figures = {
      megabytes,
      repetitions,
      oursMbPerSecond: round(median(ours.map((o) => o.mbPerSecond)), 0),
      oursPeakRssMb: Math.max(...ours.map((o) => o.peakRssMb)),
      oursBaselineRssMb: baseline.peakRssMb,
      ratios,
    };
    if (!curl) {
      return {
        ...figures,
        curlMbPerSecond: null,
        curlPeakRssMb: null,
        ratio: null,
        note: 'curl is not installed: no comparison',
      };
    }
    return {
      ...figures,
      curlMbPerSecond: round(median(theirs.map((o) => o.mbPerSecond)), 0),
      curlPeakRssMb: Math.max(...theirs.map((o) => o.peakRssMb)),
      ratio: round(median(ratios)),
      note: `median of ${repetitions}, alternating which goes first; ours includes sha256 and fsync before the rename, curl is timed with a sync of its file after it`,
    };
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(dir, { recursive: true, force: true });
  }
}

// Figure 6 alone: npx tsx bench/download.ts [--megabytes 500] [--repetitions 5]
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      megabytes: { type: 'string', default: '500' },
      repetitions: { type: 'string', default: '5' },
    },
  });
  const megabytes = Number(values.megabytes);
  const repetitions = Number(values.repetitions);
  if (!(megabytes > 0) || !Number.isInteger(repetitions) || repetitions < 1) {
    throw new Error(`--megabytes and --repetitions: positive numbers, got ${megabytes} and ${repetitions}`);
  }
  console.log(JSON.stringify(await measureDownload(megabytes, repetitions)));
}
