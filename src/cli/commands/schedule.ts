import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import type { Config } from '../../config.js';
import { formatProblem, loadManifest } from '../../manifest/index.js';
import { chooseRun } from '../../run/resume.js';
import {
  CronSchedule,
  checkPeriodBudget,
  type Firing,
  type FiringResult,
  type ManifestSchedule,
  realTimers,
  Scheduler,
  type Timers,
} from '../../schedule/index.js';
import { leaseHolder, openStore, periodOf, type Store } from '../../store/index.js';
import type { Logger } from '../../util/log.js';
import { scrub } from '../../util/secrets.js';
import { EXIT, ExitError } from '../errors.js';
import type { CliIO } from '../io.js';
import { makeMeasure } from '../wiring.js';
import { buildPlan } from './plan.js';
import { type RunFlags, runCommand } from './run.js';

export interface ScheduleFlags {
  catchUp?: boolean;
  allowPartial?: boolean;
  concurrency?: number;
  probe?: boolean;
}

export interface ScheduleContext {
  io: CliIO;
  config: Config;
  statePath: string;
  logger: Logger;
  /** Tests pass a fake; the default waits in real time. */
  timers?: Timers;
  /** Passed on to each run (tests shorten polling). */
  pollScale?: number;
  /** Called once the scheduler is armed (tests drive it from here). */
  onStarted?: (scheduler: Scheduler) => void;
}

/** Long-lived: fires each manifest's `schedule` as a run until SIGTERM/SIGINT. */
export async function scheduleCommand(
  files: string[],
  flags: ScheduleFlags,
  ctx: ScheduleContext,
): Promise<number> {
  const { io, config } = ctx;
  const manifests = await loadSchedules(files, io);
  if (!config.apiKey) {
    throw new ExitError(
      EXIT.invalid,
      'no API key: set MEDIABATCH_API_KEY in the environment of mediabatch schedule',
    );
  }
  if (!config.baseUrl) {
    throw new ExitError(
      EXIT.invalid,
      'no API base URL: set MEDIABATCH_BASE_URL or base_url in mediabatch.config.yaml',
    );
  }
  const store = openStore(resolve(io.cwd, ctx.statePath), { now: io.now });
  try {
    const scheduler = new Scheduler(
      manifests,
      {
        store,
        now: io.now,
        timers: ctx.timers ?? realTimers,
        fire: (firing) => fireRun(firing, flags, ctx, store),
        logger: ctx.logger,
        out: (line) => io.stdout.write(`${scrub(line)}\n`),
        holder: leaseHolder(process.pid, hostname(), randomBytes(4).toString('hex')),
      },
      { catchUp: flags.catchUp ?? false },
    );
    const onTerm = () => scheduler.stop('SIGTERM');
    const onInt = () => scheduler.stop('SIGINT');
    io.signals?.on('SIGTERM', onTerm);
    io.signals?.on('SIGINT', onInt);
    try {
      io.stdout.write(
        `mediabatch schedule: watching ${manifests.length} manifest(s); stop with Ctrl-C or SIGTERM\n`,
      );
      scheduler.start();
      ctx.onStarted?.(scheduler);
      const summary = await scheduler.finished();
      if (summary.interrupted.length > 0) {
        throw new ExitError(
          EXIT.interrupted,
          `stopped; interrupted run(s) ${summary.interrupted.join(', ')} are resumable: run the manifest again with the same run id (\`mediabatch run\`), nothing is charged twice`,
        );
      }
      io.stdout.write('mediabatch schedule: stopped\n');
      return EXIT.ok;
    } finally {
      io.signals?.off('SIGTERM', onTerm);
      io.signals?.off('SIGINT', onInt);
    }
  } finally {
    store.close();
  }
}

/** Every manifest must load and carry a valid schedule; all problems are reported at once. */
async function loadSchedules(files: string[], io: CliIO): Promise<ManifestSchedule[]> {
  const out: ManifestSchedule[] = [];
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const file of files) {
    const path = resolve(io.cwd, file);
    if (seen.has(path)) continue;
    seen.add(path);
    const loaded = await loadManifest(file, { now: io.now(), cwd: io.cwd });
    if (!loaded.ok) {
      problems.push(...loaded.problems.map(formatProblem));
      continue;
    }
    const { schedule, timezone } = loaded.manifest.settings;
    if (schedule === undefined) {
      problems.push(
        `${file}: schedule: missing: add e.g. \`schedule: "0 3 * * *"\` to the manifest, or start it with \`mediabatch run\``,
      );
      continue;
    }
    const parsed = CronSchedule.parse(schedule, timezone ?? 'UTC');
    if (!parsed.ok) {
      problems.push(`${file}: ${parsed.message}`);
      continue;
    }
    out.push({ path, label: file, schedule: parsed.schedule });
  }
  if (problems.length > 0) {
    throw new ExitError(
      EXIT.invalid,
      `${problems.length} problem(s) in the manifests to schedule; fix them and start again`,
      problems,
    );
  }
  return out;
}

/**
 * One firing: the run id and worst case from the plan at the firing time, the period budget from the
 * ledger, then the same `run` a person would start, without a terminal.
 */
async function fireRun(
  firing: Firing,
  flags: ScheduleFlags,
  ctx: ScheduleContext,
  store: Store,
): Promise<FiringResult> {
  const io: CliIO = { ...ctx.io, now: () => firing.at, interactive: false, signals: firing.signals };
  let runId: string | undefined;
  try {
    const plan = await buildPlan(firing.manifestPath, {
      io,
      config: ctx.config,
      ...(flags.probe === false ? {} : { measure: makeMeasure() }),
    });
    const settings = plan.manifest.settings;
    // What a firing left unfinished is finished first: a new dated run must not pay again for it.
    runId = chooseRun(store, {
      manifestPath: resolve(io.cwd, firing.manifestPath),
      manifestName: settings.name,
      templateRunId: settings.runId,
    }).runId;
    let budgetCap: number | undefined;
    if (settings.budgetPerPeriod !== undefined) {
      const period = periodOf(firing.at);
      const decision = checkPeriodBudget({
        cap: settings.budgetPerPeriod,
        spent: store.manifestSpent(firing.manifestPath, period).net,
        worstCase: worstCase(store, runId, plan.tasks),
        period,
      });
      if (!decision.ok && !flags.allowPartial)
        return { outcome: 'refused', runId, message: decision.message };
      // The run itself stops at what is left of the period's cap (its own earlier charges count as its own).
      budgetCap = decision.remaining + (store.getRun(runId) ? store.runSpent(runId).net : 0);
    }
    if (firing.stopping.aborted) {
      return { outcome: 'not-started', runId, message: 'not started: mediabatch schedule is stopping' };
    }
    firing.started(runId);
    const runFlags: RunFlags = {
      yes: true,
      runId,
      ...(flags.allowPartial ? { allowPartial: true } : {}),
      ...(flags.concurrency !== undefined ? { concurrency: flags.concurrency } : {}),
      ...(flags.probe === false ? { probe: false } : {}),
      ...(budgetCap !== undefined ? { budgetCap } : {}),
    };
    const code = await runCommand(firing.manifestPath, runFlags, {
      io,
      config: ctx.config,
      statePath: ctx.statePath,
      logger: ctx.logger,
      ...(ctx.pollScale !== undefined ? { pollScale: ctx.pollScale } : {}),
    });
    return code === EXIT.ok
      ? { outcome: 'finished', runId, message: 'every task succeeded' }
      : {
          outcome: 'failed',
          runId,
          message: `finished with exit code ${code}: see \`mediabatch status ${runId}\``,
        };
  } catch (error) {
    return outcomeOf(error, runId);
  }
}

/** The most a run can still charge: new tasks and tasks never sent, at their maximum estimate. */
function worstCase(
  store: Store,
  runId: string,
  tasks: ReadonlyArray<{ spec: { id: string }; estimate: { max: number } }>,
): number {
  if (store.getRun(runId) === undefined) return tasks.reduce((n, t) => n + t.estimate.max, 0);
  const known = new Map(store.tasksOfRun(runId).map((t) => [t.taskId, t.state]));
  return tasks.reduce((n, t) => {
    const state = known.get(t.spec.id);
    return state === undefined || state === 'pending' ? n + t.estimate.max : n;
  }, 0);
}

function outcomeOf(error: unknown, runId: string | undefined): FiringResult {
  const id = runId === undefined ? {} : { runId };
  if (error instanceof ExitError) {
    const message = [...error.details, error.message].join('; ');
    switch (error.exitCode) {
      case EXIT.refused:
        return { outcome: 'refused', ...id, message };
      case EXIT.interrupted:
        return { outcome: 'interrupted', ...id, message };
      case EXIT.someFailed:
        return { outcome: 'failed', ...id, message };
      case EXIT.unauthorized:
        return { outcome: 'unauthorized', ...id, message };
      case EXIT.invalid:
        return { outcome: 'invalid', ...id, message };
      default:
        return { outcome: 'error', ...id, message };
    }
  }
  return { outcome: 'error', ...id, message: error instanceof Error ? error.message : String(error) };
}
