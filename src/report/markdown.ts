// report.md: the cost report as tables a person reads (and `mediabatch report` prints). Pure: the
// text comes a line at a time, so the writer streams it to the file.

import { commandLine } from '../results/invocation.js';
import { isNotOnDisk, NOT_ON_DISK } from '../store/report-reads.js';
import { UNFINISHED } from '../store/transitions.js';
import type { TaskState } from '../store/types.js';
import { tokensToUsd } from '../util/money.js';
import { countOf, fmtCount, fmtTokensWithUnit } from '../util/numbers.js';
import { headOfReport, invocationOfReport, type ReportHead } from './build.js';
import { COST_COLUMNS, costCells, moneyByKindPhrases } from './figures.js';
import { fmtBytes, fmtSeconds, fmtTime, fmtTokens, fmtUsd } from './format.js';
import type { Report, ReportSummary, ReportTask } from './schema.js';

/** The states listed under "Failed, rejected and blocked", after the paid ones without a result. */
export const FAILURE_STATES: readonly TaskState[] = ['failed', 'rejected', 'blocked'];

/**
 * report.md lists at most this many tasks in each of its tables (in doubt; paid, not on disk; failed,
 * rejected and blocked; all tasks), so it stays a page a person reads and `mediabatch report` prints, whatever the run's
 * size; report.csv and report.json list every task, and the gallery shows them all.
 */
export const MARKDOWN_LIST_LIMIT = 1000;

export function reportMarkdown(report: Report): string {
  const notOnDisk = report.tasks.filter((t) => isNotOnDisk(t.status));
  const problems = report.tasks.filter((t) => FAILURE_STATES.includes(t.status));
  return [
    ...markdownChunks(headOfReport(report), {
      inDoubt: report.in_doubt.slice(0, MARKDOWN_LIST_LIMIT),
      notOnDisk: notOnDisk.slice(0, MARKDOWN_LIST_LIMIT),
      problems: problems.slice(0, MARKDOWN_LIST_LIMIT),
      tasks: report.tasks.slice(0, MARKDOWN_LIST_LIMIT),
    }),
  ].join('');
}

/**
 * Long on purpose: report.md is one document written top to bottom, its sections side by side sharing the
 * head. report.md, a line at a time. The lists are read lazily, so they may come from the store a page at a
 * time; each should hold at most MARKDOWN_LIST_LIMIT entries (the first ones, in the report's order).
 */
export function* markdownChunks(
  head: ReportHead,
  lists: {
    inDoubt: Iterable<Report['in_doubt'][number]>;
    /** Charged tasks without a result on disk (unfetched, stalled, lost), in the report's order. */
    notOnDisk: Iterable<ReportTask>;
    problems: Iterable<ReportTask>;
    tasks: Iterable<ReportTask>;
  },
): Generator<string, void, void> {
  const { run, totals } = head;
  const line = (text: string) => `${text}\n`;
  yield line(`# Cost report: run ${code(run.id)}`) + line('');
  yield line(
    [
      `Manifest ${code(run.manifest)}`,
      `state **${run.state}**${run.exit_code === null ? '' : ` (exit ${run.exit_code})`}`,
      run.started_at === null ? '' : `started ${fmtTime(run.started_at)}`,
      run.finished_at === null ? '' : `ended ${fmtTime(run.finished_at)}`,
      run.active_s > 0 ? `active ${fmtSeconds(run.active_s)}` : '',
    ]
      .filter(Boolean)
      .join(' · '),
  ) + line('');
  const stopped = head.account?.run.stopped;
  if (stopped !== undefined)
    yield line(`Stopped (${stopped.label ?? stopped.reason}): ${stopped.message}`) + line('');
  yield line(
    `**${fmtCount(totals.by_status.done)} of ${countOf(totals.tasks, 'task')} done** · net **${fmtTokensWithUnit(totals.net.tokens)} (${fmtUsd(totals.net.usd)})** · ` +
      `estimated ${fmtTokensWithUnit(totals.estimated.tokens)} · charged ${fmtTokensWithUnit(totals.charged.tokens)} · refunded ${fmtTokensWithUnit(totals.refunded.tokens)}` +
      (totals.paid_without_result.tasks > 0
        ? ` · **${fmtCount(totals.paid_without_result.tasks)} paid without a result (${fmtTokensWithUnit(totals.paid_without_result.tokens)})**`
        : ''),
  ) + line('');
  const notes = [
    ...(head.account === undefined
      ? [totals.retried > 0 ? `${countOf(totals.retried, 'task')} retried after a failed, refunded job` : '']
      : moneyByKindPhrases(head.account)),
    totals.recovered_from_doubt > 0 ? `${totals.recovered_from_doubt} recovered from doubt` : '',
    totals.cost_assumed > 0
      ? `${totals.cost_assumed} with an assumed cost (the API did not state it; the list price is booked)`
      : '',
  ].filter(Boolean);
  if (notes.length > 0) yield line(`${notes.join(' · ')}.`) + line('');

  if (head.advice.length > 0) {
    yield line('## Needs your attention') + line('');
    // Our own sentences (with commands in code style); only the manifest path in them is the user's.
    for (const advice of head.advice) yield line(`- ${flat(advice)}`);
    yield line('');
  }
  if (head.inDoubt.count > 0) {
    yield line('### In doubt') + line('');
    yield line(row(['Task', 'Model', 'Sent', 'Up to (tokens)', 'Reason'])) +
      line(row(['---', '---', '---', '---:', '---']));
    for (const t of lists.inDoubt) {
      yield line(
        row([code(t.id), text(t.model), fmtTime(t.sent_at), fmtTokens(t.at_most), text(t.reason ?? '')]),
      );
    }
    yield line('');
    yield* more(head.inDoubt.count, 'in-doubt tasks');
  }

  yield line('## Cost by model') + line('');
  yield line(row(['Model', ...COST_COLUMNS])) + line(row(['---', ...COST_COLUMNS.map(() => '---:')]));
  for (const m of head.by_model) yield line(row([text(m.model), ...costCells(m)]));
  yield line(row(['**Total**', ...costCells(totals)])) + line('');
  yield line(
    'Tokens; USD at $' +
      `${head.usd_per_token} per token. "Charged ÷ list" compares what the API charged with the list price of the jobs whose price is known exactly.`,
  ) + line('');

  if (head.review !== undefined) yield* reviewSection(head.review, head.run);

  yield line('## Tasks by status') + line('');
  yield line(
    row([
      'Model',
      'Done',
      'Unfetched',
      'Stalled',
      'Lost',
      'Failed',
      'In doubt',
      'Rejected',
      'Blocked',
      'Skipped',
      'Unfinished',
    ]),
  ) + line(row(['---', '---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:']));
  for (const m of head.by_model) yield line(statusRow(text(m.model), m));
  yield line(statusRow('**Total**', totals)) + line('');

  yield line('## Balance and quota') + line('');
  const b = head.balance;
  yield line(
    `- Balance before the run: ${b.before === null ? 'unknown' : `${fmtTokensWithUnit(b.before)}`}; ` +
      `after: ${b.after === null ? 'unknown' : `${fmtTokensWithUnit(b.after)}`}` +
      (b.change === null
        ? '.'
        : `; change ${fmtTokensWithUnit(b.change)} (the ledger says this run's net is ${fmtTokens(totals.net.tokens)}; the API may round the balance, and other spending on the account shows here too).`),
  );
  if (head.quota.keys.length === 0) yield line(`- Nothing was charged, so no quota was used.`);
  for (const k of head.quota.keys) {
    const limit =
      k.limit === null
        ? 'quota unknown (set MEDIABATCH_QUOTA to check it)'
        : `quota ${fmtTokensWithUnit(k.limit)}, ${fmtTokens(k.used ?? 0)} used (${text(k.source ?? '')})`;
    yield line(
      `- Key ${code(k.key_fingerprint)} in ${head.quota.period}: the local ledger spent ${fmtTokensWithUnit(k.net)} ` +
        `(charged ${fmtTokensWithUnit(k.charged)}, refunded ${fmtTokensWithUnit(k.refunded)}), all runs; ${limit}.`,
    );
  }
  yield line('');

  const paid = totals.paid_without_result;
  if (paid.tasks > 0) {
    yield line('## Paid, not on disk') + line('');
    yield line(
      `${countOf(paid.tasks, 'task')} charged ${fmtTokensWithUnit(paid.tokens)} and ${paid.tasks === 1 ? 'its' : 'their'} result is not on disk. ` +
        `To resume, run ${code(commandLine(invocationOfReport(run), { command: 'run' }))}: it fetches unfetched results and keeps watching stalled jobs, and charges nothing twice. ` +
        'A lost result cannot be fetched: the service no longer has it.',
    ) + line('');
    yield line(row(['Task', 'Model', 'Status', 'Net (tokens)', 'Attempts', 'Reason'])) +
      line(row(['---', '---', '---', '---:', '---:', '---']));
    for (const t of lists.notOnDisk) {
      yield line(
        row([code(t.id), text(t.model), statusText(t), netText(t), attemptsText(t), text(t.error ?? '')]),
      );
    }
    yield line('');
    yield* more(paid.tasks, 'paid tasks not on disk');
  }

  const problems = FAILURE_STATES.reduce((n, state) => n + totals.by_status[state], 0);
  if (problems > 0) {
    yield line('## Failed, rejected and blocked tasks') + line('');
    yield line(row(['Task', 'Model', 'Status', 'Charged', 'Refunded', 'Error'])) +
      line(row(['---', '---', '---', '---:', '---:', '---']));
    for (const t of lists.problems) {
      yield line(
        row([
          code(t.id),
          text(t.model),
          t.status,
          fmtTokens(t.charged),
          fmtTokens(t.refunded),
          text(t.error ?? ''),
        ]),
      );
    }
    yield line('');
    yield* more(problems, 'failed, rejected or blocked tasks');
  }

  yield line('## Tasks') + line('');
  yield line(
    row(['Task', 'Model', 'Status', 'Attempts', 'Estimate', 'Charged', 'Refunded', 'Net', 'Took', 'Files']),
  ) + line(row(['---', '---', '---', '---:', '---:', '---:', '---:', '---:', '---:', '---']));
  for (const t of lists.tasks) {
    const range = (e: { tokens: number; min: number; max: number }) =>
      e.min === e.max ? fmtTokens(e.tokens) : `${fmtTokens(e.min)}–${fmtTokens(e.max)}`;
    // A chained task priced exactly once its upstream was done: the exact price, then the plan's.
    const planned = t.planned_estimate === null ? undefined : range(t.planned_estimate);
    const estimate =
      planned === undefined || planned === range(t.estimate)
        ? range(t.estimate)
        : `${range(t.estimate)} (plan ${planned})`;
    const after = t.after.length === 0 ? '' : ` ← ${t.after.map((u) => code(u.task)).join(', ')}`;
    yield line(
      row([
        code(t.id) + after,
        text(t.model),
        statusText(t),
        attemptsText(t),
        estimate,
        fmtTokens(t.charged),
        fmtTokens(t.refunded),
        netText(t),
        fmtSeconds(t.elapsed_s),
        t.files.map((f) => `${text(f.path)} (${fmtBytes(f.bytes)})`).join(', '),
      ]),
    );
  }
  if (totals.tasks > MARKDOWN_LIST_LIMIT) {
    yield line('') +
      line(
        `This list shows the first ${fmtCount(MARKDOWN_LIST_LIMIT)} of ${fmtCount(totals.tasks)} tasks (in doubt first, then manifest order): ` +
          'report.csv and report.json list every task, and the gallery (index.html) shows them all.',
      );
  }
  yield line('') +
    line(`Generated ${fmtTime(head.generated_at)} by mediabatch · report format version ${head.version}`);
}

/** After a list cut at MARKDOWN_LIST_LIMIT: how many more, and where they all are. */
function* more(total: number, what: string): Generator<string, void, void> {
  if (total <= MARKDOWN_LIST_LIMIT) return;
  yield `…and ${fmtCount(total - MARKDOWN_LIST_LIMIT)} more ${what}: report.csv and report.json list every task.\n\n`;
}

const STATUS_TEXT: Partial<Record<TaskState, string>> = {
  in_doubt: 'in doubt',
  unfetched: 'unfetched (paid, not on disk yet)',
  stalled: 'stalled (paid, past its deadline)',
  lost: 'lost (paid, result lost)',
};

function statusText(t: ReportTask): string {
  const status = STATUS_TEXT[t.status] ?? t.status;
  return t.recovered_from_doubt ? `${status}, recovered from doubt` : status;
}

/** Submissions sent; with how many were charged when that differs (some were refused or lost). */
function attemptsText(t: ReportTask): string {
  return t.charged_attempts === t.attempts
    ? String(t.attempts)
    : `${t.attempts} (${t.charged_attempts} charged)`;
}

function netText(t: ReportTask): string {
  return t.cost_assumed ? `${fmtTokens(t.net)} (assumed: list price)` : fmtTokens(t.net);
}

function statusRow(label: string, s: ReportSummary): string {
  const c = s.by_status;
  // Unfetched and stalled tasks are unfinished too, but have their own columns.
  const unfinished = UNFINISHED.filter((state) => !isNotOnDisk(state)).reduce((n, state) => n + c[state], 0);
  return row([
    label,
    fmtCount(c.done),
    ...NOT_ON_DISK.map((state) => fmtCount(c[state])),
    fmtCount(c.failed),
    fmtCount(c.in_doubt),
    fmtCount(c.rejected),
    fmtCount(c.blocked),
    fmtCount(c.skipped),
    fmtCount(unfinished),
  ]);
}

function row(cells: readonly string[]): string {
  return `| ${cells.join(' | ')} |`;
}

/**
 * Text from task ids, errors and the server, made inert: Markdown punctuation escaped (a renderer must
 * not turn it into links, HTML or emphasis) and line breaks flattened so a table row stays one line.
 */
export function text(value: string): string {
  return (
    value
      .replace(/[\r\n\t]+/g, ' ')
      .replace(/[\\`*[\]<>|~&]/g, (c) => `\\${c}`)
      // An underscore inside a word (flow22_spicy) never starts emphasis: left as is, for terminals.
      .replace(/(?<![\p{L}\p{N}])_|_(?![\p{L}\p{N}])/gu, '\\_')
  );
}

function flat(value: string): string {
  return value.replace(/[\r\n\t]+/g, ' ');
}

/** An id in code style; a backtick inside is handled by a longer fence (CommonMark). */
export function code(value: string): string {
  const inner = flat(value).replaceAll('|', '\\|');
  const longest = Math.max(0, ...(inner.match(/`+/g) ?? []).map((m) => m.length));
  const fence = '`'.repeat(longest + 1);
  const pad = inner.startsWith('`') || inner.endsWith('`') ? ' ' : '';
  return `${fence}${pad}${inner}${pad}${fence}`;
}

/** Where the decisions stand, and what re-rolls cost, apart from the first attempts. */
function* reviewSection(
  r: NonNullable<ReportHead['review']>,
  run: ReportHead['run'],
): Generator<string, void, void> {
  yield '## Review\n\n';
  yield `- ${countOf(r.reviewed, 'reviewed task')}: ${fmtCount(r.awaiting)} awaiting a decision, ${fmtCount(r.approved)} approved, ${fmtCount(r.rejected)} rejected.\n`;
  yield `- Re-rolls: ${fmtCount(r.rerolls.asked)} asked, ${countOf(r.rerolls.jobs, 'job')} charged, net ${fmtTokensWithUnit(r.rerolls.net)} (${fmtUsd(tokensToUsd(r.rerolls.net))}); each is one more charge the user asked for, included in the totals above.\n`;
  if (r.awaiting > 0)
    yield `- Decide with ${code(commandLine(invocationOfReport(run), { command: 'review' }))}.\n`;
  yield '\n';
}
