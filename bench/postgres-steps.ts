// The PostgreSQL steps of `npm run bench`: a run planned into PostgreSQL and a worker's memory on a new
// run of as many tasks (bench/postgres-plan.ts), the runner on PostgreSQL against SQLite
// (bench/postgres.ts), the fleet's sizing figures (bench/fleet-sizing.ts) and one worker against two on
// one run (bench/fleet.ts), the last three in processes of their own as when run alone. Skipped with one
// line where PostgreSQL's server programs or the libpq client are missing.
import { execFileSync } from 'node:child_process';
import { REPO } from '../test/helpers/child.js';
import { measurePlanInto, type PlanIntoFigures, postgresMissing } from './postgres-plan.js';

export interface PostgresFigures {
  skipped?: string;
  plan?: PlanIntoFigures;
  runner?: {
    tasks: number;
    pointReadMicros: { sqlite: number; postgres: number };
    tasksPerSecond: { sqlite: number; postgres: number };
    ratio: number;
    /** libpq calls per task on PostgreSQL, by kind. */
    roundTripsPerTask: Record<string, number>;
  };
  sizing?: {
    tasks: number;
    bytesPerTask: number;
    walBytesPerTask: number;
    claimsPerSecond: { oneClient: number; twoClients: number };
    /** Through the store (claim, intent, answer) with its current locks, per worker process. */
    storeTasksPerSecond: { oneWorker: number; twoWorkersOneRun: number; twoWorkersTwoRuns: number };
    workerCpuMsPerTask: number;
    serverCpuMsPerTask: number;
    connectionsOfTwoWorkers: number;
    lockWaitPercent: { oneWorker: number; twoWorkersOneRun: number; twoWorkersTwoRuns: number };
  };
  fleet?: {
    tasks: number;
    concurrency: number;
    tasksPerSecond: { oneWorker: number; twoWorkers: number };
    ratio: number;
    steadyRatio: number;
    /** Cores the run kept busy (workers, PostgreSQL, sandbox), and the machine's. */
    coresBusy: { oneWorker: number; twoWorkers: number; machine: number };
    /** Two workers on the machine ÷ one worker with the whole run held to one core. */
    coreScaling: number;
    claimMicrosPerTask: number;
    tasksPerCpuSecond: { oneWorker: number; twoWorkers: number };
  };
}

/** A bench script's figures: the JSON of its last line of output. */
function script<T>(file: string, args: string[]): T {
  const out = execFileSync(process.execPath, ['--import', 'tsx', file, ...args], {
    cwd: REPO,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return JSON.parse(out.trim().split('\n').pop() ?? '{}') as T;
}

export async function measurePostgres(
  sandboxUrl: string,
  o: { planTasks: number; log: (line: string) => void },
): Promise<PostgresFigures> {
  const missing = postgresMissing();
  if (missing !== undefined) {
    o.log(`PostgreSQL steps skipped: ${missing}`);
    return { skipped: missing };
  }
  o.log(
    `13 ${o.planTasks.toLocaleString('en-US')} tasks planned into PostgreSQL (run --limit 1), and into SQLite; a worker's memory`,
  );
  const plan = await measurePlanInto(sandboxUrl, o.planTasks, { log: o.log });
  o.log('14 the runner on PostgreSQL against SQLite, 5,000 tasks, concurrency 64');
  const runner = script<NonNullable<PostgresFigures['runner']>>('bench/postgres.ts', ['5000', '64']);
  o.log("15 the fleet on paper: bytes and WAL per task, SKIP LOCKED claims per second, the store's turns");
  const sizing = script<NonNullable<PostgresFigures['sizing']>>('bench/fleet-sizing.ts', ['2000']);
  // 1,000 tasks keep the step to about a minute; `npx tsx bench/fleet.ts 5000 64` is the size.
  o.log('16 one worker against two on one run, 1,000 images, concurrency 64');
  const fleet = script<NonNullable<PostgresFigures['fleet']>>('bench/fleet.ts', ['1000', '64']);
  return { plan, runner, sizing, fleet };
}

/** The table's rows for the PostgreSQL figures (one row saying why, when they were skipped). */
export function postgresRows(f: PostgresFigures): [string, string, string][] {
  const mark = (ok: boolean) => (ok ? 'met' : 'NOT met');
  if (f.skipped !== undefined || !f.plan || !f.runner || !f.sizing || !f.fleet) {
    return [['13-16 PostgreSQL', `skipped: ${f.skipped ?? 'no figures'}`, '']];
  }
  const { plan, runner, sizing, fleet } = f;
  const million = plan.tasks >= 1_000_000;
  return [
    [
      `13 ${plan.tasks.toLocaleString('en-US')} tasks planned into PostgreSQL (run --limit 1: every task stored first)`,
      `${plan.postgres.seconds} s, ${plan.postgres.peakRssMb} MB (${plan.postgres.stored.toLocaleString('en-US')} stored), CPU ${plan.postgres.cpuSeconds} s + server ${plan.postgres.serverCpuSeconds} s; SQLite ${plan.sqlite.seconds} s, ${plan.sqlite.peakRssMb} MB, CPU ${plan.sqlite.cpuSeconds} s`,
      million ? `< 60 s ${mark(plan.postgres.seconds < 60)}` : '(1,000,000: npm run bench -- --million)',
    ],
    [
      `13 a worker on a new PostgreSQL run of ${plan.tasks.toLocaleString('en-US')} tasks (run, stopped after 15 s of submitting)`,
      `${plan.worker.peakRssMb} MB; first submission ${plan.worker.toFirstSubmitSeconds} s, ${plan.worker.submitsPerSecond}/s, Ctrl-C to exit ${plan.worker.exitSeconds} s`,
      million ? `< 300 MB ${mark(plan.worker.peakRssMb < 300)}` : '',
    ],
    [
      '14 runner on PostgreSQL / on SQLite (5,000 images, concurrency 64, best of 2 each)',
      `${runner.ratio} (${runner.tasksPerSecond.postgres} / ${runner.tasksPerSecond.sqlite} tasks/s); a point read ${runner.pointReadMicros.postgres} / ${runner.pointReadMicros.sqlite} µs; ${runner.roundTripsPerTask.total} round trips a task`,
      `>= 0.8 ${mark(runner.ratio >= 0.8)}`,
    ],
    [
      `15 fleet sizing (${sizing.tasks.toLocaleString('en-US')} tasks): bytes / WAL per task; SKIP LOCKED claims/s, 1 / 2 clients; the store's claim + intent + answer, tasks/s: 1 worker / 2 on one run / 2 on two runs`,
      `${sizing.bytesPerTask} / ${sizing.walBytesPerTask} B; ${sizing.claimsPerSecond.oneClient} / ${sizing.claimsPerSecond.twoClients}; ${sizing.storeTasksPerSecond.oneWorker} / ${sizing.storeTasksPerSecond.twoWorkersOneRun} / ${sizing.storeTasksPerSecond.twoWorkersTwoRuns}`,
      '',
    ],
    [
      `16 two workers / one worker on one run (${fleet.tasks.toLocaleString('en-US')} images, concurrency ${fleet.concurrency}, best of 2 each)`,
      `${fleet.ratio}, steady ${fleet.steadyRatio} (${fleet.tasksPerSecond.twoWorkers} / ${fleet.tasksPerSecond.oneWorker} tasks/s; ${fleet.tasksPerCpuSecond.twoWorkers} / ${fleet.tasksPerCpuSecond.oneWorker} tasks per CPU-second; ${fleet.coresBusy.twoWorkers} / ${fleet.coresBusy.oneWorker} of ${fleet.coresBusy.machine} cores busy); against one worker held to one core ${fleet.coreScaling}; a claim ${fleet.claimMicrosPerTask} µs per task`,
      `>= 1.3 ${mark(fleet.ratio >= 1.3)}`,
    ],
  ];
}
