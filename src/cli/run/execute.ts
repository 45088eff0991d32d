// `mediabatch run` executing: local inputs uploaded, the library's executeRun with the progress view and
// the signals, then the outcome as lines, the report, and the exit.

import { dirname, resolve } from 'node:path';
import { describeRun, invocationCommand, type RunAccount } from '../../account/index.js';
import { commandLine, type RunInvocation } from '../../results/invocation.js';
import { CALLBACK_PATH } from '../../run/callbacks.js';
import { shownRunState } from '../../run/lease.js';
import { executeRun, type RunOutcome, writeRunReport } from '../../run/lifecycle.js';
import type { StopReason } from '../../run/runner/types.js';
import { runInputLinks } from '../../run/runner/uploads.js';
import { pollScaleFromEnv, scaledRunPolicy } from '../../run/settings.js';
import { embeddedInputStorage } from '../../sandbox/uploads.js';
import { createStorage } from '../../storage/index.js';
import { EXIT, ExitError } from '../errors.js';
import { displayPath } from '../format.js';
import { ProgressView } from '../progress.js';
import { readerOf, runInvocation } from '../read.js';
import { type DriveArgs, humanOut } from './context.js';
import { interruptsFrom } from './interrupts.js';
import { failureLine, reviewLine, type runPrinter, stoppedLine } from './lines.js';

/**
 * Local `file:` inputs of the unfinished tasks, uploaded once before the first POST (nothing is sent
 * when this fails); the function that links them at each POST, or undefined without local inputs.
 */
async function uploadLocalInputsFor(a: DriveArgs, out: (line?: string) => void) {
  // Without a bucket, the embedded sandbox of --sandbox keeps the files itself (and says so).
  const storage = a.ctx.config.storage
    ? createStorage(a.ctx.config.storage, { env: a.ctx.io.env })
    : a.onSandbox
      ? embeddedInputStorage(a.client.baseUrl, out)
      : undefined;
  return runInputLinks(a.session.store, a.session.runId, dirname(resolve(a.ctx.io.cwd, a.file)), storage, {
    ...(a.flags.allowOutsideData ? { allowOutside: true } : {}),
    onProgress: (done, total, input, result) =>
      out(
        `  Upload ${done}/${total}: ${input.path} ${result.uploaded ? 'uploaded' : result.recorded ? 'already in the bucket (uploaded by an earlier run)' : 'already in the bucket'}`,
      ),
  });
}

/** The run's account now, as every frame of the progress line and `status` state it. */
function accountNow(a: DriveArgs): RunAccount {
  return describeRun(a.session.store, a.session.runId, {
    shownState: (r) => shownRunState(a.session.store, r, a.ctx.io.now()),
    command: invocationCommand(invocationOfDrive(a)),
  });
}

/** Signals to abort signals, progress to the view, then the library runs it; the outcome as lines. */
export async function executeAndReport(
  a: DriveArgs,
  /** Tasks of the run, for the progress bar. */
  total: number,
  budget: number | undefined,
  out: (line?: string) => void,
  printer: ReturnType<typeof runPrinter>,
): Promise<number> {
  const { io } = a.ctx;
  const { session, plan, flags } = a;
  const interrupts = interruptsFrom(io);
  const view = new ProgressView({
    out: humanOut(io, flags),
    interactive: io.interactive,
    total,
    estimate: plan.totals.tokens,
    reviewCommand: commandLine(invocationOfDrive(a), { command: 'review' }),
    account: () => accountNow(a),
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
        ...(flags.waitForReview ? { waitForReview: true } : {}),
        stop: interrupts.stop,
        halt: interrupts.halt,
        onProgress: (p) => view.update(p),
        onEvent: printer.event,
        onReceiver: (receiver, base) =>
          out(`  Callbacks: receiver on ${receiver.localUrl}; the service is told ${base}${CALLBACK_PATH}/…`),
      });
      // The line ends on the run's account: the same counts and money as `status` and the report.
      view.finish(accountNow(a));
    } finally {
      view.close();
    }
    const left = await reportOutcome(a, outcome, out, printer);
    if (left !== undefined) return left;
    printer.closing(outcome);
    return endWith(invocationOfDrive(a), outcome);
  } finally {
    interrupts.dispose();
  }
}

/**
 * The outcome's lines and the report (written by the last worker out of a fleet's run only); a worker
 * that left a run others still work on ends here, with its exit code.
 */
async function reportOutcome(
  a: DriveArgs,
  outcome: RunOutcome,
  out: (line?: string) => void,
  printer: ReturnType<typeof runPrinter>,
): Promise<number | undefined> {
  const { session } = a;
  if (outcome.left && !outcome.result.stopReason) {
    out(
      `Left run ${session.runId}: nothing left for this worker; ${outcome.left.others} other worker(s) still on it, and the last one out closes the run and writes its report.`,
    );
    return EXIT.ok;
  }
  // The outcome first: a report of a large run takes a while to write, and an interrupted user waits.
  printer.summary(outcome.result.counts, outcome.exitCode);
  printer.outcome(outcome);
  const tasks = Object.values(outcome.result.counts).reduce((n, c) => n + c, 0);
  if (outcome.left) {
    out(`  Report: written by the last worker out (${outcome.left.others} other worker(s) still on the run)`);
  } else if (outcome.exitCode === EXIT.interrupted && tasks > REPORT_UNFINISHED_MAX_TASKS) {
    const why =
      outcome.result.stopReason === 'interrupted' ? 'on an interrupt' : 'while the run is unfinished';
    out(
      `  Report: not written ${why} (${tasks.toLocaleString('en-US')} tasks take a while); \`${commandLine(invocationOfDrive(a), { command: 'report' })}\` or the next run writes it`,
    );
  } else {
    await printReport(a, out);
  }
  return undefined;
}

/**
 * Above this many tasks a run that ends unfinished (Ctrl-C, --limit, money or budget ran out: exit 4)
 * exits without writing its report, about a second per 20,000 tasks: the next run or `mediabatch report`
 * writes it. A finished run always writes it.
 */
const REPORT_UNFINISHED_MAX_TASKS = 20_000;

/** The exit of a run that went: the stop's own line, unfinished tasks, failures, or 0. */
function endWith(inv: RunInvocation, outcome: RunOutcome): number {
  const { result, exitCode: code } = outcome;
  if (result.stopReason) {
    const message = result.stopMessage ?? `stopped (${result.stopReason}); run again to continue`;
    throw new ExitError(code as 4 | 5, stoppedLine(inv, message, RESUMABLE.has(result.stopReason)));
  }
  // Only people are left to act: how many results wait, and the command that decides.
  if (code === EXIT.interrupted && result.awaitingReview > 0) {
    throw new ExitError(EXIT.interrupted, reviewLine(inv, outcome));
  }
  if (code === EXIT.interrupted) {
    throw new ExitError(
      EXIT.interrupted,
      `${outcome.unfinished} task(s) are unfinished${result.unfinishedWhy ? ` (${result.unfinishedWhy})` : ''}: \`${commandLine(inv, { command: 'run' })}\` continues the run`,
    );
  }
  if (code === EXIT.someFailed) throw new ExitError(EXIT.someFailed, failureLine(inv, result.counts));
  return code;
}

/**
 * Stops after which the same run goes on by running it again (once money, the network or the disk
 * allow): their line ends with the command. A refused key or a lost lease needs the person first.
 */
const RESUMABLE: ReadonlySet<StopReason> = new Set<StopReason>([
  'interrupted',
  'insufficient-tokens',
  'quota-exceeded',
  'budget',
  'period-budget',
  'unreachable',
  'local-disk',
  'limit',
]);

/** The run's invocation as this `run` reached it (its state file, its config, its recorded flags). */
export function invocationOfDrive(a: DriveArgs): RunInvocation {
  const run = a.session.store.runs.getRun(a.session.runId);
  if (run === undefined) throw new Error(`internal: run ${a.session.runId} is not in the state file`);
  return runInvocation(run, a.ctx);
}

/** Writes the report; its line is printed (or returned), and a failure is a warning on stderr. */
export async function printReport(
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
    reader: readerOf(a.ctx),
  });
  if (!written.ok) {
    io.stderr.write(
      `warning: the report could not be written (${written.error.message}); run \`${commandLine(invocationOfDrive(a), { command: 'report' })}\`\n`,
    );
    return undefined;
  }
  const line = `  Report: ${displayPath(io.cwd, written.markdown)} · gallery: ${displayPath(io.cwd, written.gallery)}`;
  print?.(line);
  return line;
}
