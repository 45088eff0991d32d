import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { createApiClient } from '../../api/client.js';
import type { Config } from '../../config.js';
import { MediabatchError } from '../../errors.js';
import { formatProblem, loadManifest } from '../../manifest/index.js';
import { periodMoney } from '../../money/index.js';
import type { RunPlan } from '../../plan/build.js';
import { planForRun } from '../../plan/for-run.js';
import { commandLine, newRunCommandLine, type Reader } from '../../results/invocation.js';
import { chooseRun } from '../../run/resume.js';
import { pollScaleFromEnv, scaledRunPolicy } from '../../run/settings.js';
import { runUnattended } from '../../run/unattended.js';
import { errorOutcome, firingResult, worstCase } from '../../schedule/firing.js';
import {
  CronSchedule,
  checkPeriodBudget,
  type Firing,
  type FiringResult,
  type ManifestSchedule,
  realTimers,
  Scheduler,
  sharedRunProblem,
  type Timers,
} from '../../schedule/index.js';
import { keyFingerprint, leaseHolder, openStore, periodOf, type Store } from '../../store/index.js';
import { stateLocation } from '../../store/location.js';
import type { Logger } from '../../util/log.js';
import { fromMicro } from '../../util/money.js';
import { scrub } from '../../util/secrets.js';
import { EXIT, ExitError } from '../errors.js';
import type { CliIO } from '../io.js';
import { readerOf, runInvocation } from '../read.js';

export interface ScheduleFlags {
  catchUp?: boolean;
  allowPartial?: boolean;
  concurrency?: number;
  probe?: boolean;
  allowLocalOutput?: boolean;
}

export interface ScheduleContext {
  io: CliIO;
  config: Config;
  statePath: string;
  logger: Logger;
  /** Tests pass a fake; the default waits in real time. */
  timers?: Timers;
  /** Passed on to each run (tests shorten polling; a child process by MEDIABATCH_POLL_SCALE, as `run`). */
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
  const manifests = await loadSchedules(files, io, readerOf(ctx));
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
  const store = openStore(stateLocation(io.cwd, ctx.statePath), { now: io.now });
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
        const commands = summary.interrupted.map((id) => {
          const run = store.runs.getRun(id);
          return run === undefined ? id : `\`${commandLine(runInvocation(run, ctx), { command: 'run' })}\``;
        });
        throw new ExitError(
          EXIT.interrupted,
          `stopped; interrupted run(s) ${summary.interrupted.join(', ')} are resumable, nothing is charged twice: ${commands.join('; ')}`,
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
async function loadSchedules(files: string[], io: CliIO, reach: Reader): Promise<ManifestSchedule[]> {
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
        `${file}: schedule: missing: add e.g. \`schedule: "0 3 * * *"\` to the manifest, or start it with \`${newRunCommandLine(reach, file)}\``,
      );
      continue;
    }
    const parsed = CronSchedule.parse(schedule, timezone ?? 'UTC');
    if (!parsed.ok) {
      problems.push(`${file}: ${parsed.message}`);
      continue;
    }
    const shared = sharedRunProblem(loaded.manifest.settings, parsed.schedule, io.now());
    if (shared !== undefined) {
      problems.push(`${file}: ${shared}`);
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
 * ledger, then the run through the library (one plan, the scheduler's own store), without a terminal.
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
    const plan = await planForRun(firing.manifestPath, {
      cwd: io.cwd,
      now: io.now(),
      prices: ctx.config.prices,
      probe: flags.probe !== false,
    });
    const settings = plan.settings;
    const manifestPath = resolve(io.cwd, firing.manifestPath);
    // What a firing left unfinished is finished first: a new dated run must not pay again for it.
    runId = chooseRun(store, {
      manifestPath,
      manifestName: settings.name,
      templateRunId: settings.runId,
    }).runId;
    let budgetCap: number | undefined;
    let periodBudget: { period: string; budget: number } | undefined;
    if (settings.budgetPerPeriod !== undefined) {
      const period = periodOf(firing.at);
      // What the manifest's runs hold open (in flight, in doubt, re-rolls asked for) may still be charged.
      const taken = periodMoney(store, manifestPath, period);
      const decision = checkPeriodBudget({
        cap: settings.budgetPerPeriod,
        spent: fromMicro(taken.spent),
        reserved: fromMicro(taken.reserved),
        worstCase: worstCase(store, runId, plan.rows()),
        period,
      });
      if (!decision.ok && !flags.allowPartial)
        return { outcome: 'refused', runId, message: decision.message };
      // The run itself stops at what is left of the period's cap (its own earlier charges count as its own),
      // and the store checks each of its spends against the period's cap beside the manifest's other runs.
      budgetCap = decision.remaining + (store.runs.getRun(runId) ? store.ledger.runSpent(runId).net : 0);
      periodBudget = { period, budget: settings.budgetPerPeriod };
    }
    if (firing.stopping.aborted) {
      return { outcome: 'not-started', runId, message: 'not started: mediabatch schedule is stopping' };
    }
    return await runFiring(firing, flags, ctx, store, { plan, manifestPath, runId, budgetCap, periodBudget });
  } catch (error) {
    return outcomeOf(error, runId);
  }
}

async function runFiring(
  firing: Firing,
  flags: ScheduleFlags,
  ctx: ScheduleContext,
  store: Store,
  o: {
    plan: RunPlan;
    manifestPath: string;
    runId: string;
    budgetCap: number | undefined;
    periodBudget: { period: string; budget: number } | undefined;
  },
): Promise<FiringResult> {
  const { config } = ctx;
  const apiKey = config.apiKey as string;
  const client = createApiClient({ baseUrl: config.baseUrl as string, apiKey });
  // The scheduler forwards SIGTERM/SIGINT: the first stops submitting, a second quits at once.
  const stop = new AbortController();
  const halt = new AbortController();
  const onSignal = () => (stop.signal.aborted ? halt.abort() : stop.abort());
  firing.signals.on('SIGTERM', onSignal);
  firing.signals.on('SIGINT', onSignal);
  try {
    const done = await runUnattended({
      store,
      plan: o.plan,
      manifestPath: o.manifestPath,
      stateFile: stateLocation(ctx.io.cwd, ctx.statePath),
      client,
      keyFingerprint: keyFingerprint(apiKey),
      logger: ctx.logger,
      ...(config.quota !== undefined ? { configQuota: config.quota } : {}),
      prices: config.prices,
      ...(config.storage ? { storage: config.storage } : {}),
      env: ctx.io.env,
      runId: o.runId,
      ...(o.budgetCap !== undefined ? { budgetCap: o.budgetCap } : {}),
      ...(o.periodBudget !== undefined ? { periodBudget: o.periodBudget } : {}),
      allowPartial: flags.allowPartial ?? false,
      ...(flags.allowLocalOutput ? { allowLocalOutput: true } : {}),
      localOutputSwitch: '--allow-local-output',
      ...(flags.concurrency !== undefined ? { concurrency: flags.concurrency } : {}),
      policy: scaledRunPolicy(ctx.pollScale ?? pollScaleFromEnv(ctx.io.env) ?? 1),
      signal: stop.signal,
      halt: halt.signal,
      now: () => firing.at,
      // The firing is said and recorded once its run exists: a stop before that made nothing.
      onOpened: (runId) => firing.started(runId),
    });
    const inv = runInvocation({ id: o.runId, manifestPath: o.manifestPath, settings: {}, api: null }, ctx);
    return firingResult(done, commandLine(inv, { command: 'status' }));
  } finally {
    firing.signals.off('SIGTERM', onSignal);
    firing.signals.off('SIGINT', onSignal);
    await client.close();
  }
}

function outcomeOf(error: unknown, runId: string | undefined): FiringResult {
  if (error instanceof MediabatchError) return errorOutcome(error, runId);
  const id = runId === undefined ? {} : { runId };
  return { outcome: 'error', ...id, message: error instanceof Error ? error.message : String(error) };
}
