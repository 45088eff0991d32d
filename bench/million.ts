// At scale: `validate` start-up, and for a batch of `big` flat-image tasks (1,000,000 in
// `npm run bench`) against one of `small` (100,000): `plan` time and peak memory, `run` from start to the
// first submission, submissions per second once running (big against small), peak memory, Ctrl-C to
// exit, and `status` of the big run. The sandbox runs at speed 0 in a process of its own.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { cliArgv } from '../test/helpers/child.js';
import { writeImagesManifest } from './lib/manifests.js';
import { cliMeasured, round, type SpawnMeasuredOptions, spawnMeasured } from './lib/measure.js';

const KEY = 'sandbox-key';

export interface MillionOptions {
  big: number;
  small: number;
  /** How long the submission rate is measured, once the first submission is seen. */
  rateSeconds: number;
  /**
   * Default true: the compiled CLI, as installed. The slice in `npm test` runs the sources instead, so
   * that it never rebuilds dist/ while another test packs it.
   */
  compiled?: boolean;
}

export interface RunAtScale {
  tasks: number;
  toFirstSubmitSeconds: number;
  submitsPerSecond: number;
  /** From SIGINT to the process's exit. */
  exitSeconds: number;
  peakRssMb: number;
  code: number | string;
  /** The end of the worker's stderr when it exited other than 0 or 4 (interrupted): why it did. */
  stderr?: string;
}

export interface MillionFigures {
  validateSeconds: number;
  plan: { tasks: number; seconds: number; peakRssMb: number };
  small: RunAtScale;
  big: RunAtScale;
  /** Submissions per second at `big` over those at `small`: target >= 0.8. */
  rateRatio: number;
  status: { seconds: number; peakRssMb: number };
}

function cli(args: string[], opts: SpawnMeasuredOptions, o: MillionOptions) {
  return o.compiled === false ? spawnMeasured(cliArgv(args), opts) : cliMeasured(args, opts);
}

async function submissions(baseUrl: string): Promise<number> {
  const res = await request(`${baseUrl}/_sandbox/state`);
  return ((await res.body.json()) as { requests: { submit: number } }).requests.submit;
}

/**
 * A worker: `run` of a new `tasks`-task manifest at speed 0, stopped by Ctrl-C once it has submitted for
 * `rateSeconds`. Its state is a SQLite file named after the count, or `state` (a PostgreSQL URL, with
 * `extra` flags such as --allow-local-output).
 */
export async function runAtScale(
  dir: string,
  file: string,
  tasks: number,
  env: Record<string, string>,
  o: MillionOptions & { state?: string; extra?: string[] },
): Promise<RunAtScale> {
  const before = await submissions(env.MEDIABATCH_BASE_URL ?? '');
  let interrupt: (() => void) | undefined;
  const started = performance.now();
  const running = cli(
    [
      '--state',
      o.state ?? `${tasks}.db`,
      'run',
      file,
      '--yes',
      '--no-probe',
      '--allow-partial',
      ...(o.extra ?? []),
    ],
    {
      cwd: dir,
      env,
      interrupter: (send) => {
        interrupt = send;
      },
    },
    o,
  );
  let ended = false;
  void running.then(() => {
    ended = true;
  });
  let first = before;
  while (!ended) {
    first = await submissions(env.MEDIABATCH_BASE_URL ?? '');
    if (first !== before) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const firstAt = performance.now();
  await new Promise((r) => setTimeout(r, o.rateSeconds * 1000));
  const after = await submissions(env.MEDIABATCH_BASE_URL ?? '');
  const interruptAt = performance.now();
  interrupt?.();
  const m = await running;
  return {
    tasks,
    toFirstSubmitSeconds: round((firstAt - started) / 1000),
    submitsPerSecond: round((after - first) / o.rateSeconds, 0),
    exitSeconds: round((started + m.ms - interruptAt) / 1000),
    peakRssMb: m.peakRssMb,
    code: m.code,
    ...(m.code === 0 || m.code === 4 ? {} : { stderr: m.stderr.slice(-2500) }),
  };
}

export async function measureMillion(
  sandboxUrl: string,
  o: MillionOptions,
  log: (line: string) => void = () => {},
): Promise<MillionFigures> {
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-1m-'));
  const env = { MEDIABATCH_API_KEY: KEY, MEDIABATCH_BASE_URL: sandboxUrl, MEDIABATCH_POLL_SCALE: '0.01' };
  try {
    const tiny = await writeImagesManifest(dir, { name: 'tiny', count: 3 });
    let validateMs = Number.POSITIVE_INFINITY;
    for (let i = 0; i < 3; i++) {
      validateMs = Math.min(validateMs, (await cli(['validate', tiny], { cwd: dir }, o)).ms);
    }
    log(`validate: ${round(validateMs / 1000)} s`);
    const bigFile = await writeImagesManifest(dir, { name: 'big', count: o.big });
    const smallFile = await writeImagesManifest(dir, { name: 'small', count: o.small });
    const plan = await cli(['plan', bigFile, '--no-probe'], { cwd: dir }, o);
    if (plan.code !== 0) throw new Error(`plan exited ${plan.code}: ${plan.stderr.slice(-500)}`);
    log(`plan ${o.big}: ${round(plan.ms / 1000)} s, ${plan.peakRssMb} MB`);
    const small = await runAtScale(dir, smallFile, o.small, env, o);
    log(`run ${o.small}: ${JSON.stringify(small)}`);
    const big = await runAtScale(dir, bigFile, o.big, env, o);
    log(`run ${o.big}: ${JSON.stringify(big)}`);
    const status = await cli(['--state', `${o.big}.db`, 'status', 'big'], { cwd: dir }, o);
    if (status.code !== 0) throw new Error(`status exited ${status.code}: ${status.stderr.slice(-500)}`);
    return {
      validateSeconds: round(validateMs / 1000),
      plan: { tasks: o.big, seconds: round(plan.ms / 1000), peakRssMb: plan.peakRssMb },
      small,
      big,
      rateRatio: round(big.submitsPerSecond / Math.max(1, small.submitsPerSecond)),
      status: { seconds: round(status.ms / 1000), peakRssMb: status.peakRssMb },
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
