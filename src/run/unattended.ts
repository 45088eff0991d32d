// A whole run with nobody at a terminal: open, preflight, refuse or execute, close, report. The scheduler
// fires runs through this, and a script that imports mediabatch does the same (see src/index.ts).

import { dirname } from 'node:path';
import type { ApiClient } from '../api/client.js';
import type { PriceTable } from '../catalog/types.js';
import { EXIT, type ExitCode } from '../exit-codes.js';
import { spendFromPeriod } from '../money/index.js';
import { OutputError, refuseLocalOutputOfFleet, resolveOutput } from '../results/output.js';
import type { StorageConfig } from '../storage/config.js';
import type { Storage } from '../storage/index.js';
import type { Store, TaskState } from '../store/index.js';
import type { Logger } from '../util/log.js';
import type { RunEvent } from './events.js';
import {
  closeCompleteRun,
  executeRun,
  type PreflightReport,
  preflightOptions,
  preflightRun,
  type RunOutcome,
  writeRunReport,
} from './lifecycle.js';
import { unattendedInputLinks } from './runner/uploads.js';
import type { RunProgress } from './runner.js';
import { interruptedOpening, openRunSession, type PlannedRun, RunError, type RunSession } from './session.js';
import { DEFAULT_RUN_POLICY, type RunPolicy } from './settings.js';

export interface UnattendedRunOptions {
  store: Store;
  plan: PlannedRun & { settings: PlannedRun['settings'] & { budget?: number } };
  manifestPath: string;
  stateFile: string;
  client: ApiClient;
  /** What the run is bound to: the client's base URL unless told otherwise (the embedded sandbox). */
  apiBaseUrl?: string;
  keyFingerprint: string;
  logger: Logger;
  configQuota?: number;
  /** The account's prices (chained tasks are priced exactly with them when filled in). */
  prices?: PriceTable;
  /**
   * The account's bucket (`storage:`): local `file:` inputs are uploaded there before the first POST, and
   * `output: storage` puts the results there. Credentials come from the AWS chain in `env`.
   */
  storage?: StorageConfig;
  /** Where local `file:` inputs go without `storage`: the embedded sandbox of a sandbox run keeps them itself. */
  inputStorage?: Storage;
  /** Where AWS credentials are read from; the process's environment by default. */
  env?: NodeJS.ProcessEnv;
  runId?: string;
  /**
   * With a PostgreSQL state, results may go to a local folder only with this: the workers share that disk.
   * Otherwise such a run is refused (RunError 'invalid') before its run is opened.
   */
  allowLocalOutput?: boolean;
  /** How the refusal names the switch above to the caller (`--allow-local-output` for the CLI). */
  localOutputSwitch?: string;
  /** A cap on top of the manifest's budget (the scheduler passes what is left of budget_per_period). */
  budgetCap?: number;
  /**
   * The scheduler fired the run in `period` (`YYYY-MM`) under the manifest's `budget_per_period` (tokens):
   * every spend of the run is checked against it in the store, beside the manifest's other runs.
   */
  periodBudget?: { period: string; budget: number };
  allowPartial?: boolean;
  concurrency?: number;
  retries?: number;
  policy?: RunPolicy;
  /** Aborted: stop submitting, record the answers in flight, return (resumable). */
  signal?: AbortSignal;
  /** Aborted: return at once. */
  halt?: AbortSignal;
  /** The run exists in the state now (created, or resumed): called once, before its preflight. */
  onOpened?: (runId: string) => void;
  onEvent?: (event: RunEvent) => void;
  onProgress?: (progress: RunProgress) => void;
  /** Keep going while results await review, submitting what decisions release (`run --wait-for-review`). */
  waitForReview?: boolean;
  /** How often a run waiting for review looks for decisions (1000 ms by default). */
  reviewPollMs?: number;
  now?: () => Date;
}

export type UnattendedOutcome =
  | { kind: 'complete'; runId: string; exitCode: ExitCode; counts: Record<TaskState, number> }
  | { kind: 'refused'; runId: string; exitCode: ExitCode; message: string; preflight: PreflightReport }
  | { kind: 'ran'; runId: string; exitCode: ExitCode; outcome: RunOutcome; preflight: PreflightReport };

/** Runs (or resumes) the manifest's run to its end. Throws RunError for what the caller must fix. */
export async function runUnattended(o: UnattendedRunOptions): Promise<UnattendedOutcome> {
  const now = o.now ?? (() => new Date());
  const policy = o.policy ?? DEFAULT_RUN_POLICY;
  const env = o.env ?? process.env;
  const output = outputOf(o, env);
  const plan = { ...o.plan, settings: { ...o.plan.settings, output: output.output } };
  const settings = plan.settings;
  const session = await openSession(o, plan, policy);
  try {
    const runId = opened(session, o);
    spendFromPeriod(o.store, runId, o.periodBudget);
    const { bucket, inputs } = await bucketsOf(output.bucket, o.storage, env, runId, o.inputStorage);
    const options = preflightOptions({
      client: o.client,
      keyFingerprint: o.keyFingerprint,
      configQuota: o.configQuota,
      settings,
      budgetCap: o.budgetCap,
      allowPartial: o.allowPartial,
      now: now(),
    });
    const preflight = await preflightUnlessAborted(session, options, o.signal);
    const report = () =>
      writeRunReport(session, {
        ...(bucket ? { bucket } : {}),
        now: now(),
        ...(o.configQuota !== undefined ? { quota: o.configQuota } : {}),
      });
    if (preflight.complete) {
      const exitCode = closeCompleteRun(session, preflight.counts);
      await report();
      return { kind: 'complete', runId, exitCode, counts: preflight.counts };
    }
    const refusal = refusalOf(preflight, o.allowPartial ?? false);
    if (refusal !== undefined) {
      session.refuse(EXIT.refused, refusal);
      return { kind: 'refused', runId, exitCode: EXIT.refused, message: refusal, preflight };
    }
    // Local inputs are uploaded before anything is sent; a problem stops the run with nothing charged.
    const inputLinks = await unattendedInputLinks(o.store, runId, dirname(o.manifestPath), inputs).catch(
      (error: unknown) => {
        session.refuse(EXIT.invalid);
        throw error;
      },
    );
    const outcome = await executeRun(session, {
      ...(inputLinks ? { inputLinks } : {}),
      ...(bucket ? { bucket } : {}),
      client: o.client,
      keyFingerprint: o.keyFingerprint,
      logger: o.logger,
      policy,
      concurrency: o.concurrency ?? settings.concurrency,
      ...(settings.order !== undefined ? { order: settings.order } : {}),
      ...(o.prices !== undefined ? { prices: o.prices } : {}),
      ...(options.budget !== undefined ? { budget: options.budget } : {}),
      ...(o.retries !== undefined ? { retries: o.retries } : {}),
      taskIds: plan.taskIds,
      stop: o.signal ?? new AbortController().signal,
      ...(o.halt ? { halt: o.halt } : {}),
      ...(o.onEvent ? { onEvent: o.onEvent } : {}),
      ...(o.onProgress ? { onProgress: o.onProgress } : {}),
      ...(o.waitForReview ? { waitForReview: true } : {}),
      ...(o.reviewPollMs !== undefined ? { reviewPollMs: o.reviewPollMs } : {}),
    });
    await report();
    return { kind: 'ran', runId, exitCode: outcome.exitCode, outcome, preflight };
  } finally {
    session.close();
  }
}

/** The run opened (or joined) for this caller; its signal aborts the opening too. */
function openSession(o: UnattendedRunOptions, plan: UnattendedRunOptions['plan'], policy: RunPolicy) {
  const { settings } = plan;
  return openRunSession({
    store: o.store,
    plan,
    manifestPath: o.manifestPath,
    stateFile: o.stateFile,
    api: { baseUrl: o.apiBaseUrl ?? o.client.baseUrl, keyFingerprint: o.keyFingerprint },
    settingsToKeep: { ...settings, concurrency: o.concurrency ?? settings.concurrency },
    ...(o.runId !== undefined ? { runId: o.runId } : {}),
    leaseTtlMs: policy.leaseTtlMs,
    ...(o.signal ? { signal: o.signal } : {}),
  });
}

/** The preflight; aborted meanwhile (the opening's leases given back already), the run does not start. */
async function preflightUnlessAborted(
  session: RunSession,
  options: Parameters<typeof preflightRun>[1],
  signal: AbortSignal | undefined,
): Promise<PreflightReport> {
  const preflight = await preflightRun(session, options);
  if (signal?.aborted) throw interruptedOpening(session.runId);
  return preflight;
}

/** The run exists now: the caller is told, a move of its output (it wrote nothing where it was) logged. Its id. */
function opened(session: RunSession, o: UnattendedRunOptions): string {
  const { runId } = session;
  o.onOpened?.(runId);
  if (session.outputMoved) {
    const { from, to } = session.outputMoved;
    o.logger.info(
      { run: runId, from, to },
      `run ${runId} wrote nothing to ${from}: its results now go to ${to}`,
    );
  }
  return runId;
}

/**
 * `output: storage` is the account's bucket; results in a bucket never touch a local folder; a local folder
 * with a PostgreSQL state only when allowed.
 */
function outputOf(o: UnattendedRunOptions, env: NodeJS.ProcessEnv): ReturnType<typeof resolveOutput> {
  try {
    const resolved = resolveOutput(o.plan.settings.output, o.storage, env);
    refuseLocalOutputOfFleet(o.store.file, resolved, {
      allowed: o.allowLocalOutput === true,
      allow: o.localOutputSwitch ?? 'allowLocalOutput: true',
    });
    return resolved;
  } catch (error) {
    if (error instanceof OutputError) throw new RunError('invalid', error.message);
    throw error;
  }
}

/** The results' bucket (with the run's key) and where local inputs go: the account's bucket, else `inputStorage`. */
async function bucketsOf(
  results: StorageConfig | undefined,
  storage: StorageConfig | undefined,
  env: NodeJS.ProcessEnv,
  runId: string,
  inputStorage: UnattendedRunOptions['inputStorage'],
) {
  // Loaded only with a bucket: the AWS SDK is not needed otherwise.
  const s3 = storage || results ? await import('../storage/index.js') : undefined;
  const bucket =
    s3 && results
      ? { storage: s3.createStorage(results, { env }), runKey: s3.joinKey(results.prefix, runId) }
      : undefined;
  const inputs = s3 && storage ? s3.createStorage(storage, { env }) : inputStorage;
  return { bucket, inputs };
}

/** Why the preflight refuses the run, in one line; undefined when it may go. */
export function refusalOf(preflight: PreflightReport, allowPartial: boolean): string | undefined {
  const { disk, decision } = preflight;
  if (disk && !disk.ok && (disk.problem === 'unwritable' || !allowPartial)) {
    return `refused: ${disk.message}. Nothing was submitted`;
  }
  if (!decision.ok) {
    return `refused: ${decision.refusals.join('; ')}. Nothing was submitted; raise the limit, shrink the manifest, or run with --allow-partial to stop cleanly when money runs out`;
  }
  return undefined;
}
