import { dirname, resolve } from 'node:path';
import { type ApiClient, createApiClient } from '../../api/client.js';
import type { Config } from '../../config.js';
import type { TaskOrder } from '../../manifest/types.js';
import { LocalInputError } from '../../media/local-input.js';
import { CALLBACK_PATH, callbackBaseProblem, parseListen } from '../../run/callbacks.js';
import {
  closeCompleteRun,
  effectiveBudget,
  executeRun,
  type PreflightReport,
  preflightRun,
  type RunOutcome,
  writeRunReport,
} from '../../run/lifecycle.js';
import { OutputError, resolveOutput } from '../../run/output.js';
import type { BucketOutput } from '../../run/runner/bucket.js';
import { NoStorageError, runInputLinks } from '../../run/runner/uploads.js';
import { selectTasks } from '../../run/select.js';
import { EMBEDDED_SANDBOX, openRunSession, RunError, type RunSession } from '../../run/session.js';
import { scaledRunPolicy } from '../../run/settings.js';
import { refusalOf } from '../../run/unattended.js';
import { sandboxVars } from '../../sandbox/media.js';
import { SANDBOX_DEFAULTS } from '../../sandbox/options.js';
import { startSandbox } from '../../sandbox/server.js';
import { createStorage, joinKey, StorageError } from '../../storage/index.js';
import { keyFingerprint, openStore } from '../../store/index.js';
import type { Logger } from '../../util/log.js';
import { registerSecret } from '../../util/secrets.js';
import { EXIT, ExitError } from '../errors.js';
import { fmtTokens } from '../format.js';
import type { CliIO } from '../io.js';
import { ProgressView } from '../progress.js';
import { makeMeasure } from '../wiring.js';
import { buildRunPlan, type RunPlan } from './plan.js';
import { describeCounts, displayPath, failureLine, runPrinter } from './run-lines.js';
import { viewDuringRun } from './view.js';

export interface RunFlags {
  yes?: boolean;
  allowPartial?: boolean;
  retryInDoubt?: boolean;
  acceptChanges?: boolean;
  concurrency?: number;
  /** Replaces every task's `retries` for this run. */
  retries?: number;
  /** Task ids or globs, comma-separated: only these are submitted. */
  only?: string;
  /** Submit at most this many pending tasks. */
  limit?: number;
  /** Which pending task goes next; the manifest's `order` when absent. */
  order?: TaskOrder;
  /** Send failed (refunded) and rejected tasks back to pending first. */
  retryFailed?: boolean;
  /** NDJSON events on stdout (./../../run/events.ts); the human display goes to stderr. */
  json?: boolean;
  sandbox?: boolean;
  /** Job timing of the embedded sandbox (and our polling, scaled alike). */
  sandboxSpeed?: number;
  probe?: boolean;
  /** Start the template's run even when an older run of the manifest is unfinished. */
  newRun?: boolean;
  /** Drive this run id instead of the one the manifest's `run` template gives now (resume an older run). */
  runId?: string;
  /**
   * An extra cap in tokens for this run, on top of the manifest's `budget` (the scheduler passes what is
   * left of `budget_per_period`).
   */
  budgetCap?: number;
  /** `host:port` for a callback receiver during the run. */
  listen?: string;
  /** The public URL that reaches the receiver (the service must be able to POST to it). */
  callbackUrl?: string;
  /** `foreach` may read data files outside the manifest's folder. */
  allowOutsideData?: boolean;
  /** Serve `mediabatch view` of this run while it goes (./view.ts). */
  view?: boolean;
}

export interface RunContext {
  io: CliIO;
  config: Config;
  statePath: string;
  logger: Logger;
  /** Tests shorten polling; the default is the real schedule (scaled with --sandbox). */
  pollScale?: number;
}

const SANDBOX_KEY = 'sandbox-key';

/** preflight, then submit, watch, download; resumes the run when it exists and is unfinished. */
export async function runCommand(file: string, flags: RunFlags, ctx: RunContext): Promise<number> {
  const { io, config } = ctx;
  let baseUrl = config.baseUrl;
  let apiKey = config.apiKey;
  const sandbox = flags.sandbox ? await startEmbeddedSandbox(flags.sandboxSpeed ?? 0.1) : undefined;
  try {
    if (sandbox) {
      baseUrl = sandbox.baseUrl;
      apiKey = SANDBOX_KEY;
      humanOut(io, flags).write(`Using the embedded sandbox at ${sandbox.baseUrl} (no account, no money).\n`);
    }
    if (!apiKey) {
      throw new ExitError(
        EXIT.invalid,
        'no API key: set MEDIABATCH_API_KEY (or try it for free with --sandbox)',
      );
    }
    if (!baseUrl) {
      throw new ExitError(
        EXIT.invalid,
        'no API base URL: set MEDIABATCH_BASE_URL or base_url in mediabatch.config.yaml (or use --sandbox)',
      );
    }
    registerSecret(apiKey);
    const client = createApiClient({ baseUrl, apiKey });
    try {
      return await runWithClient(file, flags, ctx, client, keyFingerprint(apiKey), Boolean(sandbox));
    } finally {
      await client.close();
    }
  } finally {
    await sandbox?.close();
  }
}

async function runWithClient(
  file: string,
  flags: RunFlags,
  ctx: RunContext,
  client: ApiClient,
  fingerprint: string,
  onSandbox: boolean,
): Promise<number> {
  const { io, config } = ctx;
  const plan = await buildRunPlan(file, {
    io,
    config,
    ...(flags.probe === false ? {} : { measure: makeMeasure() }),
    allowOutside: flags.allowOutsideData ?? false,
    ...(onSandbox ? { vars: sandboxVars(client.baseUrl) } : {}),
  });
  // `output: storage` is the account's bucket; a bucket output streams the results there.
  const output = resolveOutputOrExit(plan.settings.output, config.storage, io.env);
  plan.settings.output = output.output;
  const settings = plan.settings;
  let only: string[] | undefined;
  if (flags.only !== undefined) {
    const selection = selectTasks(flags.only, plan.taskIds);
    if (!selection.ok) throw new ExitError(EXIT.invalid, selection.message);
    only = selection.taskIds;
  }
  if (flags.runId !== undefined && !/^[A-Za-z0-9_-]+$/.test(flags.runId)) {
    throw new ExitError(
      EXIT.invalid,
      `--run-id: must be letters, digits, - and _, got ${JSON.stringify(flags.runId)}`,
    );
  }
  const callbacks = callbackFlags(flags, settings, onSandbox);
  const shown = (p: string) => displayPath(io.cwd, p);
  const store = openStore(resolve(io.cwd, ctx.statePath), { now: io.now });
  try {
    const session = await openRunSession({
      store,
      plan,
      manifestPath: resolve(io.cwd, file),
      stateFile: resolve(io.cwd, ctx.statePath),
      // The embedded sandbox gets a new port at each start: its runs belong to "the embedded sandbox".
      api: { baseUrl: onSandbox ? EMBEDDED_SANDBOX : client.baseUrl, keyFingerprint: fingerprint },
      settingsToKeep: { ...settings, concurrency: flags.concurrency ?? settings.concurrency },
      ...(flags.runId !== undefined ? { runId: flags.runId } : {}),
      ...(flags.newRun ? { newRun: true } : {}),
      ...(flags.acceptChanges ? { acceptChanges: true } : {}),
      ...(flags.retryFailed ? { retryFailed: true } : {}),
      ...(flags.retryInDoubt ? { retryInDoubt: true } : {}),
      wantsCallbackToken: callbacks !== undefined,
      shown,
      ...storeFirstOf(flags, only, io.env),
    }).catch(rethrowRunError);
    const view = flags.view ? await viewDuringRun(ctx, session.runId, humanOut(io, flags)) : undefined;
    try {
      return await driveRun({
        file,
        flags,
        ctx,
        client,
        fingerprint,
        session,
        plan,
        onSandbox,
        only,
        callbacks,
        bucket: output.bucket
          ? {
              storage: createStorage(output.bucket, { env: io.env }),
              runKey: joinKey(output.bucket.prefix, session.runId),
            }
          : undefined,
      });
    } finally {
      await view?.end();
      session.close();
    }
  } finally {
    store.close();
  }
}

function resolveOutputOrExit(
  output: string,
  storage: Config['storage'],
  env: NodeJS.ProcessEnv,
): ReturnType<typeof resolveOutput> {
  try {
    return resolveOutput(output, storage, env);
  } catch (error) {
    if (error instanceof OutputError) throw new ExitError(EXIT.invalid, error.message);
    throw error;
  }
}

/** `--listen` / `--callback-url` (or the manifest's), checked; undefined without a receiver. */
function callbackFlags(
  flags: RunFlags,
  settings: RunPlan['settings'],
  onSandbox: boolean,
): { host: string; port: number; publicBase?: string } | undefined {
  const listen = flags.listen ?? settings.listen;
  const listenAt = listen === undefined ? undefined : parseListenOrExit(listen);
  const publicBase = flags.callbackUrl ?? settings.callbackUrl;
  if (listenAt && !publicBase && !onSandbox) {
    throw new ExitError(
      EXIT.invalid,
      '--listen needs --callback-url (or callback_url in the manifest): the public https address that reaches this receiver',
    );
  }
  const baseProblem = listenAt && publicBase !== undefined ? callbackBaseProblem(publicBase) : undefined;
  if (baseProblem) {
    throw new ExitError(
      EXIT.invalid,
      `${flags.callbackUrl !== undefined ? '--callback-url' : 'callback_url'}: ${baseProblem}`,
    );
  }
  if (flags.callbackUrl !== undefined && !listenAt) {
    // Without a receiver the flag would be dropped silently and the user would wait for callbacks.
    throw new ExitError(
      EXIT.invalid,
      '--callback-url needs --listen host:port (or listen in the manifest): the receiver this URL reaches',
    );
  }
  if (!listenAt) return undefined;
  return { ...listenAt, ...(publicBase !== undefined ? { publicBase } : {}) };
}

/** The library's RunError, as the CLI's one line and exit code. */
function rethrowRunError(error: unknown): never {
  if (error instanceof RunError) {
    const code = {
      invalid: EXIT.invalid,
      busy: EXIT.interrupted,
      refused: EXIT.refused,
      unauthorized: EXIT.unauthorized,
    }[error.kind];
    throw new ExitError(code, error.message, error.details);
  }
  throw error;
}

interface DriveArgs {
  file: string;
  flags: RunFlags;
  ctx: RunContext;
  client: ApiClient;
  fingerprint: string;
  session: RunSession;
  plan: RunPlan;
  onSandbox: boolean;
  /** `--only`, resolved to task ids. */
  only: string[] | undefined;
  callbacks: { host: string; port: number; publicBase?: string } | undefined;
  /** Results go to this bucket (`output: s3://…` or `storage`). */
  bucket: BucketOutput | undefined;
}

/**
 * Local `file:` inputs of the unfinished tasks, uploaded once before the first POST (nothing is sent
 * when this fails); the function that links them at each POST, or undefined without local inputs.
 */
async function uploadLocalInputsFor(a: DriveArgs, out: (line?: string) => void) {
  const storage = a.ctx.config.storage
    ? createStorage(a.ctx.config.storage, { env: a.ctx.io.env })
    : undefined;
  try {
    return await runInputLinks(
      a.session.store,
      a.session.runId,
      dirname(resolve(a.ctx.io.cwd, a.file)),
      storage,
      {
        ...(a.flags.allowOutsideData ? { allowOutside: true } : {}),
        onProgress: (done, total, input, result) =>
          out(
            `  Upload ${done}/${total}: ${input.path} ${result.uploaded ? 'uploaded' : result.recorded ? 'already in the bucket (uploaded by an earlier run)' : 'already in the bucket'}`,
          ),
      },
    );
  } catch (error) {
    if (error instanceof NoStorageError) throw new ExitError(EXIT.invalid, error.message);
    if (error instanceof StorageError) throw new ExitError(error.exitCode, error.message);
    if (error instanceof LocalInputError) throw new ExitError(EXIT.invalid, error.message);
    throw error;
  }
}

/** Prints what the session found, the preflight, asks, then executes and prints the outcome. */
async function driveRun(a: DriveArgs): Promise<number> {
  const { io, config } = a.ctx;
  const { session, plan, flags } = a;
  const { runId } = session;
  const settings = plan.settings;
  const out = (line = '') => humanOut(io, flags).write(`${line}\n`);
  const printer = runPrinter(a, out);
  printer.opened();
  const budget = effectiveBudget(settings.budget, flags.budgetCap);
  const report = await preflightRun(session, {
    client: a.client,
    keyFingerprint: a.fingerprint,
    configQuota: config.quota,
    budget,
    allowPartial: flags.allowPartial ?? false,
    ...(a.only !== undefined ? { only: a.only } : {}),
    ...(flags.limit !== undefined ? { limit: flags.limit } : {}),
    order: flags.order ?? settings.order,
    now: io.now(),
    shown: (p) => displayPath(io.cwd, p),
  }).catch(rethrowRunError);
  if (report.complete) {
    const code = closeCompleteRun(session, report.counts);
    out(
      `Run ${runId} is already complete: ${describeCounts(report.counts)}. Files are in ${displayPath(io.cwd, session.runDir)}.`,
    );
    // Nothing moved since the last report was written: it stays as it is (a minute at a million tasks).
    await printReport(a, out, { unlessCurrent: true });
    printer.summary(report.counts, code);
    if (code !== EXIT.ok) throw new ExitError(EXIT.someFailed, failureLine(runId, report.counts));
    return code;
  }
  printer.preflight(report);
  refuseIfNeeded(session, report, flags);
  await confirmOrRefuse(session, report, flags, io);
  return await executeAndReport(a, report, budget, out, printer);
}

/** The preflight's refusals: the output folder, then money; each one line, exit 3. */
function refuseIfNeeded(session: RunSession, report: PreflightReport, flags: RunFlags): void {
  const refusal = refusalOf(report, flags.allowPartial ?? false);
  if (refusal === undefined) return;
  session.refuse(EXIT.refused);
  throw new ExitError(EXIT.refused, refusal);
}

/**
 * A paid run never starts unconfirmed by accident: asked whenever a person can answer, refused when
 * nobody can (cron and CI pass --yes; `schedule` is its own confirmation).
 */
async function confirmOrRefuse(session: RunSession, report: PreflightReport, flags: RunFlags, io: CliIO) {
  if (flags.yes || report.pendingCount === 0) return;
  if (!io.ask) {
    session.refuse(EXIT.refused);
    throw new ExitError(
      EXIT.refused,
      'not confirmed: standard input is not a terminal, so nobody can answer; add --yes to submit without asking',
    );
  }
  const answer = await io.ask(
    `Submit ${report.pendingCount} task(s) for up to ${fmtTokens(report.remaining.max)} tokens? [y/N] `,
  );
  if (answer !== true) {
    session.refuse(EXIT.refused);
    throw new ExitError(
      EXIT.refused,
      answer === 'interrupted'
        ? 'not confirmed (Ctrl-C); nothing was submitted'
        : 'not confirmed; nothing was submitted',
    );
  }
}

/** Signals to abort signals, progress to the view, then the library runs it; the outcome as lines. */
async function executeAndReport(
  a: DriveArgs,
  report: PreflightReport,
  budget: number | undefined,
  out: (line?: string) => void,
  printer: ReturnType<typeof runPrinter>,
): Promise<number> {
  const { io } = a.ctx;
  const { session, plan, flags } = a;
  const { runId } = session;
  const interrupts = interruptsFrom(io);
  const view = new ProgressView({
    out: humanOut(io, flags),
    interactive: io.interactive,
    total: Object.values(report.counts).reduce((n, c) => n + c, 0),
    estimate: plan.totals.tokens,
  });
  const scale = a.ctx.pollScale ?? pollScaleFromEnv(io.env) ?? (a.onSandbox ? 0.1 : 1);
  // The handlers stay until the command ends: a second Ctrl-C while the closing balance is fetched or
  // the report is written must still quit at once, not fall back to the default (a kill by SIGINT).
  try {
    const inputLinks = await uploadLocalInputsFor(a, out);
    let outcome: RunOutcome;
    try {
      outcome = await executeRun(session, {
        ...(a.bucket ? { bucket: a.bucket } : {}),
        client: a.client,
        keyFingerprint: a.fingerprint,
        logger: a.ctx.logger,
        policy: scaledRunPolicy(scale),
        concurrency: flags.concurrency ?? plan.settings.concurrency,
        ...(budget !== undefined ? { budget } : {}),
        ...(flags.retries !== undefined ? { retries: flags.retries } : {}),
        ...(a.only !== undefined ? { only: a.only } : {}),
        ...(flags.limit !== undefined ? { limit: flags.limit } : {}),
        order: flags.order ?? plan.settings.order,
        prices: a.ctx.config.prices,
        ...(a.callbacks ? { receiver: a.callbacks } : {}),
        // Without a receiver, the manifest's callback_url goes to the service as it is (a receiver of the user's).
        ...(!a.callbacks && plan.settings.callbackUrl ? { plainCallbackUrl: plan.settings.callbackUrl } : {}),
        taskIds: plan.taskIds,
        ...(inputLinks ? { inputLinks } : {}),
        stop: interrupts.stop,
        halt: interrupts.halt,
        onProgress: (p) => view.update(p),
        onEvent: printer.event,
        onReceiver: (receiver, base) =>
          out(`  Callbacks: receiver on ${receiver.localUrl}; the service is told ${base}${CALLBACK_PATH}/…`),
      }).catch(rethrowRunError);
    } finally {
      view.close();
    }
    // The outcome first: a report of a large run takes a while to write, and an interrupted user waits.
    printer.summary(outcome.result.counts, outcome.exitCode);
    printer.outcome(outcome);
    const total = Object.values(outcome.result.counts).reduce((n, c) => n + c, 0);
    if (outcome.exitCode === EXIT.interrupted && total > REPORT_UNFINISHED_MAX_TASKS) {
      const why =
        outcome.result.stopReason === 'interrupted' ? 'on an interrupt' : 'while the run is unfinished';
      out(
        `  Report: not written ${why} (${total.toLocaleString('en-US')} tasks take a while); \`mediabatch report ${runId}\` or the next run writes it`,
      );
    } else {
      await printReport(a, out);
    }
    printer.closing(outcome);
    return endWith(runId, outcome);
  } finally {
    interrupts.dispose();
  }
}

/**
 * Above this many tasks a run that ends unfinished (Ctrl-C, --limit, money or budget ran out: exit 4)
 * exits without writing its report, about a second per 20,000 tasks: the next run or `mediabatch report`
 * writes it. A finished run always writes it.
 */
const REPORT_UNFINISHED_MAX_TASKS = 20_000;

/** The exit of a run that went: the stop's own line, unfinished tasks, failures, or 0. */
function endWith(runId: string, outcome: RunOutcome): number {
  const { result, exitCode: code } = outcome;
  if (result.stopReason) {
    throw new ExitError(
      code as 4 | 5,
      result.stopMessage ?? `stopped (${result.stopReason}); run the same command again to continue`,
    );
  }
  if (code === EXIT.interrupted) {
    throw new ExitError(
      EXIT.interrupted,
      `${outcome.unfinished} task(s) are unfinished: run the same command again to continue`,
    );
  }
  if (code === EXIT.someFailed) throw new ExitError(EXIT.someFailed, failureLine(runId, result.counts));
  return code;
}

/** Ctrl-C or SIGTERM once: stop submitting. Twice: quit at once. */
function interruptsFrom(io: CliIO): { stop: AbortSignal; halt: AbortSignal; dispose(): void } {
  const stop = new AbortController();
  const halt = new AbortController();
  let interrupts = 0;
  const onSignal = (name: string) => {
    interrupts++;
    if (interrupts === 1 || name === 'SIGTERM') {
      io.stderr.write(
        '\nStopping: no new submissions; waiting for the answers in flight (Ctrl-C again to quit at once)\n',
      );
      stop.abort();
    } else {
      halt.abort();
      // Every submission sent has its intent row: quitting now leaves them in doubt, never charged twice.
      io.stderr.write(
        '\nQuit at once: tasks whose answer was not recorded are in doubt; run again to resume\n',
      );
      io.exit?.(EXIT.interrupted);
    }
  };
  const onInt = () => onSignal('SIGINT');
  const onTerm = () => onSignal('SIGTERM');
  io.signals?.on('SIGINT', onInt);
  io.signals?.on('SIGTERM', onTerm);
  return {
    stop: stop.signal,
    halt: halt.signal,
    dispose() {
      io.signals?.off('SIGINT', onInt);
      io.signals?.off('SIGTERM', onTerm);
    },
  };
}

/** Writes the report; its line is printed (or returned), and a failure is a warning on stderr. */
async function printReport(
  a: DriveArgs,
  print: ((line: string) => void) | undefined,
  opts: { unlessCurrent?: boolean } = {},
): Promise<string | undefined> {
  const { io, config } = a.ctx;
  const written = await writeRunReport(a.session, {
    ...opts,
    ...(a.bucket ? { bucket: a.bucket } : {}),
    now: io.now(),
    ...(config.quota !== undefined ? { quota: config.quota } : {}),
  });
  if (!written.ok) {
    io.stderr.write(
      `warning: the report could not be written (${written.error.message}); run \`mediabatch report ${a.session.runId}\`\n`,
    );
    return undefined;
  }
  const line = `  Report: ${displayPath(io.cwd, written.markdown)} · gallery: ${displayPath(io.cwd, written.gallery)}`;
  print?.(line);
  return line;
}

/**
 * The embedded sandbox takes the port the example manifests name (`{{sandbox}}` defaults to
 * http://127.0.0.1:8787), so that their requests, which carry its address, are the same at every run; any
 * free port when that one is taken.
 */
async function startEmbeddedSandbox(speed: number) {
  try {
    return await startSandbox({ port: SANDBOX_DEFAULTS.port, speed, apiKey: SANDBOX_KEY });
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'EADDRINUSE') throw error;
    return startSandbox({ port: 0, speed, apiKey: SANDBOX_KEY });
  }
}

/** Where the lines for people go: stdout, or stderr when stdout carries --json events. */
function humanOut(io: CliIO, flags: RunFlags): CliIO['stdout'] {
  return flags.json ? io.stderr : io.stdout;
}

function parseListenOrExit(value: string): { host: string; port: number } {
  try {
    return parseListen(value);
  } catch (error) {
    throw new ExitError(EXIT.invalid, (error as Error).message);
  }
}

/**
 * MEDIABATCH_POLL_SCALE, for tests only (undocumented for users): multiplies every poll and retry delay
 * so that tests driving the CLI as a child process do not wait real seconds.
 */
/**
 * How many tasks a new run stores before it starts (the rest while it runs): every one for `--only` and
 * `--limit`, whose tasks are known only with all stored; MEDIABATCH_STORE_FIRST is a test-only setting.
 */
function storeFirstOf(flags: RunFlags, only: string[] | undefined, env: NodeJS.ProcessEnv) {
  if (only !== undefined || flags.limit !== undefined) return { storeFirst: Number.POSITIVE_INFINITY };
  const n = Number(env['MEDIABATCH_STORE_FIRST'] ?? '');
  return Number.isInteger(n) && n > 0 ? { storeFirst: n } : {};
}

function pollScaleFromEnv(env: NodeJS.ProcessEnv): number | undefined {
  const n = Number(env['MEDIABATCH_POLL_SCALE'] ?? '');
  return env['MEDIABATCH_POLL_SCALE'] && Number.isFinite(n) && n > 0 ? n : undefined;
}
