// Peak memory of writing a run's report (report.json, report.csv, report.md, index.html) for a large run,
// without the network: a state database filled through the store API, then the report written in a
// fresh child process whose peak RSS is measured from a baseline taken just before the write.
//
//   npx tsx bench/report-memory.ts [--tasks 100000] [--legacy] [--db <file>] [--json]
//
// --legacy writes the four files the way mediabatch did before the report was streamed (every task row
// loaded, each file built as one string): the "before" figure. --db keeps (and reuses) the database.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  assembleReport,
  collectReportInput,
  readGalleryExtras,
  renderGallery,
  reportCsv,
  reportMarkdown,
  writeReport,
} from '../src/report/index.js';
import { type NewTask, openStore, type Store } from '../src/store/index.js';

const RUN = 'bench-report';
const SELF = fileURLToPath(import.meta.url);
const REPO = fileURLToPath(new URL('..', import.meta.url));

export interface ReportMemory {
  tasks: number;
  mode: 'streamed' | 'legacy';
  /** RSS of the child with the store open and the modules loaded, just before the write. */
  baselineMb: number;
  /** Peak RSS during the write (VmHWM, reset at the baseline; else sampled every 5 ms). */
  peakMb: number;
  addedMb: number;
  seconds: number;
  rssBy: 'VmHWM' | 'sampled';
  bytes: Record<string, number>;
}

/** A run of `count` flat-image tasks: 95 % done with one file, then failed, in doubt, rejected, pending. */
export function fillRun(store: Store, count: number): void {
  store.runs.createRun({ id: RUN, manifestPath: 'bench.yaml', manifestName: 'bench', settings: {} });
  const specs: NewTask[] = [];
  for (let i = 1; i <= count; i++) {
    specs.push({
      taskId: `img-${i}`,
      model: i % 10 === 0 ? 'anime-waifu' : 'flat-image',
      endpoint: '/api/v1/images/generations',
      wireBody: JSON.stringify({
        model: 'flat-image',
        prompt: `A studio product shot of an Acme mug, variant ${i}, soft light, white background, 35 mm`,
        ratio: '1:1',
        custom_callback_url: `http://127.0.0.1:8787/callback/${'x'.repeat(43)}/img-${i}`,
      }),
      estimate: { tokens: 0.2, min: 0.2, max: 0.2, basis: '0.2 tokens per image', assumedPrice: false },
    });
  }
  store.tasks.upsertTasks(RUN, specs);
  specs.length = 0;
  for (let i = 1; i <= count; i++) {
    const taskId = `img-${i}`;
    const kind = i % 100;
    if (kind === 99) continue; // pending
    const attempt = store.submissions.recordSubmitIntent(RUN, taskId);
    if (kind === 98) {
      store.submissions.recordInDoubt(RUN, taskId, attempt, { message: 'connection reset after sending' });
      continue;
    }
    if (kind === 97) {
      store.submissions.recordNotCharged(RUN, taskId, attempt, {
        outcome: 'rejected',
        httpStatus: 400,
        message: 'ratio: must be one of 1:1, 16:9, got 1:3',
      });
      continue;
    }
    const imgUuid = `uuid-${i.toString(16).padStart(8, '0')}`;
    store.submissions.recordSubmitted(RUN, taskId, attempt, {
      imgUuid,
      cost: 0.15,
      keyFingerprint: 'fp0123456789',
    });
    if (kind === 96 || kind === 95) {
      store.jobs.recordJobStatus(imgUuid, 'failed', { status: 'failed' }, 'poll');
      continue;
    }
    store.jobs.recordJobStatus(imgUuid, 'success', { status: 'success', duration: 7.5 }, 'poll');
    store.files.recordFile(RUN, taskId, {
      index: 1,
      kind: 'image',
      path: `/bench/out/${RUN}/${taskId}/1.png`,
      bytes: 180_000 + (i % 5000),
      sha256: i.toString(16).padStart(64, '0'),
      url: `https://cdn.example.com/${imgUuid}.png?sig=secret`,
    });
    store.tasks.markDone(RUN, taskId);
  }
}

/** The child: baseline, then the write, then the peak. Prints one JSON line. */
async function child(dbFile: string, runDir: string, legacy: boolean): Promise<void> {
  const store = openStore(dbFile);
  const now = new Date('2026-01-06T00:00:00Z');
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const baseline = process.memoryUsage().rss;
  const rssBy = resetPeak() ? 'VmHWM' : 'sampled';
  let sampled = baseline;
  const timer = setInterval(() => {
    sampled = Math.max(sampled, process.memoryUsage().rss);
  }, 5);
  const started = performance.now();
  if (legacy) await legacyWrite(store, runDir, now);
  else await writeReport(store, RUN, runDir, { now });
  const seconds = (performance.now() - started) / 1000;
  clearInterval(timer);
  sampled = Math.max(sampled, process.memoryUsage().rss);
  const peak = rssBy === 'VmHWM' ? vmHwmBytes() : sampled;
  store.close();
  const bytes: Record<string, number> = {};
  for (const name of ['report.json', 'report.csv', 'report.md', 'index.html']) {
    bytes[name] = statSync(join(runDir, name)).size;
  }
  const mb = (n: number) => Math.round((n / 2 ** 20) * 10) / 10;
  const result: Omit<ReportMemory, 'tasks'> = {
    mode: legacy ? 'legacy' : 'streamed',
    baselineMb: mb(baseline),
    peakMb: mb(peak),
    addedMb: mb(peak - baseline),
    seconds: Math.round(seconds * 100) / 100,
    rssBy,
    bytes,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

/** What writeReport did before the report was streamed: everything in memory, then four strings. */
async function legacyWrite(store: Store, runDir: string, now: Date): Promise<void> {
  const input = collectReportInput(store, RUN, { now, runDir });
  const report = assembleReport(input);
  const markdown = reportMarkdown(report);
  const extras = await readGalleryExtras(report, input.tasks, runDir);
  await writeFile(join(runDir, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
  await writeFile(join(runDir, 'report.csv'), reportCsv(report));
  await writeFile(join(runDir, 'report.md'), markdown);
  await writeFile(join(runDir, 'index.html'), renderGallery(report, extras));
}

/** Linux resets VmHWM to the current RSS on `5` written to clear_refs (since 4.0). */
function resetPeak(): boolean {
  try {
    writeFileSync('/proc/self/clear_refs', '5');
    return vmHwmBytes() > 0;
  } catch {
    return false;
  }
}

function vmHwmBytes(): number {
  const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  return match ? Number(match[1]) * 1024 : 0;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      tasks: { type: 'string', default: '100000' },
      legacy: { type: 'boolean', default: false },
      db: { type: 'string' },
      json: { type: 'boolean', default: false },
      child: { type: 'string' },
      'run-dir': { type: 'string' },
    },
  });
  if (values.child !== undefined) {
    await child(values.child, values['run-dir'] ?? '.', values.legacy);
    return;
  }
  const count = Number(values.tasks);
  if (!Number.isInteger(count) || count < 1)
    throw new Error(`--tasks: must be a whole number, got ${values.tasks}`);
  // tmpfs when there is one: the store fsyncs every commit, and the fill makes 400,000 of them.
  const base = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
  const dir = await mkdtemp(join(base, 'mb-bench-report-'));
  try {
    const dbFile = values.db ?? join(dir, 'state.db');
    if (!existsSync(dbFile)) {
      const started = performance.now();
      const store = openStore(dbFile);
      fillRun(store, count);
      store.close();
      log(`filled ${count} tasks in ${Math.round((performance.now() - started) / 100) / 10} s`);
    }
    const runDir = join(dir, 'out', RUN);
    await writeFile(join(dir, '.keep'), '');
    execFileSync('mkdir', ['-p', runDir]);
    const out = execFileSync(
      process.execPath,
      [
        '--expose-gc',
        '--import',
        'tsx',
        SELF,
        '--child',
        dbFile,
        '--run-dir',
        runDir,
        ...(values.legacy ? ['--legacy'] : []),
      ],
      { cwd: REPO, encoding: 'utf8', maxBuffer: 1 << 20 },
    );
    const result: ReportMemory = { tasks: count, ...(JSON.parse(out.trim()) as Omit<ReportMemory, 'tasks'>) };
    if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
    else {
      log(
        `${result.mode} report of ${count} tasks: baseline ${result.baselineMb} MB, peak ${result.peakMb} MB ` +
          `(+${result.addedMb} MB, ${result.rssBy}), ${result.seconds} s`,
      );
      for (const [name, size] of Object.entries(result.bytes))
        log(`  ${name}: ${(size / 2 ** 20).toFixed(1)} MB`);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function log(line: string): void {
  process.stderr.write(`report-memory: ${line}\n`);
}

await main();
