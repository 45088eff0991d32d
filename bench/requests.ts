// Figure 3: requests per task (submits, polls, downloads) with realistic job times, and how long after
// a job's success in the sandbox the runner records it (median, p95), by polling alone and with callbacks.
// Job times and polling are both scaled by 0.1 (sandbox speed 0.1, MEDIABATCH_POLL_SCALE=0.1): the
// counts are those of speed 1, the delays are a tenth of theirs at speed 1.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { stringify } from 'yaml';
import { startSandbox } from '../src/sandbox/server.js';
import { spawnCli } from '../test/helpers/child.js';
import { quantile, round } from './lib/measure.js';
import { freePort } from './lib/tap.js';

export const TIME_SCALE = 0.1;
const KEY = 'sandbox-key';

export interface RequestFigures {
  mode: 'polling' | 'callbacks';
  tasks: number;
  submitsPerTask: number;
  pollsPerTask: number;
  downloadsPerTask: number;
  /** Success in the sandbox -> recorded by the runner, in ms at speed 0.1. */
  noticeMedianMs: number;
  noticeP95Ms: number;
  /** The same delays at speed 1: polling delays divided by the time scale; callback delays as measured. */
  noticeMedianMsAtSpeed1: number;
  noticeP95MsAtSpeed1: number;
  byCallback: number;
}

function tasks() {
  return [
    ...Array.from({ length: 24 }, (_, i) => ({
      id: `img-${i + 1}`,
      model: 'flat-image',
      input: { prompt: `a realistic product shot ${i + 1}` },
    })),
    ...Array.from({ length: 12 }, (_, i) => ({
      id: `line-${i + 1}`,
      model: 'speech-v3',
      input: { text: `Voice line number ${i + 1} for the bench.` },
    })),
  ];
}

export async function measureRequests(mode: 'polling' | 'callbacks'): Promise<RequestFigures> {
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-req-'));
  // A short tick so a callback leaves when the job ends, not up to 250 ms later.
  const sandbox = await startSandbox({ port: 0, speed: TIME_SCALE, seed: 3, apiKey: KEY, tickMs: 10 });
  try {
    const list = tasks();
    await writeFile(
      join(dir, 'req.yaml'),
      stringify({ version: 1, name: 'req', concurrency: 64, output: 'out', tasks: list }),
    );
    const extra: string[] = [];
    if (mode === 'callbacks') {
      const port = await freePort();
      extra.push('--listen', `127.0.0.1:${port}`, '--callback-url', `http://127.0.0.1:${port}`);
    }
    const child = spawnCli(['--state', 'state.db', 'run', 'req.yaml', '--yes', '--no-probe', ...extra], {
      cwd: dir,
      env: {
        MEDIABATCH_API_KEY: KEY,
        MEDIABATCH_BASE_URL: sandbox.baseUrl,
        MEDIABATCH_POLL_SCALE: String(TIME_SCALE),
      },
    });
    const code = await child.exited;
    if (code !== 0) throw new Error(`run (${mode}) exited ${code}: ${child.stderr()}`);
    const { requests } = sandbox.state();
    const db = new Database(join(dir, 'state.db'), { readonly: true });
    const events = db.prepare("SELECT at, source, record FROM job_events WHERE status = 'success'").all() as {
      at: string;
      source: string;
      record: string;
    }[];
    db.close();
    const delays = events.map((e) => {
      const end = (JSON.parse(e.record) as { end_time?: string }).end_time ?? e.at;
      return Date.parse(e.at) - Date.parse(end);
    });
    const median = quantile(delays, 0.5);
    const p95 = quantile(delays, 0.95);
    // A poll-driven delay grows with the poll interval (scaled by 0.1 here); a callback's does not.
    const toSpeed1 = mode === 'polling' ? 1 / TIME_SCALE : 1;
    return {
      mode,
      tasks: list.length,
      submitsPerTask: round(requests.submit / list.length),
      pollsPerTask: round(requests.poll / list.length),
      downloadsPerTask: round(requests.download / list.length),
      noticeMedianMs: round(median, 0),
      noticeP95Ms: round(p95, 0),
      noticeMedianMsAtSpeed1: round(median * toSpeed1, 0),
      noticeP95MsAtSpeed1: round(p95 * toSpeed1, 0),
      byCallback: events.filter((e) => e.source === 'callback').length,
    };
  } finally {
    await sandbox.close();
    await rm(dir, { recursive: true, force: true });
  }
}
