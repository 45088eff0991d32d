// mediabatch as a library: plan a manifest, run it (with an AbortSignal, typed events and progress),
// read its report, and start the sandbox to try it all for free. The CLI is a thin shell over these.

import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { createApiClient } from './api/client.js';
import { type PlanResult, planManifest } from './plan/build.js';
import { type PlanInputs, planForRun, planOptionsOf } from './plan/for-run.js';
import { REPORT_FILES } from './report/index.js';
import type { Report } from './report/schema.js';
import { sandboxOutput } from './results/output.js';
import type { RunEvent } from './run/events.js';
import type { RunProgress } from './run/runner.js';
import { scaledRunPolicy } from './run/settings.js';
import { runUnattended, type UnattendedOutcome } from './run/unattended.js';
import type { Storage, StorageConfig } from './storage/index.js';
import { keyFingerprint, openStore } from './store/index.js';
import { sandboxJournalAnchor, stateLocation } from './store/location.js';
import { createLogger, type Logger } from './util/log.js';
import { registerSecret } from './util/secrets.js';

export {
  type DescribeRunOptions,
  describeRun,
  type MoneyKind,
  type NextAction,
  type NextStep,
  type RunAccount,
  runAccountSchema,
  type StepCommand,
} from './account/index.js';
export { MediabatchError } from './errors.js';
export { EXIT, type ExitCode } from './exit-codes.js';
export { ManifestFileError, ManifestProblemsError, type PlanResult, type RunPlan } from './plan/build.js';
export type { Report } from './report/schema.js';
export {
  type AwaitingItem,
  type DecideOptions,
  type DecideOutcome,
  decide,
  listAwaiting,
  matchTasks,
  type RerollPrice,
  ReviewError,
  type ReviewSummary,
  rerollPrice,
  reviewFacts,
  reviewSummary,
  type TaskReviewFacts,
  type Verdict,
} from './review/index.js';
export { type RunEvent, runEventSchema } from './run/events.js';
export type { RunOutcome } from './run/lifecycle.js';
export type { RunProgress, RunResult, StopReason } from './run/runner.js';
export { RunError } from './run/session.js';
export type { UnattendedOutcome } from './run/unattended.js';
export type { SandboxOptions } from './sandbox/options.js';
export { type Sandbox, startSandbox } from './sandbox/server.js';
export { openStore as openState, type Store as State } from './store/index.js';

export interface PlanManifestOptions {
  /** Relative paths resolve against this folder; the process's working folder by default. */
  cwd?: string;
  now?: Date;
  /** Measure input media over HTTP (true by default); otherwise `media_seconds` or ranges. */
  probe?: boolean;
  allowOutsideData?: boolean;
  vars?: Readonly<Record<string, unknown>>;
}

function planInputs(o: PlanManifestOptions): PlanInputs {
  return {
    cwd: o.cwd ?? process.cwd(),
    now: o.now ?? new Date(),
    ...(o.probe === false ? { probe: false } : {}),
    allowOutside: o.allowOutsideData ?? false,
    ...(o.vars ? { vars: o.vars } : {}),
  };
}

/** Every task of a manifest with its price, and the totals. Throws ManifestProblemsError (every problem). */
export function plan(manifest: string, o: PlanManifestOptions = {}): Promise<PlanResult> {
  return planManifest(manifest, planOptionsOf(planInputs(o)));
}

export interface RunManifestOptions extends PlanManifestOptions {
  /** The API; `MEDIABATCH_BASE_URL` by default. */
  baseUrl?: string;
  /** The API key; `MEDIABATCH_API_KEY` by default (it never reaches logs, the state file or reports). */
  apiKey?: string;
  /**
   * `MEDIABATCH_STATE_URL` by default, as for the CLI, else `state/mediabatch.db` under `cwd`; a
   * `postgres://…` URL keeps the state in PostgreSQL. A sandbox run's default is its own (below).
   */
  stateFile?: string;
  /**
   * With a `postgres://…` state, let the results go to the manifest's local output folder (every worker
   * shares that disk), as `run --allow-local-output`; without it such a run is refused with a RunError.
   */
  allowLocalOutput?: boolean;
  /** Aborted: no new submissions; answers in flight are recorded; the run is resumable. */
  signal?: AbortSignal;
  onEvent?: (event: RunEvent) => void;
  onProgress?: (progress: RunProgress) => void;
  concurrency?: number;
  budget?: number;
  allowPartial?: boolean;
  retries?: number;
  /** Multiplies every wait (polls, retries); 1 is real timing. */
  timeScale?: number;
  logger?: Logger;
  /**
   * The bucket (S3, R2, MinIO…) for local `file:` inputs and for `output: storage`; credentials come from
   * the AWS chain (environment, shared files, profiles), never from here. Without it a manifest with local
   * inputs is refused.
   */
  storage?: StorageConfig;
  /**
   * Run against a sandbox of the API started for this run and closed after it (no account, no money), as
   * `mediabatch run --sandbox` does: its job timing (`speed`, 0.1 by default; 0 is instant). `baseUrl` and
   * `apiKey` are then not used; its runs are kept in `state/sandbox.db` unless `stateFile` says, apart from
   * real ones, and waits are a tenth of real timing unless `timeScale` says.
   */
  sandbox?: boolean | { speed?: number };
  /**
   * With `review: true` tasks: keep going while results await a decision, and submit what each decision
   * (`decide`, from another process or this one) releases, until every reviewed result is decided; as
   * `run --wait-for-review`. Without it the run ends (exit 4) when only results awaiting review are left.
   */
  waitForReview?: boolean;
}

/**
 * Runs (or resumes) a manifest's run to its end, unattended: the same guarantees as `mediabatch run --yes`.
 * Resolves to what happened; throws ManifestProblemsError for a bad manifest and RunError for what the
 * caller must fix (another process drives the run, a refused key, …).
 */
export async function run(manifest: string, o: RunManifestOptions = {}): Promise<UnattendedOutcome> {
  if (!o.sandbox) {
    const baseUrl = o.baseUrl ?? process.env['MEDIABATCH_BASE_URL'];
    const apiKey = o.apiKey ?? process.env['MEDIABATCH_API_KEY'];
    if (!baseUrl || !apiKey)
      throw new Error('run: give baseUrl and apiKey (or set MEDIABATCH_BASE_URL and MEDIABATCH_API_KEY)');
    // A fleet's workers find their state in the environment (a Secret), as `mediabatch run` does: without
    // it each would keep a state of its own, and run (and pay for) the whole manifest again.
    const fromEnv = process.env['MEDIABATCH_STATE_URL'];
    const stateFile = o.stateFile ?? (fromEnv === undefined || fromEnv === '' ? undefined : fromEnv);
    return runAgainst(
      manifest,
      { ...o, ...(stateFile !== undefined ? { stateFile } : {}) },
      { baseUrl, apiKey },
    );
  }
  // Loaded only for a sandbox run: the sandbox's server is not needed otherwise.
  const { EMBEDDED_SANDBOX_KEY, startEmbeddedSandbox } = await import('./sandbox/embedded.js');
  const { sandboxVars } = await import('./sandbox/media.js');
  const { EMBEDDED_SANDBOX } = await import('./run/session.js');
  const { embeddedInputStorage } = await import('./sandbox/uploads.js');
  const speed = typeof o.sandbox === 'object' ? (o.sandbox.speed ?? 0.1) : 0.1;
  // Its journal sits beside the state file, or for a database state where `run --sandbox` keeps it.
  const sandbox = await startEmbeddedSandbox(
    speed,
    sandboxJournalAnchor(o.cwd ?? process.cwd(), o.stateFile ?? 'state/sandbox.db'),
  );
  // Without a bucket the sandbox keeps local inputs itself, as with `run --sandbox`.
  const inputs = o.storage ? undefined : embeddedInputStorage(sandbox.baseUrl);
  try {
    return await runAgainst(
      manifest,
      {
        ...o,
        stateFile: o.stateFile ?? 'state/sandbox.db',
        timeScale: o.timeScale ?? 0.1,
        vars: { ...o.vars, ...sandboxVars(sandbox.baseUrl) },
      },
      {
        baseUrl: sandbox.baseUrl,
        apiKey: EMBEDDED_SANDBOX_KEY,
        boundTo: EMBEDDED_SANDBOX,
        ...(inputs ? { inputs } : {}),
      },
    );
  } finally {
    await sandbox.close();
  }
}

/**
 * The run against one API; `boundTo` names the API the run belongs to when it is not the base URL. `inputs`:
 * the embedded sandbox keeps the local inputs (no bucket), and `output: storage` goes to out/ (sandboxOutput).
 */
async function runAgainst(
  manifest: string,
  o: RunManifestOptions,
  api: { baseUrl: string; apiKey: string; boundTo?: string; inputs?: Storage },
): Promise<UnattendedOutcome> {
  const cwd = o.cwd ?? process.cwd();
  registerSecret(api.apiKey);
  const planned = await planForRun(manifest, planInputs({ ...o, cwd }));
  if (api.inputs) planned.settings.output = sandboxOutput(planned.settings.output, o.storage, cwd).output;
  const stateFile = stateLocation(cwd, o.stateFile ?? 'state/mediabatch.db');
  const store = openStore(stateFile);
  const client = createApiClient({ baseUrl: api.baseUrl, apiKey: api.apiKey });
  const logger = o.logger ?? createLogger({ level: 'silent' });
  try {
    return await runUnattended({
      store,
      plan:
        o.budget === undefined
          ? planned
          : { ...planned, settings: { ...planned.settings, budget: o.budget } },
      manifestPath: resolve(cwd, manifest),
      stateFile,
      client,
      ...(api.boundTo ? { apiBaseUrl: api.boundTo } : {}),
      keyFingerprint: keyFingerprint(api.apiKey),
      logger,
      ...(o.concurrency !== undefined ? { concurrency: o.concurrency } : {}),
      ...(o.retries !== undefined ? { retries: o.retries } : {}),
      ...(o.storage ? { storage: o.storage } : {}),
      ...(api.inputs ? { inputStorage: api.inputs } : {}),
      allowPartial: o.allowPartial ?? false,
      ...(o.allowLocalOutput ? { allowLocalOutput: true } : {}),
      policy: scaledRunPolicy(o.timeScale ?? 1),
      ...(o.signal ? { signal: o.signal } : {}),
      ...(o.onEvent ? { onEvent: o.onEvent } : {}),
      ...(o.onProgress ? { onProgress: o.onProgress } : {}),
      ...(o.waitForReview ? { waitForReview: true } : {}),
    });
  } finally {
    await client.close();
    store.close();
  }
}

/** A run's report.json, as the run (or `mediabatch report`) last wrote it into `<output>/<run>/`. */
export async function readReport(runFolder: string): Promise<Report> {
  return JSON.parse(await readFile(resolve(runFolder, REPORT_FILES.json), 'utf8')) as Report;
}
