// `mediabatch run` once its session is open: what the session found, the preflight, the question, then
// the run itself (./execute.ts).

import {
  closeCompleteRun,
  effectiveBudget,
  type PreflightReport,
  preflightOptions,
  preflightRun,
} from '../../run/lifecycle.js';
import type { RunSession } from '../../run/session.js';
import { refusalOf } from '../../run/unattended.js';
import { fmtTokensWithUnit } from '../../util/numbers.js';
import { EXIT, ExitError } from '../errors.js';
import { displayPath } from '../format.js';
import type { CliIO } from '../io.js';
import { type DriveArgs, humanOut, type RunFlags } from './context.js';
import { executeAndReport, invocationOfDrive, printReport } from './execute.js';
import { describeCounts, failureLine, runPrinter } from './lines.js';

/** Prints what the session found, the preflight, asks, then executes and prints the outcome. */
export async function driveRun(a: DriveArgs): Promise<number> {
  const { io, config } = a.ctx;
  const { session, plan, flags } = a;
  const { runId } = session;
  const settings = plan.settings;
  const out = (line = '') => humanOut(io, flags).write(`${line}\n`);
  const printer = runPrinter(a, out);
  const budget = effectiveBudget(settings.budget, flags.budgetCap);
  if (session.fleet?.joined) {
    // The run's preflight (balance, quota, budget) was the first worker's, once for the run.
    out(
      `Joined run ${runId} as a worker (${session.fleet.workers} worker${session.fleet.workers === 1 ? '' : 's'} now, ${session.holder}); the run was planned and checked by the worker that started it.`,
    );
    const counts = session.store.tasks.countTasksByState(runId);
    // A plan still being stored counts its tasks not stored yet.
    const total = Object.values(counts).reduce((n, c) => n + c, session.storing?.unstored ?? 0);
    return await executeAndReport(a, total, budget, out, printer);
  }
  printer.opened();
  if (a.shardLine) out(`  ${a.shardLine}`);
  const options = preflightOptions({
    client: a.client,
    keyFingerprint: a.fingerprint,
    configQuota: config.quota,
    settings,
    budgetCap: flags.budgetCap,
    allowPartial: flags.allowPartial,
    only: a.only,
    limit: flags.limit,
    order: flags.order,
    now: io.now(),
    shown: (p) => displayPath(io.cwd, p),
  });
  const report = await preflightRun(session, options);
  if (report.complete) {
    const code = closeCompleteRun(session, report.counts);
    out(
      `Run ${runId} is already complete: ${describeCounts(report.counts)}. Files are in ${displayPath(io.cwd, session.runDir)}.`,
    );
    // Nothing moved since the last report was written: it stays as it is (a minute at a million tasks).
    await printReport(a, out, { unlessCurrent: true });
    printer.summary(report.counts, code);
    if (code !== EXIT.ok)
      throw new ExitError(EXIT.someFailed, failureLine(invocationOfDrive(a), report.counts));
    return code;
  }
  printer.preflight(report);
  refuseIfNeeded(session, report, flags);
  await confirmOrRefuse(session, report, flags, io);
  const total = Object.values(report.counts).reduce((n, c) => n + c, 0);
  return await executeAndReport(a, total, budget, out, printer);
}

/** The preflight's refusals: the output folder, then money; each one line, exit 3. */
function refuseIfNeeded(session: RunSession, report: PreflightReport, flags: RunFlags): void {
  const refusal = refusalOf(report, flags.allowPartial ?? false);
  if (refusal === undefined) return;
  session.refuse(EXIT.refused, refusal);
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
    `Submit ${report.pendingCount} task(s) for up to ${fmtTokensWithUnit(report.remaining.max)}? [y/N] `,
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
