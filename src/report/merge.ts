// One report for a run split into shards (`report --merge`): the shards' report.json files,
// each from its own state file, summed into the report of the whole run. Pure: reports in, a report out.
// Token sums are added in micro-tokens (src/util/money.ts), so the totals are the exact sums of the
// shards' figures; every task appears once; the shards that are missing or unfinished are named.

import { type RunAccount, sumAccounts } from '../account/index.js';
import { MediabatchError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import { shardRunId } from '../plan/shard.js';
import { commandLine, DEFAULT_STATE_FILE, SANDBOX_STATE_FILE } from '../results/invocation.js';
import { UNFINISHED } from '../store/index.js';
import { fromMicro, roundTokens, tokensToUsd, toMicro } from '../util/money.js';
import { invocationOfReport } from './build.js';
import type { Report, ReportSummary } from './schema.js';

export interface ShardReportInput {
  /** Where it was read (a path or an s3:// key), for messages. */
  source: string;
  report: Report;
}

/** The inputs cannot be merged: one line that names the file and says why. */
export class MergeError extends MediabatchError {
  override name = 'MergeError';
  override readonly exitCode = EXIT.invalid;
}

type Merged = NonNullable<Report['shards']>;

export function mergeShardReports(inputs: readonly ShardReportInput[], now: Date): Report {
  const byIndex = shardsOf(inputs);
  const first = [...byIndex.values()][0];
  if (!first) throw new MergeError('no shard reports to merge');
  const { count, run: base } = first.report.run.shard as NonNullable<Report['run']['shard']>;
  const reports = [...byIndex.entries()].sort(([a], [b]) => a - b).map(([, r]) => r.report);
  const missing = range(count).filter((i) => !byIndex.has(i));
  const merged: Merged['merged'] = reports.map((r) => ({
    index: r.run.shard?.index ?? 0,
    run: r.run.id,
    state: r.run.state,
    exit_code: r.run.exit_code,
    tasks: r.totals.tasks,
    unfinished: r.totals.tasks - finishedTasks(r.totals),
  }));
  const unfinished = merged.filter((m) => m.state !== 'finished' || m.unfinished > 0).map((m) => m.index);
  const tasks = reports.flatMap((r) => r.tasks);
  const seen = new Set<string>();
  for (const t of tasks) {
    if (seen.has(t.id))
      throw new MergeError(`task ${t.id} is in two shard reports: they are not shards of one run`);
    seen.add(t.id);
  }
  const run = mergedRun(reports, base, missing.length === 0 && unfinished.length === 0);
  const commands = shardCommands(reports, base, count, [...missing, ...unfinished]);
  return {
    version: 2,
    generated_at: now.toISOString(),
    usd_per_token: first.report.usd_per_token,
    run,
    advice: mergedAdvice(reports, count, { missing, unfinished, commands }),
    in_doubt: reports.flatMap((r) => r.in_doubt),
    totals: sumSummaries(reports.map((r) => r.totals)),
    ...mergedAccount(reports, run, [...missing, ...unfinished]),
    by_model: byModel(reports),
    balance: mergedBalance(reports),
    quota: mergedQuota(reports),
    tasks,
    shards: {
      count,
      merged,
      missing,
      unfinished,
      ...(Object.keys(commands).length > 0 ? { commands } : {}),
    },
  };
}

/** The whole run's account: the sum of the shards' accounts (absent when a shard's report has none). */
function mergedAccount(
  reports: readonly Report[],
  run: Report['run'],
  pending: number[],
): { account?: RunAccount } {
  const accounts = reports.map((r) => r.account);
  if (accounts.some((a) => a === undefined)) return {};
  const head = {
    id: run.id,
    name: run.name,
    manifest: run.manifest,
    state: run.state,
    exit_code: run.exit_code,
  };
  return {
    account: sumAccounts(
      accounts as RunAccount[],
      head,
      [...new Set(pending)].sort((a, b) => a - b),
    ),
  };
}

/**
 * The command of each shard to run again: an unfinished one's from its own report (its state file, its
 * flags); a missing one's from another shard's, with its own `--shard i/n` (the shards of a run are
 * started with one command line that differs only there, as an engine's array or matrix does).
 */
function shardCommands(
  reports: readonly Report[],
  base: string,
  count: number,
  indexes: readonly number[],
): Record<string, string> {
  const commands: Record<string, string> = {};
  const template = templateOf(reports);
  for (const index of indexes) {
    const own = reports.find((r) => r.run.shard?.index === index);
    const from = own ?? template;
    if (from === undefined) continue;
    const inv = { ...invocationOfReport(from.run), runId: shardRunId(base, { index, count }) };
    commands[String(index)] = commandLine(inv, { command: 'run' });
  }
  return commands;
}

/** The shard report a missing shard's command is made from: the lowest shard's, so every line can name it. */
function templateOf(reports: readonly Report[]): Report | undefined {
  return [...reports].sort((a, b) => (a.run.shard?.index ?? 0) - (b.run.shard?.index ?? 0))[0];
}

/**
 * What a missing shard's line says of the state file its command names: the template shard's, which is
 * the missing one's only when every shard uses the same path on its own machine. A default state file is
 * that path; any other is named, and the person gives the missing shard its own.
 */
export function borrowedStateNote(template: number, state: string): string {
  if (state === DEFAULT_STATE_FILE || state === SANDBOX_STATE_FILE) return ' (on its machine)';
  return ` on its machine, with its own state file: the command names shard ${template}'s (${state})`;
}

/** The inputs by shard index, checked to be shards of one run and one count. */
function shardsOf(inputs: readonly ShardReportInput[]): Map<number, ShardReportInput> {
  const byIndex = new Map<number, ShardReportInput>();
  let base: { run: string; count: number; source: string } | undefined;
  for (const input of inputs) {
    const shard = input.report.run.shard;
    if (!shard) {
      throw new MergeError(
        `${input.source} is the report of run ${input.report.run.id}, which is not a shard (no run.shard): merge the report.shard-<i>-of-<n>.json files of one run`,
      );
    }
    base ??= { run: shard.run, count: shard.count, source: input.source };
    if (shard.run !== base.run || shard.count !== base.count) {
      throw new MergeError(
        `${input.source} is shard ${shard.index} of ${shard.count} of run ${shard.run}, and ${base.source} is of run ${base.run} in ${base.count} shards: merge the shards of one run`,
      );
    }
    // The same shard given twice (a folder and its file): the newer report wins.
    const had = byIndex.get(shard.index);
    if (!had || had.report.generated_at < input.report.generated_at) byIndex.set(shard.index, input);
  }
  return byIndex;
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i + 1);
}

/** Tasks that reached an end state: none of the states a later run still works on. */
function finishedTasks(s: ReportSummary): number {
  return s.tasks - UNFINISHED.reduce((n, state) => n + s.by_status[state], 0);
}

function mergedRun(reports: readonly Report[], base: string, complete: boolean): Report['run'] {
  const runs = reports.map((r) => r.run);
  const first = runs[0] as Report['run'];
  const codes = runs.map((r) => r.exit_code);
  const min = (xs: (string | null)[]) => xs.filter((x): x is string => x !== null).sort()[0] ?? null;
  const max = (xs: (string | null)[]) =>
    xs
      .filter((x): x is string => x !== null)
      .sort()
      .at(-1) ?? null;
  return {
    id: base,
    name: first.name,
    manifest: first.manifest,
    state: complete ? 'finished' : 'interrupted',
    exit_code: codes.some((c) => c === null) ? null : Math.max(...(codes as number[])),
    created_at: min(runs.map((r) => r.created_at)) ?? first.created_at,
    started_at: min(runs.map((r) => r.started_at)),
    finished_at: complete ? max(runs.map((r) => r.finished_at)) : null,
    // The shards run side by side: the run took as long as its longest shard.
    active_s: Math.max(...runs.map((r) => r.active_s)),
  };
}

function mergedAdvice(
  reports: readonly Report[],
  count: number,
  shards: { missing: number[]; unfinished: number[]; commands: Record<string, string> },
): string[] {
  const advice: string[] = [];
  const command = (i: number) => {
    const line = shards.commands[String(i)];
    return line === undefined ? '' : `: \`${line}\``;
  };
  const template = templateOf(reports);
  const note =
    template === undefined
      ? ''
      : borrowedStateNote(template.run.shard?.index ?? 1, invocationOfReport(template.run).state);
  for (const i of shards.missing) {
    advice.push(
      `Missing: no report of shard ${i} of ${count}: its tasks are not in this report; run it${command(i)}${note}, then merge again.`,
    );
  }
  for (const i of shards.unfinished) {
    advice.push(
      `Unfinished: shard ${i} of ${count} did not finish; continue it${command(i)}, then merge again.`,
    );
  }
  for (const r of reports) {
    for (const line of r.advice) advice.push(`Shard ${r.run.shard?.index}/${count}: ${line}`);
  }
  return advice;
}

const SUMMED = ['tasks', 'jobs', 'recovered_from_doubt', 'retried', 'cost_assumed'] as const;

/** Several summaries as one: counts added, tokens added in micro-tokens, ratios weighted by list price. */
export function sumSummaries(list: readonly ReportSummary[]): ReportSummary {
  const tokens = (pick: (s: ReportSummary) => number) =>
    fromMicro(list.reduce((n, s) => n + toMicro(pick(s)), 0));
  const money = (pick: (s: ReportSummary) => { tokens: number }) => {
    const t = tokens((s) => pick(s).tokens);
    return { tokens: t, usd: tokensToUsd(t) };
  };
  const byStatus = { ...(list[0]?.by_status ?? {}) } as ReportSummary['by_status'];
  for (const key of Object.keys(byStatus) as (keyof typeof byStatus)[]) {
    byStatus[key] = list.reduce((n, s) => n + s.by_status[key], 0);
  }
  const priced = list.filter((s) => s.list_price_of_charged !== null);
  const listPrice = tokens((s) => s.list_price_of_charged ?? 0);
  const weighted = priced.reduce((n, s) => n + (s.charge_ratio ?? 0) * (s.list_price_of_charged ?? 0), 0);
  const ratio = priced.length > 0 && listPrice > 0 ? Math.round((weighted / listPrice) * 1e4) / 1e4 : null;
  const counts = Object.fromEntries(SUMMED.map((k) => [k, list.reduce((n, s) => n + s[k], 0)])) as Pick<
    ReportSummary,
    (typeof SUMMED)[number]
  >;
  const estimated = tokens((s) => s.estimated.tokens);
  const notOnDisk = (state: 'unfetched' | 'stalled' | 'lost') => ({
    tasks: list.reduce((n, s) => n + s.paid_without_result[state].tasks, 0),
    tokens: tokens((s) => s.paid_without_result[state].tokens),
  });
  return {
    ...counts,
    by_status: byStatus,
    estimated: {
      tokens: estimated,
      min: tokens((s) => s.estimated.min),
      max: tokens((s) => s.estimated.max),
      usd: tokensToUsd(estimated),
    },
    charged: money((s) => s.charged),
    refunded: money((s) => s.refunded),
    net: money((s) => s.net),
    list_price_of_charged: priced.length > 0 ? listPrice : null,
    charge_ratio: ratio,
    discount: ratio === null ? null : Math.round((1 - ratio) * 1e4) / 1e4,
    paid_without_result: {
      tasks: list.reduce((n, s) => n + s.paid_without_result.tasks, 0),
      tokens: tokens((s) => s.paid_without_result.tokens),
      unfetched: notOnDisk('unfetched'),
      stalled: notOnDisk('stalled'),
      lost: notOnDisk('lost'),
    },
  };
}

function byModel(reports: readonly Report[]): Report['by_model'] {
  const groups = new Map<string, ReportSummary[]>();
  for (const r of reports) {
    for (const { model, ...summary } of r.by_model)
      groups.set(model, [...(groups.get(model) ?? []), summary]);
  }
  return [...groups.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([model, list]) => ({ model, ...sumSummaries(list) }));
}

/** The account's balance is shared: before the first shard started, after the last one ended. */
function mergedBalance(reports: readonly Report[]): Report['balance'] {
  const befores = reports.map((r) => r.balance.before).filter((b): b is number => b !== null);
  const afters = reports.map((r) => r.balance.after).filter((b): b is number => b !== null);
  const before = befores.length > 0 ? Math.max(...befores) : null;
  const after = afters.length > 0 ? Math.min(...afters) : null;
  return { before, after, change: before !== null && after !== null ? roundTokens(before - after) : null };
}

/** Each shard's ledger knows only its own spending: the keys' figures are added. */
function mergedQuota(reports: readonly Report[]): Report['quota'] {
  const keys = new Map<string, Report['quota']['keys'][number]>();
  for (const r of reports) {
    for (const k of r.quota.keys) {
      const had = keys.get(k.key_fingerprint);
      if (!had) {
        keys.set(k.key_fingerprint, { ...k });
        continue;
      }
      const add = (a: number, b: number) => fromMicro(toMicro(a) + toMicro(b));
      had.charged = add(had.charged, k.charged);
      had.refunded = add(had.refunded, k.refunded);
      had.net = add(had.net, k.net);
      had.limit = had.limit === null ? k.limit : k.limit === null ? had.limit : Math.max(had.limit, k.limit);
      had.used = had.used === null ? k.used : k.used === null ? had.used : Math.max(had.used, k.used);
    }
  }
  const periods = reports.map((r) => r.quota.period).sort();
  return { period: periods.at(-1) ?? '', keys: [...keys.values()] };
}
