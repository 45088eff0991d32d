// Figure 2: the runner end to end (plan, checkpoint, submit, poll, download, fsync) against a bare
// undici loop in the same process that makes the same requests and keeps nothing: our overhead.
import { mkdir, mkdtemp, open, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Agent, request } from 'undici';
import { cliInProcess } from './lib/in-process.js';
import { writeImagesManifest } from './lib/manifests.js';
import { round } from './lib/measure.js';

export interface ThroughputFigures {
  tasks: number;
  concurrency: number;
  runnerSeconds: number;
  runnerTasksPerSecond: number;
  bareSeconds: number;
  bareTasksPerSecond: number;
  /** runner / bare: information only (a loop that writes nothing). */
  ratio: number;
  /** The lean durable loop: the same requests and the same durable work, hand-written. */
  leanSeconds: number;
  leanTasksPerSecond: number;
  /** runner / lean durable loop, end to end (start-up, plan, store, preflight and report included). */
  leanRatio: number;
  /** The runner alone: from its first submission to its last task done (`run --json` events). */
  runnerPhaseSeconds: number;
  /** runner alone / lean durable loop: what the target (>= 0.8) compares, loop against loop. */
  leanPhaseRatio: number;
  pollScale: number;
}

interface PlannedTask {
  endpoint: string;
  body: Record<string, unknown>;
}

const KEY = 'sandbox-key';
/** Polling is scaled like the tests do: the figure is the bookkeeping, not a sleep before the first look. */
const POLL_SCALE = 0.01;

export async function measureThroughput(sandboxUrl: string, tasks = 5000, concurrency = 64) {
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-tp-'));
  try {
    const file = await writeImagesManifest(dir, { name: 'throughput', count: tasks, concurrency });
    const env = {
      MEDIABATCH_API_KEY: KEY,
      MEDIABATCH_BASE_URL: sandboxUrl,
      MEDIABATCH_POLL_SCALE: String(POLL_SCALE),
    };
    const planned = await cliInProcess(['plan', file, '--json', '--no-probe'], dir, env);
    if (planned.code !== 0) throw new Error(`plan failed: ${planned.stderr}`);
    const bodies = (JSON.parse(planned.stdout) as { tasks: PlannedTask[] }).tasks;

    // The bare loop first, so that the runner does not benefit from a warmer sandbox.
    const bareStart = performance.now();
    await bareLoop(sandboxUrl, bodies, concurrency);
    const bareSeconds = (performance.now() - bareStart) / 1000;
    const leanStart = performance.now();
    await bareLoop(sandboxUrl, bodies, concurrency, await leanDurable(join(dir, 'lean')));
    const leanSeconds = (performance.now() - leanStart) / 1000;

    const start = performance.now();
    const run = await cliInProcess(
      [
        '--state',
        join(dir, 'state.db'),
        'run',
        file,
        '--yes',
        '--no-probe',
        '--concurrency',
        String(concurrency),
        '--json',
      ],
      dir,
      env,
    );
    const runnerSeconds = (performance.now() - start) / 1000;
    if (run.code !== 0) throw new Error(`run exited ${run.code}: ${run.stderr}`);
    const runnerPhaseSeconds = runnerPhase(run.stdout);
    return {
      tasks,
      concurrency,
      runnerSeconds: round(runnerSeconds),
      runnerTasksPerSecond: round(tasks / runnerSeconds, 0),
      bareSeconds: round(bareSeconds),
      bareTasksPerSecond: round(tasks / bareSeconds, 0),
      ratio: round(bareSeconds / runnerSeconds),
      leanSeconds: round(leanSeconds),
      leanTasksPerSecond: round(tasks / leanSeconds, 0),
      leanRatio: round(leanSeconds / runnerSeconds),
      runnerPhaseSeconds: round(runnerPhaseSeconds),
      leanPhaseRatio: round(leanSeconds / runnerPhaseSeconds),
      pollScale: POLL_SCALE,
    } satisfies ThroughputFigures;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Seconds from the first `submitted` event to the last `done` one of `run --json`'s output. */
function runnerPhase(ndjson: string): number {
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  for (const line of ndjson.split('\n')) {
    if (!line.startsWith('{')) continue;
    const event = JSON.parse(line) as { event?: string; at?: string };
    const at = Date.parse(event.at ?? '');
    if (event.event === 'submitted') first = Math.min(first, at);
    if (event.event === 'done') last = Math.max(last, at);
  }
  if (!Number.isFinite(first) || !Number.isFinite(last))
    throw new Error('run --json: no submitted/done events');
  return (last - first) / 1000;
}

interface Envelope {
  code: number;
  data?: { img_uuid?: string; status?: string; json?: { value?: string }[] | null };
}

/** What the lean durable loop does at each commit point; the bare loop does nothing. */
interface Durable {
  intent(task: number): void;
  answer(task: number, id: string): void;
  file(task: number, n: number, body: AsyncIterable<Buffer>): Promise<void>;
  done(task: number): void;
  close(): void;
}

/**
 * The least a durable script must do, hand-written: WAL + synchronous=FULL, the intent committed before
 * the POST, the answer after it, each file to a `.part` that is fsynced then renamed (and its folder
 * fsynced), the task's end committed. No checks, no names, no hashes, no events: the floor for our work.
 */
async function leanDurable(dir: string): Promise<Durable> {
  await mkdir(dir, { recursive: true });
  const db = new Database(join(dir, 'lean.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, uuid TEXT, state TEXT NOT NULL)');
  const intent = db.prepare("INSERT INTO t (id, state) VALUES (?, 'submitting')");
  const answer = db.prepare("UPDATE t SET uuid = ?, state = 'running' WHERE id = ?");
  const done = db.prepare("UPDATE t SET state = 'done' WHERE id = ?");
  return {
    intent: (task) => void intent.run(task),
    answer: (task, id) => void answer.run(id, task),
    async file(task, n, body) {
      const folder = join(dir, String(task));
      await mkdir(folder, { recursive: true });
      const final = join(folder, `${n}.png`);
      const part = `${final}.part`;
      const handle = await open(part, 'w');
      try {
        for await (const chunk of body) await handle.write(chunk);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(part, final);
      const folderHandle = await open(folder, 'r');
      await folderHandle.sync();
      await folderHandle.close();
    },
    done: (task) => void done.run(task),
    close: () => db.close(),
  };
}

/**
 * Submit, poll until done, download every file; `concurrency` tasks at a time. Without `durable`, the files
 * go nowhere and nothing is kept (the bare loop).
 */
async function bareLoop(
  baseUrl: string,
  tasks: PlannedTask[],
  concurrency: number,
  durable?: Durable,
): Promise<void> {
  // Like the runner's client: one Agent of 16 connections for the API, the global one for downloads.
  const api = new Agent({ connections: 16 });
  const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < tasks.length; i = next++) {
      const task = tasks[i];
      if (!task) continue;
      durable?.intent(i);
      const submitted = await request(`${baseUrl}${task.endpoint}`, {
        method: 'POST',
        headers,
        body: JSON.stringify(task.body),
        dispatcher: api,
      });
      const answer = (await submitted.body.json()) as Envelope;
      const id = answer.data?.img_uuid;
      if (answer.code !== 0 || !id)
        throw new Error(`bare loop: submission refused: ${JSON.stringify(answer)}`);
      durable?.answer(i, id);
      for (;;) {
        const polled = await request(`${baseUrl}/api/v1/jobs/detail?img_uuid=${id}`, {
          headers,
          dispatcher: api,
        });
        const job = (await polled.body.json()) as Envelope;
        if (job.data?.status === 'success') {
          let n = 0;
          for (const item of job.data.json ?? []) {
            if (!item.value?.startsWith('http')) continue;
            const file = await request(item.value);
            if (durable) {
              await durable.file(i, n++, file.body);
              continue;
            }
            for await (const _chunk of file.body) {
              // Read and dropped: no disk, no hash, no bookkeeping.
            }
          }
          durable?.done(i);
          break;
        }
        if (job.data?.status === 'failed') break;
        await new Promise((r) => setTimeout(r, 5));
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, worker));
  } finally {
    await api.close();
    durable?.close();
  }
}
