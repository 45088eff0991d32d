// Figure 2: the runner end to end (plan, checkpoint, submit, poll, download, fsync) against a bare
// undici loop in the same process that makes the same requests and keeps nothing: our overhead.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
  /** runner / bare; target >= 0.8. */
  ratio: number;
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
      ],
      dir,
      env,
    );
    const runnerSeconds = (performance.now() - start) / 1000;
    if (run.code !== 0) throw new Error(`run exited ${run.code}: ${run.stderr}`);
    return {
      tasks,
      concurrency,
      runnerSeconds: round(runnerSeconds),
      runnerTasksPerSecond: round(tasks / runnerSeconds, 0),
      bareSeconds: round(bareSeconds),
      bareTasksPerSecond: round(tasks / bareSeconds, 0),
      ratio: round(bareSeconds / runnerSeconds),
      pollScale: POLL_SCALE,
    } satisfies ThroughputFigures;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

interface Envelope {
  code: number;
  data?: { img_uuid?: string; status?: string; json?: { value?: string }[] | null };
}

/** Submit, poll until done, download every file (to nowhere); `concurrency` tasks at a time. */
async function bareLoop(baseUrl: string, tasks: PlannedTask[], concurrency: number): Promise<void> {
  // Like the runner's client: one Agent of 16 connections for the API, the global one for downloads.
  const api = new Agent({ connections: 16 });
  const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < tasks.length; i = next++) {
      const task = tasks[i];
      if (!task) continue;
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
      for (;;) {
        const polled = await request(`${baseUrl}/api/v1/jobs/detail?img_uuid=${id}`, {
          headers,
          dispatcher: api,
        });
        const job = (await polled.body.json()) as Envelope;
        if (job.data?.status === 'success') {
          for (const item of job.data.json ?? []) {
            if (!item.value?.startsWith('http')) continue;
            const file = await request(item.value);
            for await (const _chunk of file.body) {
              // Read and dropped: no disk, no hash, no bookkeeping.
            }
          }
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
  }
}
