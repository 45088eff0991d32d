// The lines `run` prints for people, and its --json events: one place that words a run.

import { describeRun, invocationCommand } from '../../account/index.js';
import { roundTokens } from '../../catalog/index.js';
import type { RunPlan } from '../../plan/build.js';
import { commandLine, type RunInvocation } from '../../results/invocation.js';
import { type RunEvent, stamp } from '../../run/events.js';
import { shownRunState } from '../../run/lease.js';
import type { PreflightReport, RunOutcome } from '../../run/lifecycle.js';
import { ageOf } from '../../run/resume.js';
import type { RunResult } from '../../run/runner.js';
import { leftOutUpstreams } from '../../run/select.js';
import type { RunSession } from '../../run/session.js';
import type { TaskState } from '../../store/index.js';
import { UNFINISHED } from '../../store/index.js';
import { fmtTokensWithUnit, withTokenUnit } from '../../util/numbers.js';
import { scrub } from '../../util/secrets.js';
import { EXIT } from '../errors.js';
import { displayPath, fmtRange, fmtTokens, fmtTokensAsUsd, table } from '../format.js';
import type { CliIO } from '../io.js';
import { runInvocation } from '../read.js';

/** What the printer needs to know of the run command. */
export interface PrinterArgs {
  file: string;
  flags: { json?: boolean; allowPartial?: boolean };
  ctx: { io: CliIO; statePath: string; configFile?: string };
  session: RunSession;
  plan: RunPlan;
  /** `--only`, resolved to task ids. */
  only?: readonly string[] | undefined;
}

/**
 * Long on purpose: it is the one place that words a run, a table of short printers side by side, each
 * read on its own. Every line `run` prints for people, and the --json events on stdout.
 */
export function runPrinter(a: PrinterArgs, out: (line?: string) => void) {
  const { io } = a.ctx;
  const { session, plan, flags } = a;
  const { runId } = session;
  const settings = plan.settings;
  /** The commands printed about this run (or another one of this state file) carry its flags. */
  const inv = (id = runId): RunInvocation => {
    const run = session.store.runs.getRun(id);
    if (run === undefined) throw new Error(`internal: run ${id} is not in the state file`);
    return runInvocation(run, a.ctx);
  };
  const event = (e: RunEvent) => {
    // With --json, stdout carries one event per line and nothing else.
    if (flags.json) io.stdout.write(`${scrub(JSON.stringify(e))}\n`);
  };
  return {
    event,
    opened() {
      const { choice, upsert, recovered, requeued } = session;
      if (choice.resumed) {
        out(
          `Resuming run ${runId} of this manifest, started ${ageOf(choice.resumed, io.now())} ago and unfinished (pass --new-run to start ${settings.runId} instead).`,
        );
      }
      if (session.outputMoved) {
        const { from, to } = session.outputMoved;
        out(
          `Run ${runId} wrote nothing to ${displayPath(io.cwd, from)}: its results now go to ${displayPath(io.cwd, to)}, the manifest's output.`,
        );
      }
      if (choice.leftBehind) {
        const { run, owed } = choice.leftBehind;
        out(
          `--new-run: run ${run.id} of this manifest is unfinished${owed > 0 ? ` and still owes ${owed} paid or possibly paid task(s); resume it later with \`${commandLine(inv(run.id), { command: 'run' })}\`` : ''}.`,
        );
      }
      if (upsert.changed.length > 0)
        out(
          `Resubmitting ${upsert.changed.length} changed task(s): ${upsert.changed.map((c) => c.taskId).join(', ')}`,
        );
      if (upsert.missing.length > 0)
        out(
          `${upsert.missing.length} task(s) of run ${runId} are no longer in the manifest and are left alone.`,
        );
      if (recovered.length > 0)
        out(
          `${recovered.length} task(s) were being submitted when the last run stopped; they are in doubt: ${recovered.join(', ')}`,
        );
      if (requeued.failed.length > 0)
        out(
          `--retry-failed: ${requeued.failed.length} failed or rejected task(s) will be submitted again, each as a new attempt (failed jobs were refunded).`,
        );
      if (requeued.inDoubt.length > 0)
        out(
          `--retry-in-doubt: ${requeued.inDoubt.length} task(s) will be submitted again (they may be charged twice).`,
        );
      const leftOut = a.only ? leftOutUpstreams(session.store, runId, a.only) : [];
      if (leftOut.length > 0) {
        const shown = leftOut
          .slice(0, 5)
          .map(
            (l) =>
              `${l.taskId} waits for ${l.upstreamId} (${(l.state ?? 'not in the run').replace('_', ' ')})`,
          );
        if (leftOut.length > 5) shown.push(`${leftOut.length - 5} more`);
        out(
          `--only leaves out tasks that selected ones wait for, so those stay pending: ${shown.join(', ')}; add the upstreams to --only`,
        );
      }
    },
    preflight(r: PreflightReport) {
      out(
        session.existing
          ? `Resuming run ${runId} (${describeCounts(r.counts)})`
          : `Run ${runId}: ${plan.totals.tasks} tasks from ${a.file}`,
      );
      if (r.pendingCount > 0) {
        out(
          table([
            ['  MODEL', 'TASKS', 'TOKENS', 'USD'],
            ...r.pending.map((m) => [
              `  ${m.model}`,
              String(m.tasks),
              fmtRange(roundTokens(m.tokens), roundTokens(m.min), roundTokens(m.max)),
              fmtTokensAsUsd(roundTokens(m.max)),
            ]),
          ]),
        );
      }
      const { tokens, min, max } = r.remaining;
      out(
        `  To submit: ${r.pendingCount} task(s), ${withTokenUnit(fmtRange(tokens, min, max))} (up to ${fmtTokensAsUsd(max)})`,
      );
      if (r.waitingOnReview > 0)
        out(
          `  Of these, ${r.waitingOnReview} wait for a reviewed result: priced as if approved (the worst case); a rejected one's are skipped, nothing charged`,
        );
      if (r.toWatch > 0) out(`  Already submitted and still watched: ${r.toWatch}`);
      const left = r.decision.leftAfter;
      out(
        `  Balance: ${r.balance === undefined ? `unknown (${r.balanceProblem ?? ''})` : `${fmtTokensWithUnit(r.balance)}, ${afterTheRun(left.balance ?? 0, 'the balance')}`}`,
      );
      if (r.quota) {
        out(
          `  Quota: ${fmtTokens(r.quota.used)} of ${fmtTokensWithUnit(r.quota.limit)} used this period (${r.quota.source}), ${afterTheRun(left.quota ?? 0, 'the quota leaves this period')}`,
        );
      } else out(`  Quota: unknown (set MEDIABATCH_QUOTA or quota: in mediabatch.config.yaml to check it)`);
      if (r.budget !== undefined) {
        out(
          `  Budget: ${fmtTokensWithUnit(r.budget)}${r.budget !== settings.budget ? ' (what is left of budget_per_period)' : ''}, ${fmtTokensWithUnit(r.chargedSoFar)} charged so far${r.reservedSoFar > 0 ? `, ${fmtTokensWithUnit(r.reservedSoFar)} reserved for tasks in doubt or in flight` : ''}, ${afterTheRun(left.budget ?? 0, 'the budget leaves')}`,
        );
      }
      if (r.disk && !r.disk.ok && flags.allowPartial && r.disk.problem === 'space')
        out(`  --allow-partial: ${r.disk.found}; the run stops cleanly when the disk is full`);
      if (r.decision.ok && r.decision.refusals.length > 0)
        out(
          `  --allow-partial: ${r.decision.refusals.join('; ')}; the run stops cleanly when money runs out`,
        );
    },
    summary(counts: Record<TaskState, number>, code: number) {
      const spent = session.store.ledger.runSpent(runId);
      const { charged, refunded, net } = spent;
      event(stamp({ event: 'summary', counts, charged, refunded, net, exit_code: code }, runId, io.now()));
    },
    /** The run's outcome, up to its files; the report's line follows once it is written, then closing(). */
    outcome(o: RunOutcome) {
      const { result } = o;
      const account = describeRun(session.store, runId, {
        shownState: (r) => shownRunState(session.store, r, io.now()),
        command: invocationCommand(inv()),
      });
      out('');
      // The run's counts and money as its account states them (status, the report, the progress line's
      // last frame): the estimate now follows chained tasks priced exactly and skipped ones left out.
      out(`Run ${runId}: ${describeCounts(account.by_state)}`);
      const { charged, refunded, net } = account.money;
      const now = account.estimate.tokens;
      const estimated =
        fmtTokens(now) === fmtTokens(plan.totals.tokens)
          ? `estimated ${fmtTokensWithUnit(plan.totals.tokens)}`
          : `estimated ${fmtTokensWithUnit(plan.totals.tokens)} at the plan, ${fmtTokensWithUnit(now)} now`;
      out(
        `  Charged ${fmtTokensWithUnit(charged)}, refunded ${fmtTokensWithUnit(refunded)}, net ${fmtTokensWithUnit(net)} (${fmtTokensAsUsd(net)}); ${estimated}`,
      );
      if (o.balanceAfter !== undefined) out(`  Balance now: ${fmtTokensWithUnit(o.balanceAfter)}`);
      for (const line of attentionLines(result, inv())) out(line);
      if (result.counts.in_doubt > 0) {
        out(
          `  ${result.counts.in_doubt} task(s) in doubt: sent, but the answer was lost, so they may have been charged. They are not resubmitted; check your account, then \`${commandLine(inv(), { command: 'run', retryInDoubt: true })}\` submits them anyway.`,
        );
      }
      if (o.receiverStats) {
        out(
          `  Results: ${result.arrivals.callback} arrived by callback, ${result.arrivals.poll} by polling (${o.receiverStats.received} callbacks received, ${o.receiverStats.ignored} ignored)`,
        );
      }
      out(`  Files: ${displayPath(io.cwd, session.runDir)}`);
    },
    closing(o: RunOutcome) {
      const { result } = o;
      if (plan.totals.tasks !== result.counts.done && o.exitCode === EXIT.someFailed)
        out(`  \`${commandLine(inv(), { command: 'status' })}\` lists what failed and why.`);
    },
  };
}

/**
 * What a limit leaves after the run's worst case; over it (a run let in by --allow-partial), by how much the
 * worst case goes past what the limit leaves, never a negative "left".
 */
function afterTheRun(left: number, limit: string): string {
  return left >= 0
    ? `${fmtTokensWithUnit(left)} left after the run at most`
    : `the run can cost up to ${fmtTokensWithUnit(-left)} more than ${limit}`;
}

/** What the user should know about tasks that are paid but not on disk, stalled, retried or recovered. */
export function attentionLines(result: RunResult, inv: RunInvocation): string[] {
  const c = result.counts;
  const lines: string[] = [];
  const again = commandLine(inv, { command: 'run' });
  if (c.unfetched > 0)
    lines.push(
      `  ${c.unfetched} task(s) unfetched: charged, but the result is not on disk yet. \`${again}\` fetches them without paying again.`,
    );
  if (c.stalled > 0)
    lines.push(
      `  ${c.stalled} task(s) stalled: no result long past the expected time. Still watched; \`${again}\` later keeps watching them.`,
    );
  if (c.lost > 0)
    lines.push(
      `  ${c.lost} task(s) paid, result lost: the service no longer has the job (\`${commandLine(inv, { command: 'status' })}\` says why).`,
    );
  if (result.retriedFailures > 0)
    lines.push(
      `  ${result.retriedFailures} failed job(s) submitted again (retries); the failed attempts were refunded.`,
    );
  if (result.recoveredFromDoubt > 0)
    lines.push(
      `  ${result.recoveredFromDoubt} task(s) recovered from doubt: a callback proved the job was accepted.`,
    );
  if (result.unreadableAnswers > 0)
    lines.push(
      `  ${result.unreadableAnswers} answer(s) from the API could not be read and were retried (see the log).`,
    );
  return lines;
}

/** The one line for exit 2: how many tasks did not succeed, in which way, and where to look. */
export function failureLine(inv: RunInvocation, c: Record<TaskState, number>): string {
  const parts: string[] = [];
  if (c.failed) parts.push(`${c.failed} failed`);
  if (c.rejected) parts.push(`${c.rejected} rejected by the API (not charged)`);
  if (c.in_doubt) parts.push(`${c.in_doubt} in doubt (resubmitted only with --retry-in-doubt)`);
  if (c.blocked) parts.push(`${c.blocked} blocked`);
  if (c.lost) parts.push(`${c.lost} paid but the result is lost`);
  const n = c.failed + c.rejected + c.in_doubt + c.blocked + c.lost;
  return `${n} task(s) did not succeed: ${parts.join(', ')}; \`${commandLine(inv, { command: 'status' })}\` says why`;
}

export function describeCounts(c: Record<TaskState, number>): string {
  const parts = [`${c.done} done`];
  if (c.awaiting_review) parts.push(`${c.awaiting_review} awaiting review`);
  if (c.failed) parts.push(`${c.failed} failed`);
  if (c.in_doubt) parts.push(`${c.in_doubt} in doubt`);
  if (c.rejected) parts.push(`${c.rejected} rejected`);
  if (c.blocked) parts.push(`${c.blocked} blocked`);
  if (c.skipped) parts.push(`${c.skipped} skipped`);
  if (c.lost) parts.push(`${c.lost} lost`);
  if (c.unfetched) parts.push(`${c.unfetched} unfetched`);
  if (c.stalled) parts.push(`${c.stalled} stalled`);
  const named = ['unfetched', 'stalled', 'awaiting_review'];
  const unfinished = UNFINISHED.reduce((n, s) => (named.includes(s) ? n : n + c[s]), 0);
  if (unfinished) parts.push(`${unfinished} unfinished`);
  return parts.join(', ');
}

/** The one line for exit 4 when only people are left to act: how many results wait, and the command that decides. */
export function reviewLine(
  inv: RunInvocation,
  outcome: { result: { awaitingReview: number }; unfinished: number },
): string {
  const waiting = outcome.unfinished > 0 ? ` (${outcome.unfinished} task(s) wait for them)` : '';
  return `${outcome.result.awaitingReview} result(s) await review${waiting}: \`${commandLine(inv, { command: 'review' })}\` lists them to approve, reject or re-roll; then \`${commandLine(inv, { command: 'run' })}\` sends what was approved (or \`${commandLine(inv, { command: 'run', waitForReview: true })}\` waits for the decisions)`;
}

/** The one line of a run that stopped before its end, with the command that continues it. */
export function stoppedLine(inv: RunInvocation, message: string, resumable: boolean): string {
  return resumable ? `${message}: \`${commandLine(inv, { command: 'run' })}\`` : message;
}
