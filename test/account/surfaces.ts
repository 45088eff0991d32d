// What each surface of a run states about its counts and money, read as a user reads it: the progress
// line's last frame, `status --json`, `report --json`, report.md, report.csv, the gallery's tiles, the
// view's `GET /api/runs/:run`, the runs lists (`status --json`, `GET /api/runs`), `review --json`. Each is checked against the one account (`status --json`'s)
// and the account against the sandbox's /_sandbox/state.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import { request } from 'undici';
import { expect } from 'vitest';
import type { RunAccount } from '../../src/account/index.js';
import type { Report } from '../../src/report/schema.js';
import type { SandboxState } from '../../src/sandbox/server.js';
import { fmtCount, fmtTokens, fmtTokensWithUnit } from '../../src/util/numbers.js';
import { startView } from '../../src/view/server.js';
import type { RunEnv } from '../helpers/run-env.js';
import { raw } from '../view/helpers.js';

const micro = (n: number) => Math.round(n * 1e6);

export async function sandboxState(env: RunEnv): Promise<SandboxState> {
  const answer = await request(`${env.sandbox.baseUrl}/_sandbox/state`);
  return (await answer.body.json()) as SandboxState;
}

/** The run's account as `status <run> --json` states it. */
export async function accountOf(env: RunEnv, runId: string, state?: string): Promise<RunAccount> {
  const out = await env.run([...(state ? ['--state', state] : []), 'status', runId, '--json']);
  expect(out.code, out.stderr).toBe(0);
  const json = JSON.parse(out.stdout) as {
    account: RunAccount;
    by_state: RunAccount['by_state'];
    net: number;
    estimated: number;
  };
  expect(json.by_state).toEqual(json.account.by_state);
  expect(json.net).toBe(json.account.money.net);
  expect(json.estimated).toBe(json.account.estimate.tokens);
  return json.account;
}

/** The money the sandbox booked for the jobs whose answer reached the client: what the ledger must hold. */
export function sandboxSeen(state: SandboxState): { jobs: number; net: number; hidden: number } {
  const seen = state.jobs.filter((j) => j.answer === 'ok');
  const hidden = state.jobs.filter((j) => j.answer !== 'ok');
  return {
    jobs: seen.length,
    net: seen.reduce((n, j) => n + micro(j.cost) - micro(j.refunded), 0) / 1e6,
    hidden: hidden.reduce((n, j) => n + micro(j.cost) - micro(j.refunded), 0) / 1e6,
  };
}

/** `1/10 finished · 1 done · … · 0.2 of ~2 tokens`: the last such line a `run` printed. */
export function lastFrame(stdout: string): string {
  const frames = stdout.split('\n').filter((l) => /^\S+\/\S+ finished · /.test(l));
  const last = frames.at(-1);
  expect(last, `no progress line in:\n${stdout}`).toBeDefined();
  return last as string;
}

/** The progress line's last frame states the account. */
export function expectFrame(frame: string, a: RunAccount): void {
  expect(frame).toContain(
    `${fmtCount(a.finished)}/${fmtCount(a.tasks)} finished · ${fmtCount(a.by_state.done)} done`,
  );
  expect(frame).toMatch(
    new RegExp(
      ` · ${regexText(fmtTokens(a.money.net))} of ~${regexText(fmtTokensWithUnit(a.estimate.tokens))}$`,
    ),
  );
  if (a.by_state.skipped > 0) expect(frame).toContain(`${fmtCount(a.by_state.skipped)} skipped`);
  if (a.by_state.in_doubt > 0) expect(frame).toContain(`${fmtCount(a.by_state.in_doubt)} in doubt`);
}

/** The run's closing lines state the account too: its money, and its estimate when it moved. */
export function expectOutcomeLines(stdout: string, a: RunAccount): void {
  const line = stdout.split('\n').find((l) => l.startsWith('  Charged ')) ?? '';
  expect(line).toContain(
    `Charged ${fmtTokensWithUnit(a.money.charged)}, refunded ${fmtTokensWithUnit(a.money.refunded)}, net ${fmtTokensWithUnit(a.money.net)} (`,
  );
  expect(line).toMatch(
    new RegExp(`(estimated|, ) ?${regexText(fmtTokensWithUnit(a.estimate.tokens))}( now)?$`),
  );
}

function regexText(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The Total rows of report.md: the cost table's and the status table's, as cells. */
function totalRows(md: string): { cost: string[]; status: string[] } {
  const rows = md
    .split('\n')
    .filter((l) => l.startsWith('| **Total** |'))
    .map((l) =>
      l
        .split('|')
        .slice(2, -1)
        .map((c) => c.trim()),
    );
  expect(rows).toHaveLength(2);
  return { cost: rows[0] as string[], status: rows[1] as string[] };
}

/**
 * Every file surface of the report (`report <run>` rewrites them): report.json, report.md, report.csv
 * and the gallery state the account `a`.
 */
export async function expectReportFiles(
  env: RunEnv,
  runId: string,
  runDir: string,
  a: RunAccount,
): Promise<void> {
  const out = await env.run(['report', runId, '--json']);
  expect(out.code, out.stderr).toBe(0);
  const report = JSON.parse(out.stdout) as Report;
  expect(report.account).toEqual(a);
  expectTotals(report, a);
  expect(JSON.parse(readFileSync(join(runDir, 'report.json'), 'utf8')).account).toEqual(a);

  const md = readFileSync(join(runDir, 'report.md'), 'utf8');
  const { cost, status } = totalRows(md);
  // Model | Tasks Jobs Done Failed InDoubt NotOnDisk Estimated Charged Refunded Net NetUSD ratio
  expect(cost.slice(0, 5)).toEqual(
    [a.tasks, a.money.jobs, a.by_state.done, a.by_state.failed, a.by_state.in_doubt].map(fmtCount),
  );
  expect(cost.slice(6, 10)).toEqual(
    [a.estimate.tokens, a.money.charged, a.money.refunded, a.money.net].map(fmtTokens),
  );
  // Done Unfetched Stalled Lost Failed InDoubt Rejected Blocked Skipped Unfinished
  const s = a.by_state;
  expect(status).toEqual(
    [
      s.done,
      s.unfetched,
      s.stalled,
      s.lost,
      s.failed,
      s.in_doubt,
      s.rejected,
      s.blocked,
      s.skipped,
      s.pending + s.awaiting_review + s.submitting + s.submitted + s.running + s.downloading,
    ].map(fmtCount),
  );
  expect(md).toContain(
    `**${fmtCount(s.done)} of ${fmtCount(a.tasks)} task${a.tasks === 1 ? '' : 's'} done**`,
  );
  // A re-roll is never called a retry.
  if (a.money.by_kind.retry.jobs === 0) expect(md).not.toMatch(/retried|retry after/);
  else
    expect(md).toContain(
      `retried after a failed, refunded job (${fmtCount(a.money.by_kind.retry.jobs)} retr`,
    );
  if (a.money.by_kind.reroll.jobs > 0)
    expect(md).toContain(`${fmtCount(a.money.by_kind.reroll.jobs)} re-roll`);

  const rows = parseCsv(readFileSync(join(runDir, 'report.csv'), 'utf8'), { columns: true }) as Array<
    Record<string, string>
  >;
  expect(rows).toHaveLength(a.tasks);
  expect(rows.reduce((n, r) => n + micro(Number(r['net_tokens'])), 0)).toBe(micro(a.money.net));

  const html = readFileSync(join(runDir, 'index.html'), 'utf8');
  expect(html).toContain(
    `<div class="label">Tasks done</div><div class="value">${fmtCount(s.done)} / ${fmtCount(a.tasks)}</div>`,
  );
  expect(html).toContain(
    `<div class="label">Net cost</div><div class="value">${fmtTokensWithUnit(a.money.net)}</div>`,
  );
  if (a.money.by_kind.retry.jobs === 0) expect(html).not.toMatch(/retried/);
}

/** report.json's totals agree with its account. */
export function expectTotals(report: Report, a: RunAccount): void {
  expect(report.totals.tasks).toBe(a.tasks);
  expect(report.totals.by_status).toEqual(a.by_state);
  expect(report.totals.jobs).toBe(a.money.jobs);
  expect(report.totals.net.tokens).toBe(a.money.net);
  expect(report.totals.charged.tokens).toBe(a.money.charged);
  expect(report.totals.refunded.tokens).toBe(a.money.refunded);
  expect(report.totals.estimated.tokens).toBe(a.estimate.tokens);
  expect(report.totals.retried).toBe(a.money.by_kind.retry.tasks);
  // The rows per model add up to the totals: the same counts, the same estimate.
  const sum = (f: (m: Report['by_model'][number]) => number) =>
    report.by_model.reduce((n, m) => n + micro(f(m)), 0) / 1e6;
  expect(sum((m) => m.tasks)).toBe(a.tasks);
  expect(sum((m) => m.estimated.tokens)).toBe(a.estimate.tokens);
  expect(sum((m) => m.net.tokens)).toBe(a.money.net);
  for (const state of Object.keys(a.by_state) as (keyof RunAccount['by_state'])[]) {
    expect(sum((m) => m.by_status[state])).toBe(a.by_state[state]);
  }
}

/** The view's run answer carries the account and shows its counts and money. */
export async function expectView(env: RunEnv, runId: string, a: RunAccount): Promise<void> {
  const view = await startView({ stateFile: env.db, cwd: env.dir });
  try {
    const answer = await raw(view.port, `/api/runs/${encodeURIComponent(runId)}`, {
      authorization: `Bearer ${view.token}`,
    });
    expect(answer.status, answer.text).toBe(200);
    const d = JSON.parse(answer.text);
    expect(d.account).toEqual(a);
    expect(d.run.by_state).toEqual(a.by_state);
    expect(d.run.tasks).toBe(a.tasks);
    expect(d.run.finished).toBe(a.finished);
    expect(d.run.net).toBe(a.money.net);
    expect(d.run.estimated).toBe(a.estimate.tokens);
    expect(d.in_doubt.tasks).toBe(a.in_doubt.tasks);
    expect(d.unfinished.tasks).toBe(a.unfinished);
    // The runs list states the run exactly as its page does.
    const list = await raw(view.port, '/api/runs', { authorization: `Bearer ${view.token}` });
    expect(list.status, list.text).toBe(200);
    const listed = (JSON.parse(list.text).runs as Array<Record<string, unknown>>).find(
      (r) => r['id'] === runId,
    );
    const figures = [
      'state',
      'tasks',
      'finished',
      'by_state',
      'estimated',
      'worst_case',
      'charged',
      'refunded',
      'net',
    ];
    expect(listed && Object.fromEntries(figures.map((k) => [k, listed[k]]))).toEqual(
      Object.fromEntries(figures.map((k) => [k, d.run[k]])),
    );
  } finally {
    await view.close();
  }
}

/** `status --json` without a run lists the run with its account's counts and money. */
export async function expectStatusList(env: RunEnv, runId: string, a: RunAccount): Promise<void> {
  const out = await env.run(['status', '--json']);
  expect(out.code, out.stderr).toBe(0);
  const listed = (JSON.parse(out.stdout).runs as Array<Record<string, unknown>>).find(
    (r) => r['id'] === runId,
  );
  expect(listed).toMatchObject({
    state: a.run.state,
    tasks: a.tasks,
    by_state: a.by_state,
    charged: a.money.charged,
    refunded: a.money.refunded,
    net: a.money.net,
  });
}

/** `review <run> --json` carries the same account. */
export async function expectReviewJson(env: RunEnv, runId: string, a: RunAccount): Promise<void> {
  const out = await env.run(['review', runId, '--json']);
  expect(out.code, out.stderr).toBe(0);
  expect(JSON.parse(out.stdout).account).toEqual(a);
}

/** The account against the sandbox's books: every job it saw is in the ledger, to the micro-token. */
export async function expectSandbox(env: RunEnv, a: RunAccount): Promise<void> {
  const seen = sandboxSeen(await sandboxState(env));
  expect(a.money.jobs).toBe(seen.jobs);
  expect(micro(a.money.net)).toBe(micro(seen.net));
  // What the client never heard of was charged for tasks it holds in doubt, at most their worst case.
  expect(seen.hidden).toBeLessThanOrEqual(a.in_doubt.at_most + a.money.by_kind.doubt_retry.charged + 1e-9);
  const kinds = Object.values(a.money.by_kind);
  expect(kinds.reduce((n, k) => n + k.jobs, 0)).toBe(a.money.jobs);
  expect(kinds.reduce((n, k) => n + micro(k.net), 0)).toBe(micro(a.money.net));
}

/** Every surface of one run at once. */
export async function expectEverySurface(
  env: RunEnv,
  runId: string,
  a: RunAccount,
  opts: { review?: boolean } = {},
): Promise<void> {
  await expectSandbox(env, a);
  await expectReportFiles(env, runId, join(env.dir, 'out', a.run.shard?.run ?? runId), a);
  await expectView(env, runId, a);
  await expectStatusList(env, runId, a);
  if (opts.review) await expectReviewJson(env, runId, a);
}
