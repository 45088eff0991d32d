// The lines and JSON of `mediabatch status`: one run's screen, and what the list of runs shows of each.

import type { RunAccount } from '../account/index.js';
import { fmtSeconds } from '../report/format.js';
import { commandLine, type RunInvocation } from '../results/invocation.js';
import { inDoubtAdvice, tasksToContinue, unfinishedAdvice } from '../run/advice.js';
import type { ChainLine, RunStatus } from '../run/run-status.js';
import { PROBLEM_STATES, STATUS_PROBLEM_LIMIT } from '../run/run-status.js';
import {
  isNotOnDisk,
  NOT_ON_DISK,
  type ProblemTaskRow,
  type RunRecord,
  TASK_STATES,
  type TaskState,
  UNFINISHED,
  type WorkerRecord,
} from '../store/index.js';
import { roundTokens, tokensToUsd } from '../util/money.js';
import { countOf, fmtCount, fmtTokensWithUnit } from '../util/numbers.js';
import { STATE_LABELS } from '../view/labels.js';
import { workerJson as shownWorker } from '../view/workers.js';
import { displayPath, fmtTokens, fmtTokensAsUsd, table } from './format.js';

/** Each task state in a person's words, as every surface says it (the view's page reads the same list). */
export const LABEL = STATE_LABELS;

export function describeCounts(c: Record<TaskState, number>): string {
  const parts = [`${c.done} done`];
  for (const state of [
    'awaiting_review',
    'unfetched',
    'stalled',
    'lost',
    'failed',
    'in_doubt',
    'rejected',
    'blocked',
    'skipped',
  ] as const) {
    if (c[state] > 0) parts.push(`${c[state]} ${LABEL[state]}`);
  }
  // Unfetched, stalled and awaiting-review tasks are unfinished too, but named above.
  const unfinished = UNFINISHED.filter((s) => !isNotOnDisk(s) && s !== 'awaiting_review').reduce(
    (n, s) => n + c[s],
    0,
  );
  if (unfinished > 0) parts.push(`${unfinished} unfinished`);
  return parts.join(', ');
}

/** `status <run> --json`. */
export function runStatusJson(s: RunStatus, folder: string, cwd: string): string {
  const { paid } = s;
  return JSON.stringify(
    {
      ...runJson(s.run, s.counts, s.spent, cwd),
      stopped: s.account.run.stopped ?? null,
      estimated: roundTokens(s.spent.estimated),
      folder,
      paid_not_on_disk: {
        tasks: s.paidTasks,
        tokens: roundTokens(s.paidTokens),
        ...Object.fromEntries(
          NOT_ON_DISK.map((st) => [st, { tasks: paid[st].tasks, tokens: roundTokens(paid[st].tokens) }]),
        ),
      },
      problems: s.problems.map((t) => ({
        id: t.taskId,
        model: t.model,
        state: t.state,
        img_uuid: t.imgUuid,
        net: roundTokens(t.net),
        error: t.error,
      })),
      chains: s.chains.list,
      ...(s.chains.more > 0 ? { chains_not_listed: s.chains.more } : {}),
      ...(s.review ? { review: s.review } : {}),
      account: s.account,
    },
    null,
    2,
  );
}

/** `status <run>`: the run, its tasks and money, what to do next, its chains and the tasks that need the user. */
export function runStatusLines(s: RunStatus, folder: string, cwd: string, inv: RunInvocation): string[] {
  const { run, counts, spent } = s;
  const lines = [
    `Run ${run.id} (${displayPath(cwd, run.manifestPath)})`,
    `  State: ${run.state}${run.exitCode === null ? '' : ` (exit ${run.exitCode})`} · started ${shortTime(firstStart(run))}${run.finishedAt ? ` · ended ${shortTime(run.finishedAt)}` : ''}`,
    ...stoppedLine(s.account),
    `  Tasks: ${fmtCount(s.account.tasks)} (${
      TASK_STATES.filter((st) => counts[st] > 0)
        .map((st) => `${fmtCount(counts[st])} ${LABEL[st]}`)
        .join(', ') || 'none'
    })`,
    ...jobsLine(s.account),
    `  Tokens: estimated ${fmtTokens(roundTokens(spent.estimated))}, charged ${fmtTokens(roundTokens(spent.charged))}, refunded ${fmtTokens(roundTokens(spent.refunded))}, net ${fmtTokens(roundTokens(spent.net))} (${fmtTokensAsUsd(spent.net)})`,
    `  Files: ${displayPath(cwd, folder)}`,
    ...(s.account.review ? [`  ${reviewStatusLine(s.account)}`] : []),
  ];
  for (const paragraph of [...nextSteps(s, inv), ...chainTable(s, inv), ...problemTable(s, inv)])
    lines.push('', ...paragraph);
  return lines;
}

/** `Stopped: …` of `status <run>`: why a run that did not finish stopped, in the words it stopped with. */
function stoppedLine(account: RunAccount): string[] {
  const stopped = account.run.stopped;
  if (stopped === undefined) return [];
  const when = stopped.at === null ? '' : ` at ${shortTime(new Date(stopped.at))}`;
  return [`  Stopped (${stopped.label ?? stopped.reason})${when}: ${stopped.message}`];
}

/** A stop reason in words: which limit, or what ended the run. */

/** `Review: …` of `status <run>`: where the decisions stand, and re-roll spend apart. */
function reviewStatusLine(account: RunAccount): string {
  const r = account.review;
  if (r === null) return '';
  const reroll = account.money.by_kind.reroll;
  const rerolls =
    r.rerolls_asked > 0
      ? `; ${countOf(r.rerolls_asked, 're-roll')} asked, ${fmtTokensWithUnit(reroll.net)} net`
      : '';
  const command = account.next.find((step) => step.action === 'review')?.command;
  const next = r.awaiting > 0 && command ? `; \`${command}\` lists them` : '';
  const waiting =
    r.waiting > 0 ? ` (${countOf(r.waiting, 'task')} ${r.waiting === 1 ? 'waits' : 'wait'} for them)` : '';
  return `Review: ${fmtCount(r.reviewed)} reviewed: ${fmtCount(r.awaiting)} awaiting a decision${waiting}, ${fmtCount(r.approved)} approved, ${fmtCount(r.rejected)} rejected${rerolls}${next}`;
}

/** `Jobs: …` when some jobs were more than each task's first: retries, re-rolls, retries of doubt apart. */
function jobsLine(account: RunAccount): string[] {
  const k = account.money.by_kind;
  if (k.first.jobs === account.money.jobs) return [];
  const parts = [
    `${fmtCount(k.first.jobs)} first`,
    k.retry.jobs > 0 ? `${countOf(k.retry.jobs, 'retry', 'retries')} after a failed, refunded job` : '',
    k.reroll.jobs > 0 ? countOf(k.reroll.jobs, 're-roll') : '',
    k.doubt_retry.jobs > 0 ? `${fmtCount(k.doubt_retry.jobs)} sent again after doubt` : '',
    k.sent_again.jobs > 0 ? `${fmtCount(k.sent_again.jobs)} sent again with a changed request` : '',
  ].filter(Boolean);
  return [`  Jobs: ${fmtCount(account.money.jobs)} charged (${parts.join(', ')})`];
}

/** Paid tasks not on disk, tasks in doubt, unfinished tasks: each with the command that deals with it. */
function nextSteps({ run, counts, paid, paidTasks, paidTokens }: RunStatus, inv: RunInvocation): string[][] {
  const out: string[][] = [];
  if (paidTasks > 0) {
    const parts = NOT_ON_DISK.filter((st) => paid[st].tasks > 0).map(
      (st) => `${paid[st].tasks} ${LABEL[st]}, ${fmtTokensWithUnit(roundTokens(paid[st].tokens))}`,
    );
    out.push([
      `${paidTasks} paid task(s) not on disk (${fmtTokensWithUnit(roundTokens(paidTokens))}: ${parts.join('; ')}). ` +
        (paid.unfetched.tasks + paid.stalled.tasks > 0
          ? `\`${commandLine(inv, { command: 'run' })}\` fetches the results without paying again.`
          : 'The service no longer has the lost results: the errors say why.'),
    ]);
  }
  if (counts.in_doubt > 0) {
    out.push([inDoubtAdvice(counts.in_doubt, inv)]);
  }
  // Tasks held by a review go on after it: the Review line says so, with its command.
  const unfinished = tasksToContinue(counts);
  if (unfinished > 0 && run.state !== 'running') {
    out.push([unfinishedAdvice(unfinished, inv)]);
  }
  return out;
}

function chainTable({ chains }: RunStatus, inv: RunInvocation): string[][] {
  if (chains.list.length === 0) return [];
  const lines = [
    table([
      ['TASK', 'STATE', 'WAITS FOR'],
      ...chains.list.map((c: ChainLine) => [
        c.task,
        LABEL[c.state],
        c.after
          .map(
            (u) =>
              `${u.name === '' ? '' : `${u.name}: `}${u.task} (${u.state === null ? 'not in the run' : LABEL[u.state]}${u.review ? `, ${u.review}` : ''})`,
          )
          .join(', '),
      ]),
    ]),
  ];
  if (chains.more > 0)
    lines.push(
      `…and ${chains.more} more chained task(s); \`${commandLine(inv, { command: 'report' })}\` lists every task.`,
    );
  return [lines];
}

function problemTable({ counts, problems, others }: RunStatus, inv: RunInvocation): string[][] {
  if (problems.length === 0) return [];
  const lines = [
    table([
      ['TASK', 'MODEL', 'STATE', 'TOKENS', 'ERROR'],
      ...problems.map((t) => [t.taskId, t.model, LABEL[t.state], tokensOf(t), oneLine(t.error ?? '')]),
    ]),
  ];
  const listed = [...PROBLEM_STATES, ...others].reduce((n, st) => n + counts[st], 0);
  if (problems.length === STATUS_PROBLEM_LIMIT && listed > problems.length) {
    lines.push(
      `…the first ${STATUS_PROBLEM_LIMIT} shown; \`${commandLine(inv, { command: 'report' })}\` lists every task.`,
    );
  }
  return [lines];
}

export function runJson(
  run: RunRecord,
  counts: Record<TaskState, number>,
  spent: { charged: number; refunded: number; net: number },
  cwd: string,
) {
  return {
    id: run.id,
    manifest: run.manifestPath,
    manifest_display: displayPath(cwd, run.manifestPath),
    name: run.manifestName,
    state: run.state,
    exit_code: run.exitCode,
    created_at: run.createdAt.toISOString(),
    // The first start, as the report and the view say; the last (a resume, a joining worker) beside it.
    started_at: (run.firstStartedAt ?? run.startedAt)?.toISOString() ?? null,
    last_started_at: run.startedAt?.toISOString() ?? null,
    finished_at: run.finishedAt?.toISOString() ?? null,
    active_ms: run.activeMs,
    tasks: total(counts),
    by_state: counts,
    paid_not_on_disk: notOnDisk(counts),
    charged: roundTokens(spent.charged),
    refunded: roundTokens(spent.refunded),
    net: roundTokens(spent.net),
    net_usd: tokensToUsd(spent.net),
  };
}

/** What a listed task cost: its net, or for a task in doubt the most it may have cost. */
function tokensOf(t: ProblemTaskRow): string {
  if (t.state === 'in_doubt') return `up to ${fmtTokens(roundTokens(t.estimateMax))}`;
  return fmtTokens(roundTokens(t.net));
}

/** Charged tasks without a result on disk, from the counts by state. */
export function notOnDisk(counts: Record<TaskState, number>): number {
  return NOT_ON_DISK.reduce((n, s) => n + counts[s], 0);
}

export function total(counts: Record<TaskState, number>): number {
  return TASK_STATES.reduce((n, s) => n + counts[s], 0);
}

/** A run's workers (a PostgreSQL state): where each runs, since when, what it holds, when it last beat. */
export function workerLines(workers: readonly WorkerRecord[], now: Date): string[] {
  const live = workers.filter((w) => w.stoppedAt === undefined && !w.lost).length;
  const lost = workers.filter((w) => w.lost).length;
  const rows = [
    ['WORKER', 'HOST', 'SINCE', 'IN FLIGHT', 'SENT', 'LAST HEARTBEAT', 'STATE'],
    ...workers.map((w) => [
      w.workerId,
      w.host,
      shortTime(w.startedAt),
      String(shownWorker(w).in_flight),
      String(w.submitted),
      // As the view's panel says it: `33 min 50 s ago`.
      `${fmtSeconds(Math.max(0, Math.round((now.getTime() - w.heartbeatAt.getTime()) / 1000)))} ago`,
      w.lost ? 'lost' : w.stoppedAt !== undefined ? `left ${shortTime(w.stoppedAt)}` : 'working',
    ]),
  ];
  return [
    `Workers: ${live} working${lost > 0 ? `, ${lost} lost` : ''}, ${workers.length} in all`,
    table(rows),
  ];
}

export function workerJson(w: WorkerRecord): Record<string, unknown> {
  return {
    worker: w.workerId,
    host: w.host,
    pid: w.pid,
    started_at: w.startedAt.toISOString(),
    heartbeat_at: w.heartbeatAt.toISOString(),
    stopped_at: w.stoppedAt?.toISOString() ?? null,
    state: shownWorker(w).state,
    in_flight: shownWorker(w).in_flight,
    submitted: w.submitted,
    lost: w.lost,
  };
}

/** When the run first started (a resume moves its last start only), or was made if it never started. */
export function firstStart(run: Pick<RunRecord, 'firstStartedAt' | 'startedAt' | 'createdAt'>): Date {
  return run.firstStartedAt ?? run.startedAt ?? run.createdAt;
}

export function shortTime(date: Date): string {
  return `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/** Errors come from the server and the network: one line each, and no terminal control sequences. */
function oneLine(text: string): string {
  const flat = text
    .replace(/\p{Cc}+/gu, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  return flat.length > 200 ? `${flat.slice(0, 199)}…` : flat;
}
