// index.html: one self-contained page (inline CSS, JS and data) that shows a run's results offline from
// its folder. The summary and the cost table are HTML written here, every text escaped; the cards are
// built in the browser from inline JSON (see gallery-script.ts). Pure; galleryTop, galleryCard and
// GALLERY_BOTTOM let the writer stream the page of a large run instead of building it in memory.

import { createHash } from 'node:crypto';
import { taskFolderName } from '../results/names.js';
import { fmtCount, fmtTokensWithUnit } from '../util/numbers.js';
import { headOfReport, type ReportHead } from './build.js';
import { COST_COLUMNS, costCells, moneyByKindPhrases } from './figures.js';
import { fmtBytes, fmtPercent, fmtTime, fmtTokens, fmtUsd } from './format.js';
import { GALLERY_JS } from './gallery-script.js';
import { GALLERY_CSS } from './gallery-style.js';
import type { Report, ReportSummary, ReportTask } from './schema.js';

/** What the gallery shows beyond the report: read from the task folders and the requests. */
export interface GalleryExtra {
  /** The prompt (or text) of the request, shortened. */
  prompt?: string;
  /** oc-maker: the character sheet (sheet.json). */
  sheet?: unknown;
  /** Songs: each file's title, style, lyrics and duration (job.json). */
  songs?: readonly Record<string, unknown>[];
}

/** One card's data, with short keys: the JSON is inlined once per task, thousands of times. */
interface CardData {
  i: string;
  m: string;
  s: string;
  f: string;
  files: { p: string; k: string; b: number }[];
  pr: string | null;
  e: string | null;
  c: number;
  r: number;
  n: number;
  u: number;
  t: number | null;
  /** Submissions sent, and how many the API accepted (charged). */
  a: number;
  ac: number;
  /** The list price was booked: the API did not state the cost. */
  ca: boolean;
  /** Recovered from doubt by a callback. */
  rd: boolean;
  sh: unknown;
  so: readonly Record<string, unknown>[] | null;
  /** The tasks it takes results from (chains): name, task id, folder. */
  up: { n: string; t: string; f: string }[] | null;
  /** A reviewed task: its review status, attempt, and the last decision's author and note. */
  rv?: { s: string; a: number; by: string | null; note: string | null };
}

/**
 * The in-doubt tasks the page lists in its "Needs your attention" box, at most; the box says how many
 * more there are (report.csv has them all).
 */
export const GALLERY_IN_DOUBT_LIMIT = 1000;

export function renderGallery(report: Report, extras: ReadonlyMap<string, GalleryExtra> = new Map()): string {
  return (
    galleryTop(headOfReport(report), report.in_doubt.slice(0, GALLERY_IN_DOUBT_LIMIT)) +
    report.tasks.map((t) => galleryCard(t, extras.get(t.id))).join(',') +
    GALLERY_BOTTOM
  );
}

const SCRIPT_HASH = createHash('sha256').update(GALLERY_JS, 'utf8').digest('base64');

/**
 * The page up to its inline data, which it opens: then come the cards (galleryCard) separated by
 * commas, then GALLERY_BOTTOM. So the page of a run of any size is streamed to the file a page of
 * tasks at a time, and is still one self-contained file. The data is a JSON block, not a script, so
 * the Content-Security-Policy (one script, allowed by its hash) does not depend on it.
 */
export function galleryTop(report: ReportHead, inDoubt: readonly Report['in_doubt'][number][]): string {
  // No network at all: only the page's own inline script, and files next to it.
  const csp = [
    "default-src 'none'",
    "img-src 'self' file: data:",
    "media-src 'self' file:",
    "style-src 'unsafe-inline'",
    `script-src 'sha256-${SCRIPT_HASH}'`,
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
  const { run, totals } = report;
  const title = `${run.id} · mediabatch gallery`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="${esc(csp)}">
<meta name="referrer" content="no-referrer">
<title>${esc(title)}</title>
<style>${GALLERY_CSS}</style>
</head>
<body>
<div class="wrap">
<header class="top">
  <div>
    <h1>Run <span class="run">${esc(run.id)}</span></h1>
    <div class="meta">
      <span>manifest <code>${esc(run.manifest)}</code></span>
      <span>${esc(run.state)}${run.exit_code === null ? '' : ` (exit ${run.exit_code})`}</span>
      ${run.started_at === null ? '' : `<span>started ${esc(fmtTime(run.started_at))}</span>`}
      ${run.finished_at === null ? '' : `<span>ended ${esc(fmtTime(run.finished_at))}</span>`}
    </div>
  </div>
  <nav class="links">
    <a class="btn" href="report.md">report.md</a>
    <a class="btn" href="report.csv">report.csv</a>
    <a class="btn" href="report.json">report.json</a>
  </nav>
</header>
${tiles(report)}
${attention(report, inDoubt)}
<details class="panel" open>
  <summary>Cost by model<span class="hint">${esc(`${fmtTokensWithUnit(totals.net.tokens)} net, ${fmtUsd(totals.net.usd)}`)}</span></summary>
  <div class="table-wrap">${costTable(report)}</div>
  <p class="note">Tokens; USD at $${esc(String(report.usd_per_token))} per token. Net = charged − refunded. “Not on disk”: charged tasks whose result is not in this folder (unfetched, stalled or lost). “Charged ÷ list” compares the charges with the list price of the jobs whose price was known exactly.</p>
</details>
<div class="toolbar" role="search">
  <select id="f-model" aria-label="Model"></select>
  <div class="chips" id="f-status" role="group" aria-label="Status"></div>
  <input id="f-search" type="search" placeholder="Search task id, prompt or error" aria-label="Search">
  <span class="count" id="count"></span>
</div>
<main class="grid" id="grid"></main>
<div class="sentinel" id="sentinel"></div>
<noscript><p class="empty-state">The cards need JavaScript; the files are in the task folders next to this page, and report.md lists them.</p></noscript>
<footer class="bottom">Generated ${esc(fmtTime(report.generated_at))} by mediabatch · report format version ${report.version}</footer>
</div>
<dialog class="lightbox" id="lightbox"></dialog>
<script type="application/json" id="gallery-data">{"run":${jsonForScript(run.id)},"tasks":[`;
}

/** Closes the inline data opened by galleryTop, then the page's one script. */
export const GALLERY_BOTTOM = `]}</script>
<script>${GALLERY_JS}</script>
</body>
</html>
`;

/** One card's data in the page's inline JSON. */
export function galleryCard(t: ReportTask, extra?: GalleryExtra): string {
  return jsonForScript(cardData(t, extra));
}

const PROMPT_MAX = 600;

function cardData(t: ReportTask, extra: GalleryExtra | undefined): CardData {
  const prompt = extra?.prompt ?? '';
  return {
    i: t.id,
    m: t.model,
    s: t.status,
    f: t.folder,
    files: t.files.map((f) => ({ p: f.path, k: f.kind, b: f.bytes })),
    pr: prompt === '' ? null : prompt.length > PROMPT_MAX ? `${prompt.slice(0, PROMPT_MAX)}…` : prompt,
    e: t.error,
    c: t.charged,
    r: t.refunded,
    n: t.net,
    u: t.net_usd,
    t: t.elapsed_s,
    a: t.attempts,
    ac: t.charged_attempts,
    ca: t.cost_assumed,
    rd: t.recovered_from_doubt,
    sh: extra?.sheet ?? null,
    so: extra?.songs && extra.songs.length > 0 ? extra.songs : null,
    up:
      t.after.length === 0 ? null : t.after.map((u) => ({ n: u.name, t: u.task, f: taskFolderName(u.task) })),
    ...(t.review !== undefined && { rv: reviewBadge(t.review) }),
  };
}

function reviewBadge(r: NonNullable<ReportTask['review']>): NonNullable<CardData['rv']> {
  const last = r.decisions.at(-1);
  return { s: r.status, a: r.attempt, by: last?.by ?? null, note: last?.note ?? null };
}

function tiles(report: ReportHead): string {
  const { totals, balance } = report;
  const s = totals.by_status;
  const { files, bytes } = report.files;
  const problems = s.failed + s.rejected + s.blocked + s.lost;
  const paid = totals.paid_without_result;
  const items: { label: string; value: string; sub: string; tone?: string }[] = [
    {
      label: 'Tasks done',
      value: `${fmtCount(s.done)} / ${fmtCount(totals.tasks)}`,
      sub:
        [
          s.unfetched > 0 ? `${fmtCount(s.unfetched)} not on disk` : '',
          s.stalled > 0 ? `${fmtCount(s.stalled)} stalled` : '',
          s.lost > 0 ? `${fmtCount(s.lost)} lost` : '',
          s.failed > 0 ? `${fmtCount(s.failed)} failed` : '',
          s.blocked > 0 ? `${fmtCount(s.blocked)} blocked` : '',
          s.rejected > 0 ? `${fmtCount(s.rejected)} rejected` : '',
          s.skipped > 0 ? `${fmtCount(s.skipped)} skipped` : '',
          s.awaiting_review > 0 ? `${fmtCount(s.awaiting_review)} awaiting review` : '',
          s.in_doubt > 0 ? `${fmtCount(s.in_doubt)} in doubt` : '',
        ]
          .filter(Boolean)
          .join(' · ') || 'nothing failed',
      tone: s.done === totals.tasks ? 'good' : problems > 0 ? 'bad' : undefined,
    },
    {
      label: 'Net cost',
      value: fmtTokensWithUnit(totals.net.tokens),
      sub: [
        `${fmtUsd(totals.net.usd)} · charged ${fmtTokensWithUnit(totals.charged.tokens)} · refunded ${fmtTokensWithUnit(totals.refunded.tokens)}`,
        ...moneyByKindPhrases(report.account),
      ].join(' · '),
    },
    {
      label: 'Estimated',
      value: fmtTokensWithUnit(totals.estimated.tokens),
      sub:
        totals.discount !== null && totals.discount > 0
          ? `${fmtPercent(totals.discount)} below list price`
          : `${fmtUsd(totals.estimated.usd)} at list price`,
    },
    {
      label: 'Balance',
      value: balance.after === null ? 'unknown' : fmtTokensWithUnit(balance.after),
      sub:
        balance.before === null
          ? 'after the run'
          : `after the run; ${fmtTokensWithUnit(balance.before)} before it`,
    },
    { label: 'Files', value: fmtCount(files), sub: fmtBytes(bytes) },
  ];
  if (paid.tasks > 0) {
    items.splice(1, 0, {
      label: 'Paid, not on disk',
      value: fmtCount(paid.tasks),
      sub: `${fmtTokensWithUnit(paid.tokens)} paid without a result${paid.lost.tasks > 0 ? ` · ${paid.lost.tasks} lost` : ''}`,
      tone: paid.lost.tasks > 0 ? 'bad' : 'warn',
    });
  }
  if (s.in_doubt > 0) {
    items.splice(1, 0, {
      label: 'In doubt',
      value: fmtCount(s.in_doubt),
      sub: 'may have been charged',
      tone: 'warn',
    });
  }
  return `<div class="tiles">${items
    .map(
      (t) =>
        `<div class="tile${t.tone ? ` ${t.tone}` : ''}"><div class="label">${esc(t.label)}</div><div class="value">${esc(t.value)}</div><div class="sub">${esc(t.sub)}</div></div>`,
    )
    .join('')}</div>`;
}

function attention(report: ReportHead, inDoubt: readonly Report['in_doubt'][number][]): string {
  if (report.advice.length === 0) return '';
  const rows = inDoubt
    .map(
      (t) =>
        `<tr><td><code>${esc(t.id)}</code></td><td>${esc(t.model)}</td><td>${esc(fmtTime(t.sent_at))}</td><td class="num">${esc(fmtTokens(t.at_most))}</td><td>${esc(t.reason ?? '')}</td></tr>`,
    )
    .join('');
  const more = report.inDoubt.count - inDoubt.length;
  const table =
    inDoubt.length === 0
      ? ''
      : `<div class="table-wrap" style="padding:0"><table><thead><tr><th>In doubt</th><th>Model</th><th>Sent</th><th class="num">Up to</th><th>Reason</th></tr></thead><tbody>${rows}</tbody></table></div>` +
        (more > 0 ? `<p class="note">…and ${more} more in doubt: report.csv lists every task.</p>` : '');
  return `<div class="attention" role="note"><h2>Needs your attention</h2><ul>${report.advice
    .map((line) => `<li>${withCode(line)}</li>`)
    .join('')}</ul>${table}</div>`;
}

function costTable(report: ReportHead): string {
  const head = `<thead><tr><th>Model</th>${COST_COLUMNS.map((c) => `<th class="num">${esc(c)}</th>`).join('')}</tr></thead>`;
  const line = (label: string, s: ReportSummary, cls = '') =>
    `<tr${cls ? ` class="${cls}"` : ''}><td>${label}</td>${costCells(s)
      .map((v) => `<td class="num">${esc(v)}</td>`)
      .join('')}</tr>`;
  const body = report.by_model.map((m) => line(esc(m.model), m)).join('');
  return `<table>${head}<tbody>${body}${line('Total', report.totals, 'total')}</tbody></table>`;
}

/** Our advice sentences mark commands with backticks, as in report.md: shown as <code>, all else escaped. */
function withCode(line: string): string {
  return line
    .split('`')
    .map((part, i) => (i % 2 === 1 ? `<code>${esc(part)}</code>` : esc(part)))
    .join('');
}

/** HTML text and attribute values: the five characters that can end or start markup. */
export function esc(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c,
  );
}

/**
 * JSON that is safe inside a <script> element: `<` cannot start `</script>` or `<!--`, and the line
 * separators JavaScript once rejected are escaped too. JSON.parse reads it back unchanged.
 */
export function jsonForScript(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}
