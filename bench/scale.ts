// Figures 4 and 5: `plan` time and peak RSS at 10,000 and 100,000 tasks, `run` peak RSS at 10,000 and
// 100,000 (sandbox speed 0), the growth factors, then resume: the 100,000-task run's database with
// 1,000 more tasks (99 % done), from `run` start to the first new submission on the wire.
// The runner does a few hundred tasks a second here, so the 100,000-task run is stopped with SIGINT
// (a clean stop, exit 4) after RUN_100K_SECONDS: its peak RSS covers loading, checkpointing and
// driving all 100,000 tasks, and the tasks it did not reach are then marked done in SQL to prepare
// the resume figure.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { writeImagesManifest } from './lib/manifests.js';
import { cliMeasured, type Measured, round } from './lib/measure.js';
import { startTap } from './lib/tap.js';

const KEY = 'sandbox-key';
export const RSS_TARGET_MB = 300;
export const RUN_100K_SECONDS = 120;

export interface ScaleFigures {
  plan10kSeconds: number;
  plan10kPeakRssMb: number;
  plan100kSeconds: number;
  plan100kPeakRssMb: number;
  planGrowth: number;
  run10kSeconds: number;
  run10kPeakRssMb: number;
  run100kSeconds: number;
  /** Tasks done when the 100,000-task run was stopped. */
  run100kDone: number;
  run100kPeakRssMb: number;
  runGrowth: number;
  rssBy: string;
  resume: { tasks: number; done: number; toFirstSubmitSeconds: number; runSeconds: number };
}

function checked(what: string, m: Measured, ok: (number | string)[] = [0]): Measured {
  if (!ok.includes(m.code)) throw new Error(`${what} exited ${m.code}: ${m.stderr.slice(-2000)}`);
  return m;
}

export async function measureScale(sandboxUrl: string, log: (line: string) => void): Promise<ScaleFigures> {
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-scale-'));
  const env = { MEDIABATCH_API_KEY: KEY, MEDIABATCH_BASE_URL: sandboxUrl, MEDIABATCH_POLL_SCALE: '0.01' };
  try {
    const f10k = await writeImagesManifest(dir, { name: 's10k', count: 10_000 });
    const f100k = await writeImagesManifest(dir, { name: 's100k', count: 100_000 });
    // plan without credentials: no balance look-up, only the manifest and the prices.
    const plan10k = checked('plan 10k', await cliMeasured(['plan', f10k, '--no-probe'], { cwd: dir }));
    log(`plan 10k: ${round(plan10k.ms / 1000)} s, ${plan10k.peakRssMb} MB`);
    const plan100k = checked('plan 100k', await cliMeasured(['plan', f100k, '--no-probe'], { cwd: dir }));
    log(`plan 100k: ${round(plan100k.ms / 1000)} s, ${plan100k.peakRssMb} MB`);
    // --allow-partial: the preflight expects about 4 MB an image (390 GB for 100,000), more than a bench machine has free.
    const runArgs = (file: string, db: string) => [
      '--state',
      db,
      'run',
      file,
      '--yes',
      '--no-probe',
      '--allow-partial',
    ];
    const run10k = checked('run 10k', await cliMeasured(runArgs(f10k, 's10k.db'), { cwd: dir, env }));
    log(`run 10k: ${round(run10k.ms / 1000)} s, ${run10k.peakRssMb} MB`);
    const run100k = checked(
      'run 100k',
      await cliMeasured(runArgs(f100k, 's100k.db'), {
        cwd: dir,
        env,
        interruptAfterMs: RUN_100K_SECONDS * 1000,
      }),
      [0, 4],
    );
    const run100kDone = prepareResume(join(dir, 's100k.db'));
    log(`run 100k: ${round(run100k.ms / 1000)} s, ${run100kDone} done, ${run100k.peakRssMb} MB`);

    // 1,000 more tasks under the same run: 100,000 of 101,000 are done.
    await writeImagesManifest(dir, { name: 's100k', count: 101_000 });
    const tap = await startTap(sandboxUrl);
    let resume: Measured;
    const start = performance.now();
    try {
      resume = checked(
        'resume',
        await cliMeasured(runArgs(f100k, 's100k.db'), {
          cwd: dir,
          env: { ...env, MEDIABATCH_BASE_URL: tap.baseUrl },
        }),
      );
    } finally {
      await tap.close();
    }
    const first = tap.firstSubmitAt();
    log(`resume: first submission after ${first === undefined ? '?' : round((first - start) / 1000)} s`);
    return {
      plan10kSeconds: round(plan10k.ms / 1000),
      plan10kPeakRssMb: plan10k.peakRssMb,
      plan100kSeconds: round(plan100k.ms / 1000),
      plan100kPeakRssMb: plan100k.peakRssMb,
      planGrowth: round(plan100k.peakRssMb / plan10k.peakRssMb),
      run10kSeconds: round(run10k.ms / 1000),
      run10kPeakRssMb: run10k.peakRssMb,
      run100kSeconds: round(run100k.ms / 1000),
      run100kDone,
      run100kPeakRssMb: run100k.peakRssMb,
      runGrowth: round(run100k.peakRssMb / run10k.peakRssMb),
      rssBy: run100k.rssBy,
      resume: {
        tasks: 101_000,
        done: 100_000,
        toFirstSubmitSeconds: first === undefined ? Number.NaN : round((first - start) / 1000),
        runSeconds: round(resume.ms / 1000),
      },
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Marks every task the stopped run did not finish as done; returns how many the run itself finished. */
function prepareResume(file: string): number {
  const db = new Database(file);
  try {
    const done = db.prepare("SELECT count(*) AS n FROM tasks WHERE state = 'done'").get() as { n: number };
    db.prepare("UPDATE tasks SET state = 'done' WHERE state <> 'done'").run();
    db.prepare('DELETE FROM leases').run();
    // The resume goes through a tap (another address): unbind the run from the API it was started with,
    // as a run made before runs were bound, so that it binds to the tap instead of being refused.
    db.prepare('UPDATE runs SET api_base_url = NULL, key_fingerprint = NULL').run();
    return done.n;
  } finally {
    db.close();
  }
}
