// How soon a mixed batch finishes, against the sandbox's own job durations packed onto the same
// slots with zero overhead (the ideal), beside the naive script the service's docs suggest (a look every
// 5 s, in manifest order) run at the same time against its own sandbox. Also: requests per task, and the
// delay from a job's success to its file on disk, by kind.
//
// Job times and polling are scaled alike (`speed`, 0.25 by default: a quarter of real time), so every
// ratio holds at speed 1; delays are also given divided by the speed (what they are at speed 1).
//   npx tsx bench/makespan.ts [--tasks 64] [--concurrency 8] [--speed 0.25] [--repetitions 1] [--json] [--write]
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { stringify } from 'yaml';
import { type Sandbox, startSandbox } from '../src/sandbox/server.js';
import { spawnCli } from '../test/helpers/child.js';
import { quantile, round } from './lib/measure.js';
import { naiveLoop } from './lib/naive.js';
import { writeResultsPart } from './lib/results.js';
import { freePort } from './lib/tap.js';

const KEY = 'sandbox-key';

export interface MakespanOptions {
  tasks: number;
  concurrency: number;
  speed: number;
  seed?: number;
  /**
   * Runs of mediabatch (polling) and the 5 s script, side by side, each against a fresh sandbox of the
   * same seed (default 1): the target holds in every repetition, not only on average.
   */
  repetitions?: number;
}

/** mediabatch polling at most this many times the ideal of its order, in every repetition. */
export const MAKESPAN_TARGET = 1.05;

export interface RunFigures {
  who: string;
  /** From the first submission to the last file on disk, in ms at the bench's speed. */
  makespanMs: number;
  /** The same jobs packed in manifest order onto the slots, no overhead. */
  idealListMs: number;
  /**
   * The same jobs packed longest *expected* first (videos before images, each kind in manifest order):
   * what zero overhead gives with the order mediabatch uses, knowing no more than it does.
   */
  idealLongestMs: number;
  /** makespan / the ideal of the order this run used (its overhead): target <= 1.05 for polling. */
  ratio: number;
  /** makespan / list-order ideal: below 1 when the order gains more than the overhead costs. */
  vsListIdeal: number;
  requestsPerTask: number;
  pollsPerTask: number;
  /**
   * Success at the service -> file on disk, by kind, in ms at speed 1: the wait for a poll to see it is
   * divided by the speed, the fetch is as measured; a callback's travels at network speed whatever the
   * scale and is as measured.
   */
  toFile: Record<string, { medianMs: number; p95Ms: number }>;
}

export interface MakespanFigures {
  tasks: number;
  concurrency: number;
  speed: number;
  runs: RunFigures[];
  /** The longest-first ideal / the list-order ideal of the same jobs: target <= 0.85. */
  longestFirstGain: number;
  /** Every repetition of mediabatch polling and of the 5 s script (the first is in `runs`). */
  repeated: { polling: RunFigures[]; naive: RunFigures[] };
}

interface TaskDecl {
  id: string;
  model: string;
  input: Record<string, unknown>;
}

/** Three images for each video, written the way people write them: mixed, not sorted by length. */
export function mixedTasks(n: number): TaskDecl[] {
  return Array.from({ length: n }, (_, i) =>
    i % 4 === 2
      ? {
          id: `clip-${i + 1}`,
          model: 'studio-2-6',
          input: { prompt: `a product turning, take ${i + 1}`, duration: 5, resolution: '720p' },
        }
      : { id: `still-${i + 1}`, model: 'flat-image', input: { prompt: `a product still, take ${i + 1}` } },
  );
}

/** The order mediabatch submits in by default: videos (longest expected) first, each kind as written. */
export function longestExpectedFirst(list: TaskDecl[]): TaskDecl[] {
  const rank = (t: TaskDecl) => (t.model === 'studio-2-6' ? 0 : 1);
  return list
    .map((t, i) => ({ t, i }))
    .sort((a, b) => rank(a.t) - rank(b.t) || a.i - b.i)
    .map((x) => x.t);
}

/** List scheduling: each job, in order, on the slot that frees first. */
export function packedMakespan(durations: readonly number[], slots: number): number {
  const free = Array.from({ length: slots }, () => 0);
  for (const d of durations) {
    let best = 0;
    for (let s = 1; s < free.length; s++) if ((free[s] ?? 0) < (free[best] ?? 0)) best = s;
    free[best] = (free[best] ?? 0) + d;
  }
  return Math.max(...free);
}

interface Finished {
  taskId: string;
  kind: string;
  /** When the sandbox created the job and when it ended it (epoch ms). */
  createdAt: number;
  endsAt: number;
  /** When its file was on disk (epoch ms). */
  doneAt: number;
  /** When the job was seen finished (epoch ms), if known. */
  seenAt?: number;
}

/**
 * Success -> file at speed 1. Only the wait for the notice scales with the bench's speed; fetching and
 * storing the file take their real time at any speed, so only the first part is divided by the speed
 * (dividing it all made a 1 s hiccup of a loaded machine count 4 s at a quarter speed).
 */
function delayAtSpeed1(f: Finished, speed: number, byPolling: boolean): number {
  if (!byPolling) return f.doneAt - f.endsAt;
  if (f.seenAt === undefined) return (f.doneAt - f.endsAt) / speed;
  return Math.max(0, f.seenAt - f.endsAt) / speed + (f.doneAt - f.seenAt);
}

function figuresOf(
  who: string,
  list: TaskDecl[],
  finished: Finished[],
  sandbox: Sandbox,
  o: MakespanOptions,
  how: { byPolling: boolean; longestFirst: boolean },
): RunFigures {
  const byId = new Map(finished.map((f) => [f.taskId, f]));
  const durationsOf = (tasks: TaskDecl[]) =>
    tasks.flatMap((t) => {
      const f = byId.get(t.id);
      return f ? [f.endsAt - f.createdAt] : [];
    });
  const durations = durationsOf(list);
  const makespanMs =
    Math.max(...finished.map((f) => f.doneAt)) - Math.min(...finished.map((f) => f.createdAt));
  const idealListMs = packedMakespan(durations, o.concurrency);
  const idealLongestMs = packedMakespan(durationsOf(longestExpectedFirst(list)), o.concurrency);
  const idealUsed = how.longestFirst ? idealLongestMs : idealListMs;
  const { requests } = sandbox.state();
  const toFile: RunFigures['toFile'] = {};
  for (const kind of new Set(finished.map((f) => f.kind))) {
    const delays = finished
      .filter((f) => f.kind === kind)
      .map((f) => delayAtSpeed1(f, o.speed, how.byPolling));
    toFile[kind] = { medianMs: round(quantile(delays, 0.5), 0), p95Ms: round(quantile(delays, 0.95), 0) };
  }
  return {
    who,
    makespanMs: round(makespanMs, 0),
    idealListMs: round(idealListMs, 0),
    idealLongestMs: round(idealLongestMs, 0),
    ratio: round(makespanMs / idealUsed),
    vsListIdeal: round(makespanMs / idealListMs),
    requestsPerTask: round((requests.submit + requests.poll + requests.download) / list.length),
    pollsPerTask: round(requests.poll / list.length),
    toFile,
  };
}

/** Jobs of a sandbox by the prompt that made them (each prompt is unique in the bench). */
function jobsByPrompt(sandbox: Sandbox): Map<string, { createdAt: number; endsAt: number; kind: string }> {
  const jobs = new Map<string, { createdAt: number; endsAt: number; kind: string }>();
  for (const j of sandbox.state().jobs) {
    const prompt = (j.request as { prompt?: string }).prompt ?? '';
    const kind = j.model === 'studio-2-6' ? 'video' : 'image';
    jobs.set(prompt, { createdAt: Date.parse(j.created_at), endsAt: Date.parse(j.ends_at), kind });
  }
  return jobs;
}

/** Each run has a sandbox of its own with the same seed: the k-th job submitted takes as long in each. */
function benchSandbox(o: MakespanOptions): Promise<Sandbox> {
  // A short tick, so that a callback leaves when its job ends rather than up to 250 ms later.
  return startSandbox({ port: 0, speed: o.speed, seed: o.seed ?? 5, apiKey: KEY, balance: 1e9, tickMs: 10 });
}

async function mediabatchRun(
  who: string,
  list: TaskDecl[],
  o: MakespanOptions,
  extra: { order?: 'manifest'; callbacks?: boolean },
): Promise<RunFigures> {
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-ms-'));
  const sandbox = await benchSandbox(o);
  try {
    await writeFile(
      join(dir, 'm.yaml'),
      stringify({ version: 1, name: 'ms', concurrency: o.concurrency, output: 'out', tasks: list }),
    );
    const args = ['--state', 'state.db', 'run', 'm.yaml', '--yes', '--no-probe'];
    if (extra.order) args.push('--order', extra.order);
    if (extra.callbacks) {
      const port = await freePort();
      args.push('--listen', `127.0.0.1:${port}`, '--callback-url', `http://127.0.0.1:${port}`);
    }
    const child = spawnCli(args, {
      cwd: dir,
      env: {
        MEDIABATCH_API_KEY: KEY,
        MEDIABATCH_BASE_URL: sandbox.baseUrl,
        MEDIABATCH_POLL_SCALE: String(o.speed),
      },
    });
    const code = await child.exited;
    if (code !== 0) throw new Error(`${who} exited ${code}: ${child.stderr()}`);
    const db = new Database(join(dir, 'state.db'), { readonly: true });
    const rows = db
      .prepare(
        `SELECT task_id, body, finished_at,
           (SELECT min(at) FROM job_events e WHERE e.img_uuid = tasks.img_uuid AND e.status = 'success') AS seen_at
         FROM tasks WHERE state = 'done'`,
      )
      .all() as { task_id: string; body: string; finished_at: string; seen_at: string | null }[];
    db.close();
    const jobs = jobsByPrompt(sandbox);
    const finished = rows.flatMap((r): Finished[] => {
      const job = jobs.get((JSON.parse(r.body) as { prompt?: string }).prompt ?? '');
      const seen = r.seen_at === null ? {} : { seenAt: Date.parse(r.seen_at) };
      return job ? [{ taskId: r.task_id, ...job, doneAt: Date.parse(r.finished_at), ...seen }] : [];
    });
    return figuresOf(who, list, finished, sandbox, o, {
      byPolling: !extra.callbacks,
      longestFirst: extra.order !== 'manifest',
    });
  } finally {
    await sandbox.close();
    await rm(dir, { recursive: true, force: true });
  }
}

async function naiveRun(list: TaskDecl[], o: MakespanOptions): Promise<RunFigures> {
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-naive-'));
  const sandbox = await benchSandbox(o);
  try {
    const seen = new Map<string, number>();
    const done = await naiveLoop({
      seen,
      baseUrl: sandbox.baseUrl,
      key: KEY,
      dir,
      concurrency: o.concurrency,
      pollMs: 5_000 * o.speed,
      tasks: list.map((t) => ({ id: t.id, body: { model: t.model, ...t.input } })),
    });
    const jobs = jobsByPrompt(sandbox);
    const finished = list.flatMap((t): Finished[] => {
      const job = jobs.get(String(t.input.prompt));
      const doneAt = done.get(t.id);
      const seenAt = seen.get(t.id);
      return job && doneAt !== undefined
        ? [{ taskId: t.id, ...job, doneAt, ...(seenAt !== undefined ? { seenAt } : {}) }]
        : [];
    });
    return figuresOf('script polling every 5 s', list, finished, sandbox, o, {
      byPolling: true,
      longestFirst: false,
    });
  } finally {
    await sandbox.close();
    await rm(dir, { recursive: true, force: true });
  }
}

export async function measureMakespan(o: MakespanOptions): Promise<MakespanFigures> {
  const list = mixedTasks(o.tasks);
  const repeated: MakespanFigures['repeated'] = { polling: [], naive: [] };
  // Two at a time, each against its own sandbox: the naive script beside mediabatch, as the issue asks.
  for (let i = 0; i < (o.repetitions ?? 1); i++) {
    const [polling, naive] = await Promise.all([
      mediabatchRun('mediabatch polling', list, o, {}),
      naiveRun(list, o),
    ]);
    repeated.polling.push(polling);
    repeated.naive.push(naive);
  }
  const [manifestOrder, callbacks] = await Promise.all([
    mediabatchRun('mediabatch polling, --order manifest', list, o, { order: 'manifest' }),
    mediabatchRun('mediabatch with callbacks', list, o, { callbacks: true }),
  ]);
  const [polling, naive] = [repeated.polling[0], repeated.naive[0]];
  if (!polling || !naive) throw new Error('makespan: repetitions must be at least 1');
  const runs = [polling, manifestOrder, callbacks, naive];
  return {
    tasks: o.tasks,
    concurrency: o.concurrency,
    speed: o.speed,
    runs,
    longestFirstGain: round(polling.idealLongestMs / polling.idealListMs),
    repeated,
  };
}

/**
 * The repetitions in one line, beside the anchors of the same runs: the ideal (zero overhead, the same
 * jobs in the same order) and the 5 s polling script; the target must hold in every repetition.
 */
export function repetitionRow(f: MakespanFigures): [string, string, string] {
  const ours = f.repeated.polling.map((r) => r.ratio);
  const script = f.repeated.naive.map((r) => r.ratio);
  const ideals = f.repeated.polling.map((r) => round(r.idealLongestMs / 1000 / f.speed, 0));
  const worst = Math.max(...ours);
  return [
    `7 ${f.tasks} tasks, c${f.concurrency}, speed ${f.speed}: makespan / ideal, ${ours.length} repetitions`,
    `mediabatch polling ${ours.join(', ')} (worst ${worst}); 5 s script ${script.join(', ')}; ideal ${ideals.join(', ')} s at speed 1`,
    `<= ${MAKESPAN_TARGET} every time ${worst <= MAKESPAN_TARGET ? 'met' : 'NOT met'}`,
  ];
}

export function makespanLines(f: MakespanFigures): string[] {
  const lines = [`${f.tasks} tasks (1 video : 3 images), concurrency ${f.concurrency}, speed ${f.speed}`];
  for (const r of f.runs) {
    const toFile = Object.entries(r.toFile)
      .map(([kind, d]) => `${kind} ${round(d.medianMs / 1000, 1)}/${round(d.p95Ms / 1000, 1)} s`)
      .join(', ');
    lines.push(
      `  ${r.who}: ${r.ratio} x the ideal of its order, ${r.vsListIdeal} x list-order ideal, ${r.requestsPerTask} requests/task, success -> file median/p95 ${toFile}`,
    );
  }
  lines.push(`  longest-first ideal / list-order ideal: ${f.longestFirstGain}`);
  if (f.repeated.polling.length > 1) lines.push(`  ${repetitionRow(f).join('  ')}`);
  return lines;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      tasks: { type: 'string', default: '64' },
      concurrency: { type: 'string', default: '8' },
      speed: { type: 'string', default: '0.25' },
      repetitions: { type: 'string', default: '1' },
      json: { type: 'boolean', default: false },
      write: { type: 'boolean', default: false },
    },
  });
  const figures = await measureMakespan({
    tasks: Number(values.tasks),
    concurrency: Number(values.concurrency),
    speed: Number(values.speed),
    repetitions: Number(values.repetitions),
  });
  if (values.json) process.stdout.write(`${JSON.stringify(figures)}\n`);
  else for (const line of makespanLines(figures)) process.stdout.write(`${line}\n`);
  if (values.write) {
    // The configuration measured replaces its entry in the list (or joins it).
    const same = (m: MakespanFigures) =>
      m.tasks === figures.tasks && m.concurrency === figures.concurrency && m.speed === figures.speed;
    await writeResultsPart('makespan', (current) => {
      const list = Array.isArray(current) ? (current as MakespanFigures[]) : [];
      return list.some(same) ? list.map((m) => (same(m) ? figures : m)) : [...list, figures];
    });
  }
}
