// What reserving every spend in the store costs the runner: 5,000 images at concurrency 64 under a
// budget, run by this code and by the code before reservations (the commit BEFORE_RESERVATIONS, taken
// out of git into a temporary folder), each as its own process against one sandbox, alternating which
// goes first. The figure is a ratio in one run: the runner phase (first `submitted` to last `done` of
// `run --json`) before / now; the target is >= 0.95 (at most 5 % slower). Beside it, the CPU seconds each
// `run` process used (user + system, from its shell's `times`), before / now: on a machine other work
// shares, wall time swings with the load far more than the CPU a process needs for the same work.
//   npx tsx bench/reserve.ts [--tasks 5000] [--concurrency 64] [--repetitions 2] [--json]
import { execFileSync, spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { REPO, spawnSandbox } from '../test/helpers/child.js';
import { writeImagesManifest } from './lib/manifests.js';
import { round } from './lib/measure.js';

/** The last commit whose runner kept the budget in memory only. */
export const BEFORE_RESERVATIONS = '75f57f5';
/** At most 5 % slower than the runner that kept the budget in memory. */
export const RESERVE_RATIO_TARGET = 0.95;
const KEY = 'sandbox-key';

export interface ReserveFigures {
  tasks: number;
  concurrency: number;
  repetitions: number;
  /** Runner phase seconds of each repetition, this code and the code before. */
  nowSeconds: number[];
  beforeSeconds: number[];
  /** Best of the repetitions, before / now: 1 is no cost, 0.95 is 5 % slower. */
  ratio: number;
  /** CPU seconds (user + system) of each `run` process, this code and the code before. */
  nowCpuSeconds: number[];
  beforeCpuSeconds: number[];
  /** Least CPU of the repetitions, before / now. */
  cpuRatio: number;
}

/** The sources of `commit` in a temporary folder that uses this checkout's node_modules. */
async function checkoutOf(commit: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-before-'));
  const tar = execFileSync('git', ['archive', commit, 'src', 'package.json', 'tsconfig.json'], {
    cwd: REPO,
    maxBuffer: 256 * 1024 * 1024,
  });
  execFileSync('tar', ['-x', '-C', dir], { input: tar });
  await symlink(join(REPO, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

/**
 * `run --json` of the sources under `root` as a child process of a shell whose `times` reports the CPU
 * it used: the runner phase and the CPU, in seconds.
 */
function runPhase(
  root: string,
  args: string[],
  cwd: string,
  env: Record<string, string>,
): Promise<{ phase: number; cpu: number }> {
  const tsx = pathToFileURL(join(REPO, 'node_modules/tsx/dist/loader.mjs')).href;
  const main = join(root, 'src/cli/main.ts');
  const script = '"$@"; code=$?; times >&2; exit $code';
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script, 'bash', process.execPath, '--import', tsx, main, ...args], {
      cwd,
      env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (err += c.toString('utf8')));
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`run exited ${code}: ${err.slice(-500)}`));
      else resolve({ phase: phaseOf(out), cpu: childCpuOf(err) });
    });
  });
}

/** The children's line of bash's `times` (its last line): "0m12.345s 0m1.234s", user and system. */
function childCpuOf(stderr: string): number {
  const line = stderr.trim().split('\n').at(-1) ?? '';
  const parts = [...line.matchAll(/(\d+)m([\d.]+)s/g)];
  if (parts.length !== 2) throw new Error(`no CPU times from the shell: ${line}`);
  return parts.reduce((n, m) => n + Number(m[1]) * 60 + Number(m[2]), 0);
}

function phaseOf(ndjson: string): number {
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  for (const line of ndjson.split('\n')) {
    if (!line.startsWith('{')) continue;
    const event = JSON.parse(line) as { event?: string; at?: string };
    const at = Date.parse(event.at ?? '');
    if (event.event === 'submitted') first = Math.min(first, at);
    if (event.event === 'done') last = Math.max(last, at);
  }
  return (last - first) / 1000;
}

export async function measureReserve(
  baseUrl: string,
  o: { tasks: number; concurrency: number; repetitions: number },
): Promise<ReserveFigures> {
  const before = await checkoutOf(BEFORE_RESERVATIONS);
  const work = await mkdtemp(join(tmpdir(), 'mb-bench-reserve-'));
  const env = { MEDIABATCH_API_KEY: KEY, MEDIABATCH_BASE_URL: baseUrl, MEDIABATCH_POLL_SCALE: '0.01' };
  const nowSeconds: number[] = [];
  const beforeSeconds: number[] = [];
  const nowCpuSeconds: number[] = [];
  const beforeCpuSeconds: number[] = [];
  try {
    for (let i = 0; i < o.repetitions; i++) {
      // Alternating which goes first, so neither always meets a warmer sandbox.
      const order = i % 2 === 0 ? (['now', 'before'] as const) : (['before', 'now'] as const);
      for (const who of order) {
        const dir = join(work, `${who}-${i}`);
        await mkdir(dir, { recursive: true });
        const file = await writeImagesManifest(dir, {
          name: 'reserve',
          count: o.tasks,
          concurrency: o.concurrency,
          budget: o.tasks,
        });
        const args = ['--state', join(dir, 'state.db'), 'run', file, '--yes', '--no-probe', '--json'];
        const { phase, cpu } = await runPhase(who === 'now' ? REPO : before, args, dir, env);
        (who === 'now' ? nowSeconds : beforeSeconds).push(round(phase));
        (who === 'now' ? nowCpuSeconds : beforeCpuSeconds).push(round(cpu));
        await rm(dir, { recursive: true, force: true });
      }
    }
  } finally {
    await rm(work, { recursive: true, force: true });
    await rm(before, { recursive: true, force: true });
  }
  return {
    ...o,
    nowSeconds,
    beforeSeconds,
    ratio: round(Math.min(...beforeSeconds) / Math.min(...nowSeconds)),
    nowCpuSeconds,
    beforeCpuSeconds,
    cpuRatio: round(Math.min(...beforeCpuSeconds) / Math.min(...nowCpuSeconds)),
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { values } = parseArgs({
    options: {
      tasks: { type: 'string', default: '5000' },
      concurrency: { type: 'string', default: '64' },
      repetitions: { type: 'string', default: '2' },
      json: { type: 'boolean', default: false },
    },
  });
  const { child, baseUrl } = await spawnSandbox(['--speed', '0', '--balance', '1e9', '--seed', '7']);
  try {
    const f = await measureReserve(baseUrl, {
      tasks: Number(values.tasks),
      concurrency: Number(values.concurrency),
      repetitions: Number(values.repetitions),
    });
    if (values.json) console.log(JSON.stringify(f));
    else {
      console.log(
        `reserving in the store, ${f.tasks} tasks, c${f.concurrency}: before ${f.beforeSeconds.join(' / ')} s, now ${f.nowSeconds.join(' / ')} s; ratio ${f.ratio} (target >= ${RESERVE_RATIO_TARGET}); CPU before ${f.beforeCpuSeconds.join(' / ')} s, now ${f.nowCpuSeconds.join(' / ')} s; ratio ${f.cpuRatio}`,
      );
    }
  } finally {
    child.proc.kill();
  }
}
