// Figure 6: a 500 MB result from a loopback server, streamed to disk by downloadResult (hash, fsync,
// rename included) and by curl on the same link: throughput ratio and peak RSS of each.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { REPO } from '../test/helpers/child.js';
import { round, spawnMeasured } from './lib/measure.js';

export interface DownloadFigures {
  megabytes: number;
  oursMbPerSecond: number;
  oursPeakRssMb: number;
  /** The same child downloading 1 MB: what node and tsx hold before any result. */
  oursBaselineRssMb: number;
  curlMbPerSecond: number | null;
  curlPeakRssMb: number | null;
  /** ours / curl; null without curl. */
  ratio: number | null;
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

export async function measureDownload(megabytes = 500): Promise<DownloadFigures> {
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
    const oursMbPerSecond = megabytes / (answer.ms / 1000);
    const curl = whichCurl();
    if (!curl) {
      return {
        megabytes,
        oursMbPerSecond: round(oursMbPerSecond, 0),
        oursPeakRssMb: ours.peakRssMb,
        oursBaselineRssMb: baseline.peakRssMb,
        curlMbPerSecond: null,
        curlPeakRssMb: null,
        ratio: null,
        note: 'curl is not installed: no comparison',
      };
    }
    const dest = join(dir, 'curl.mp4');
    // curl's own clock (time_total), like the child's: neither counts process start-up.
    const viaCurl = await spawnMeasured([curl, '-s', '-o', dest, '-w', '%{time_total}', url], { cwd: dir });
    const curlSeconds = Number(viaCurl.stdout.trim());
    if (viaCurl.code !== 0 || !existsSync(dest) || (await stat(dest)).size !== total || !(curlSeconds > 0)) {
      throw new Error(`curl failed (${viaCurl.code}): ${viaCurl.stderr}`);
    }
    // The fair comparison makes curl's file durable too: its data fsynced (coreutils `sync FILE`), as ours is.
    const syncStart = performance.now();
    execFileSync('sync', [dest]);
    const syncSeconds = (performance.now() - syncStart) / 1000;
    const curlMbPerSecond = megabytes / (curlSeconds + syncSeconds);
    return {
      megabytes,
      oursMbPerSecond: round(oursMbPerSecond, 0),
      oursPeakRssMb: ours.peakRssMb,
      oursBaselineRssMb: baseline.peakRssMb,
      curlMbPerSecond: round(curlMbPerSecond, 0),
      curlPeakRssMb: viaCurl.peakRssMb,
      ratio: round(oursMbPerSecond / curlMbPerSecond),
      note: 'ours includes sha256 and fsync before the rename; curl is timed with a sync of its file after it',
    };
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(dir, { recursive: true, force: true });
  }
}
