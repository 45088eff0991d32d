// report.md: the cost report as tables a person reads (and `mediabatch report` prints). Pure.

import type { TaskState } from '../store/types.js';
import { fmtBytes, fmtPercent, fmtSeconds, fmtTime, fmtTokens, fmtUsd } from './format.js';
import type { Report, ReportSummary } from './schema.js';

const UNFINISHED: readonly TaskState[] = ['pending', 'submitting', 'submitted', 'running', 'downloading'];
const PROBLEMS: readonly TaskState[] = ['failed', 'rejected', 'blocked'];

export function reportMarkdown(report: Report): string {
  const { run, totals } = report;
  const out: string[] = [];
  out.push(`# Cost report: run ${code(run.id)}`, '');
  out.push(
    [
      `Manifest ${code(run.manifest)}`,
      `state **${run.state}**${run.exit_code === null ? '' : ` (exit ${run.exit_code})`}`,
      run.started_at === null ? '' : `started ${fmtTime(run.started_at)}`,
      run.finished_at === null ? '' : `ended ${fmtTime(run.finished_at)}`,
    ]
      .filter(Boolean)
      .join(' · '),
    '',
  );
  out.push(
    `**${totals.by_status.done} of ${totals.tasks} tasks done** · net **${fmtTokens(totals.net.tokens)} tokens (${fmtUsd(totals.net.usd)})** · ` +
      `estimated ${fmtTokens(totals.estimated.tokens)} tokens · charged ${fmtTokens(totals.charged.tokens)} · refunded ${fmtTokens(totals.refunded.tokens)}`,
    '',
  );

  if (report.advice.length > 0) {
    out.push('## Needs your attention', '');
    // Our own sentences (with commands in code style); only the manifest path in them is the user's.
    for (const line of report.advice) out.push(`- ${flat(line)}`);
    out.push('');
  }
  if (report.in_doubt.length > 0) {
    out.push('### In doubt', '');
    out.push(
      row(['Task', 'Model', 'Sent', 'Up to (tokens)', 'Reason']),
      row(['---', '---', '---', '---:', '---']),
    );
    for (const t of report.in_doubt) {
      out.push(
        row([code(t.id), text(t.model), fmtTime(t.sent_at), fmtTokens(t.at_most), text(t.reason ?? '')]),
      );
    }
    out.push('');
  }

  out.push('## Cost by model', '');
  out.push(
    row(['Model', 'Tasks', 'Jobs', 'Estimated', 'Charged', 'Refunded', 'Net', 'Net USD', 'Charged ÷ list']),
    row(['---', '---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:']),
  );
  for (const m of report.by_model) out.push(moneyRow(text(m.model), m));
  out.push(moneyRow('**Total**', totals), '');
  out.push(
    'Tokens; USD at $' +
      `${report.usd_per_token} per token. "Charged ÷ list" compares what the API charged with the list price of the jobs whose price is known exactly.`,
    '',
  );

  out.push('## Tasks by status', '');
  out.push(
    row(['Model', 'Done', 'Failed', 'In doubt', 'Rejected', 'Blocked', 'Unfinished']),
    row(['---', '---:', '---:', '---:', '---:', '---:', '---:']),
  );
  for (const m of report.by_model) out.push(statusRow(text(m.model), m));
  out.push(statusRow('**Total**', totals), '');

  out.push('## Balance and quota', '');
  const b = report.balance;
  out.push(
    `- Balance before the run: ${b.before === null ? 'unknown' : `${fmtTokens(b.before)} tokens`}; ` +
      `after: ${b.after === null ? 'unknown' : `${fmtTokens(b.after)} tokens`}` +
      (b.change === null
        ? '.'
        : `; change ${fmtTokens(b.change)} tokens (the ledger says this run's net is ${fmtTokens(totals.net.tokens)}; the API may round the balance, and other spending on the account shows here too).`),
  );
  if (report.quota.keys.length === 0) out.push(`- Nothing was charged, so no quota was used.`);
  for (const k of report.quota.keys) {
    const limit =
      k.limit === null
        ? 'quota unknown (set MEDIABATCH_QUOTA to check it)'
        : `quota ${fmtTokens(k.limit)} tokens, ${fmtTokens(k.used ?? 0)} used (${text(k.source ?? '')})`;
    out.push(
      `- Key ${code(k.key_fingerprint)} in ${report.quota.period}: the local ledger spent ${fmtTokens(k.net)} tokens ` +
        `(charged ${fmtTokens(k.charged)}, refunded ${fmtTokens(k.refunded)}), all runs; ${limit}.`,
    );
  }
  out.push('');

  const problems = report.tasks.filter((t) => PROBLEMS.includes(t.status));
  if (problems.length > 0) {
    out.push('## Failed, rejected and blocked tasks', '');
    out.push(
      row(['Task', 'Model', 'Status', 'Charged', 'Refunded', 'Error']),
      row(['---', '---', '---', '---:', '---:', '---']),
    );
    for (const t of problems) {
      out.push(
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
    out.push('');
  }

  out.push('## Tasks', '');
  out.push(
    row(['Task', 'Model', 'Status', 'Estimate', 'Charged', 'Refunded', 'Net', 'Took', 'Files']),
    row(['---', '---', '---', '---:', '---:', '---:', '---:', '---:', '---']),
  );
  for (const t of report.tasks) {
    const estimate =
      t.estimate.min === t.estimate.max
        ? fmtTokens(t.estimate.tokens)
        : `${fmtTokens(t.estimate.min)}–${fmtTokens(t.estimate.max)}`;
    out.push(
      row([
        code(t.id),
        text(t.model),
        t.status.replace('_', ' '),
        estimate,
        fmtTokens(t.charged),
        fmtTokens(t.refunded),
        fmtTokens(t.net),
        fmtSeconds(t.elapsed_s),
        t.files.map((f) => `${text(f.path)} (${fmtBytes(f.bytes)})`).join(', '),
      ]),
    );
  }
  out.push(
    '',
    `Generated ${fmtTime(report.generated_at)} by mediabatch · report format version ${report.version}`,
  );
  return `${out.join('\n')}\n`;
}

function moneyRow(label: string, s: ReportSummary): string {
  return row([
    label,
    String(s.tasks),
    String(s.jobs),
    fmtTokens(s.estimated.tokens),
    fmtTokens(s.charged.tokens),
    fmtTokens(s.refunded.tokens),
    fmtTokens(s.net.tokens),
    fmtUsd(s.net.usd),
    fmtPercent(s.charge_ratio),
  ]);
}

function statusRow(label: string, s: ReportSummary): string {
  const c = s.by_status;
  const unfinished = UNFINISHED.reduce((n, state) => n + c[state], 0);
  return row([
    label,
    String(c.done),
    String(c.failed),
    String(c.in_doubt),
    String(c.rejected),
    String(c.blocked),
    String(unfinished),
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
