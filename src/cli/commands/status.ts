// `status [run]`: the list of runs, or one run's tasks by state with the failing ones and their errors.
// Read only: a missing state file means "no runs yet", and no database is created for it.

import { existsSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import type { Shard } from '../../plan/shard.js';
import { plural } from '../../report/format.js';
import { shownRunState } from '../../run/lease.js';
import { isBucketLocation, runLocation } from '../../run/output.js';
import { scheduledManifests } from '../../schedule/status.js';
import {
  emptyTaskCounts,
  isNotOnDisk,
  NOT_ON_DISK,
  openStore,
  type ProblemTaskRow,
  type RunRecord,
  type Store,
  TASK_STATES,
  type TaskState,
  UNFINISHED,
} from '../../store/index.js';
import { roundTokens, tokensToUsd } from '../../util/money.js';
import { EXIT, ExitError } from '../errors.js';
import { fmtTokens, fmtTokensAsUsd, table } from '../format.js';
import type { CliIO } from '../io.js';
import { type ShardFlags, shardOfFlags, shardRunOf } from '../shard.js';

export interface ReadContext {
  io: CliIO;
  /** `--state`, as the user gave it (resolved against io.cwd). */
  statePath: string;
}

/** The tasks `status <run>` lists with their errors, most urgent first: paid without a result comes first. */
const PROBLEM_STATES: readonly TaskState[] = [
  'unfetched',
  'lost',
  'in_doubt',
  'stalled',
  'failed',
  'rejected',
  'blocked',
];
const LABEL: Record<TaskState, string> = {
  pending: 'pending',
  submitting: 'submitting',
  in_doubt: 'in doubt',
  submitted: 'submitted',
  running: 'running',
  stalled: 'stalled',
  downloading: 'downloading',
  unfetched: 'unfetched (paid, not on disk)',
  done: 'done',
  failed: 'failed',
  rejected: 'rejected',
  blocked: 'blocked',
  lost: 'lost (paid, result gone)',
};

/** Opens the state database if it exists; undefined when there is none yet (nothing is created). */
export function openExistingStore(ctx: ReadContext): Store | undefined {
  const file = resolve(ctx.io.cwd, ctx.statePath);
  return existsSync(file) ? openStore(file) : undefined;
}

/** Exit 1 for a run id the state database does not know, naming the known ones. */
export function unknownRunError(runId: string, store: Store | undefined, statePath: string): ExitError {
  const known = store?.listRuns().map((r) => r.id) ?? [];
  const hint =
    known.length === 0
      ? 'there are no runs yet: start one with `mediabatch run <manifest>`'
      : `known runs, newest first: ${known.slice(0, 5).join(', ')}${known.length > 5 ? ', …' : ''}`;
  return new ExitError(EXIT.invalid, `run ${runId}: not found in ${statePath}; ${hint}`);
}

/** `<output>/<run>`, from the settings the run was started with. */
/** --shard i/n without a run, in a state file that holds no run of that shard. */
export function noShardRun(shard: Shard, ctx: ReadContext): never {
  throw new ExitError(
    EXIT.invalid,
    `no run of shard ${shard.index} of ${shard.count} in ${ctx.statePath}: name the run (\`<run> --shard ${shard.index}/${shard.count}\`), or use the shard's own --state`,
  );
}

export function runFolder(run: RunRecord, cwd: string): string {
  const settings = run.settings as { output?: unknown } | null;
  const output = typeof settings?.output === 'string' ? settings.output : resolve(cwd, 'out');
  return runLocation(output, run.id);
}

export function displayPath(cwd: string, path: string): string {
  if (isBucketLocation(path)) return path;
  const rel = relative(cwd, path);
  return rel === '' ? '.' : rel.startsWith('..') ? path : rel;
}

/** `status <run>` lists at most this many tasks that need the user; the counts above it are complete. */
export const STATUS_PROBLEM_LIMIT = 50;

export function describeCounts(c: Record<TaskState, number>): string {
  const parts = [`${c.done} done`];
  for (const state of [
    'unfetched',
    'stalled',
    'lost',
    'failed',
    'in_doubt',
    'rejected',
    'blocked',
  ] as const) {
    if (c[state] > 0) parts.push(`${c[state]} ${LABEL[state]}`);
  }
  // Unfetched and stalled tasks are unfinished too, but named above.
  const unfinished = UNFINISHED.filter((s) => !isNotOnDisk(s)).reduce((n, s) => n + c[s], 0);
  if (unfinished > 0) parts.push(`${unfinished} unfinished`);
  return parts.join(', ');
}

export async function statusCommand(
  asked: string | undefined,
  opts: { json?: boolean } & ShardFlags,
  ctx: ReadContext,
): Promise<number> {
  const shard = shardOfFlags(opts, ctx.io.env);
  const store = openExistingStore(ctx);
  try {
    const runId = shard
      ? (shardRunOf(asked, shard, () => store?.listRuns() ?? []) ?? noShardRun(shard, ctx))
      : asked;
    if (runId === undefined) return listRuns(store, opts, ctx);
    const run = store?.getRun(runId);
    if (store === undefined || run === undefined) throw unknownRunError(runId, store, ctx.statePath);
    return showRun(store, run, opts, ctx);
  } finally {
    store?.close();
  }
}

function listRuns(store: Store | undefined, opts: { json?: boolean }, ctx: ReadContext): number {
  const { io } = ctx;
  const runs = (store?.listRuns() ?? []).map((run) => {
    const counts = store?.countTasksByState(run.id) ?? emptyTaskCounts();
    const spent = store?.runTotals(run.id) ?? { charged: 0, refunded: 0, net: 0 };
    // A run recorded as running with nobody alive holding it (kill -9) is shown as interrupted.
    const shown = store ? { ...run, state: shownRunState(store, run, io.now()) } : run;
    return { run: shown, counts, spent };
  });
  const scheduled = store ? scheduledManifests(store, io.now()) : [];
  if (opts.json) {
    const schedules = scheduled.map((s) => ({
      manifest: s.manifestPath,
      next_fire_at: s.nextFireAt?.toISOString() ?? null,
      last_fired_at: s.lastFiredAt?.toISOString() ?? null,
      last_run: s.lastRunId,
      last_run_state: s.lastRunState,
      firing: s.firing,
      overdue: s.overdue,
    }));
    io.stdout.write(
      `${JSON.stringify({ runs: runs.map(({ run, counts, spent }) => runJson(run, counts, spent, ctx)), scheduled: schedules }, null, 2)}\n`,
    );
    return EXIT.ok;
  }
  if (scheduled.length > 0) {
    const rows = [
      ['SCHEDULED MANIFEST', 'NEXT FIRING', 'LAST FIRED', 'LAST RUN'],
      ...scheduled.map((s) => [
        displayPath(io.cwd, s.manifestPath),
        s.nextFireAt
          ? `${shortTime(s.nextFireAt)}${s.overdue ? ' (overdue: is `mediabatch schedule` running?)' : ''}`
          : '-',
        s.lastFiredAt ? shortTime(s.lastFiredAt) : '-',
        s.lastRunId ? `${s.lastRunId} (${s.lastRunState ?? 'not started'})` : '-',
      ]),
    ];
    io.stdout.write(`${table(rows)}\n\n`);
  }
  if (runs.length === 0) {
    io.stdout.write(`No runs yet in ${ctx.statePath}: start one with \`mediabatch run <manifest>\`.\n`);
    return EXIT.ok;
  }
  const rows = [
    ['RUN', 'MANIFEST', 'STARTED', 'STATE', 'TASKS', 'NET TOKENS', 'PAID, NOT ON DISK'],
    ...runs.map(({ run, counts, spent }) => [
      run.id,
      displayPath(io.cwd, run.manifestPath),
      shortTime(run.startedAt ?? run.createdAt),
      run.state,
      `${plural(total(counts), 'task')}: ${describeCounts(counts)}`,
      fmtTokens(roundTokens(spent.net)),
      String(notOnDisk(counts)),
    ]),
  ];
  io.stdout.write(`${table(rows)}\n`);
  return EXIT.ok;
}

// One function on purpose: it is the one screen of `status <run>` (text and --json side by side).
function showRun(store: Store, recorded: RunRecord, opts: { json?: boolean }, ctx: ReadContext): number {
  const { io } = ctx;
  const run = { ...recorded, state: shownRunState(store, recorded, io.now()) };
  const counts = store.countTasksByState(run.id);
  const spent = store.runTotals(run.id);
  const { estimated } = spent;
  // Pending tasks that gave up for now (retries exhausted) carry their reason too: listed last.
  const others = UNFINISHED.filter((s) => !PROBLEM_STATES.includes(s));
  const problems = store.problemTasks(run.id, [...PROBLEM_STATES, ...others], STATUS_PROBLEM_LIMIT, others);
  const paid = store.notOnDiskByState(run.id);
  const paidTasks = NOT_ON_DISK.reduce((n, s) => n + paid[s].tasks, 0);
  const paidTokens = NOT_ON_DISK.reduce((n, s) => n + paid[s].tokens, 0);
  const folder = runFolder(run, io.cwd);
  const chains = chainsOf(store, run.id);
  if (opts.json) {
    io.stdout.write(
      `${JSON.stringify(
        {
          ...runJson(run, counts, spent, ctx),
          estimated: roundTokens(estimated),
          folder,
          paid_not_on_disk: {
            tasks: paidTasks,
            tokens: roundTokens(paidTokens),
            ...Object.fromEntries(
              NOT_ON_DISK.map((s) => [s, { tasks: paid[s].tasks, tokens: roundTokens(paid[s].tokens) }]),
            ),
          },
          problems: problems.map((t) => ({
            id: t.taskId,
            model: t.model,
            state: t.state,
            img_uuid: t.imgUuid,
            net: roundTokens(t.net),
            error: t.error,
          })),
          chains: chains.list,
          ...(chains.more > 0 ? { chains_not_listed: chains.more } : {}),
        },
        null,
        2,
      )}\n`,
    );
    return EXIT.ok;
  }
  const out = (line = '') => io.stdout.write(`${line}\n`);
  out(`Run ${run.id} (${displayPath(io.cwd, run.manifestPath)})`);
  out(
    `  State: ${run.state}${run.exitCode === null ? '' : ` (exit ${run.exitCode})`} · started ${shortTime(run.startedAt ?? run.createdAt)}${run.finishedAt ? ` · ended ${shortTime(run.finishedAt)}` : ''}`,
  );
  const byState = TASK_STATES.filter((s) => counts[s] > 0).map((s) => `${counts[s]} ${LABEL[s]}`);
  out(`  Tasks: ${total(counts)} (${byState.join(', ') || 'none'})`);
  out(
    `  Tokens: estimated ${fmtTokens(roundTokens(estimated))}, charged ${fmtTokens(roundTokens(spent.charged))}, refunded ${fmtTokens(roundTokens(spent.refunded))}, net ${fmtTokens(roundTokens(spent.net))} (${fmtTokensAsUsd(spent.net)})`,
  );
  out(`  Files: ${displayPath(io.cwd, folder)}`);
  const manifest = displayPath(io.cwd, run.manifestPath);
  if (paidTasks > 0) {
    out();
    const parts = NOT_ON_DISK.filter((s) => paid[s].tasks > 0).map(
      (s) => `${paid[s].tasks} ${LABEL[s]}, ${fmtTokens(roundTokens(paid[s].tokens))} tokens`,
    );
    out(
      `${paidTasks} paid task(s) not on disk (${fmtTokens(roundTokens(paidTokens))} tokens: ${parts.join('; ')}). ` +
        (paid.unfetched.tasks + paid.stalled.tasks > 0
          ? `Run the same command again, \`mediabatch run ${manifest}\`, to fetch the results without paying again.`
          : 'The service no longer has the lost results: the errors say why.'),
    );
  }
  if (counts.in_doubt > 0) {
    out();
    out(
      `${counts.in_doubt} task(s) in doubt: sent, but the answer was lost, so they may have been charged. Check the account, then \`mediabatch run ${displayPath(io.cwd, run.manifestPath)} --retry-in-doubt\` submits them again (possibly charged twice).`,
    );
  }
  const unfinished = UNFINISHED.filter((s) => !isNotOnDisk(s)).reduce((n, s) => n + counts[s], 0);
  if (unfinished > 0 && run.state !== 'running') {
    out();
    out(
      `${unfinished} task(s) unfinished: \`mediabatch run ${displayPath(io.cwd, run.manifestPath)}\` continues the run.`,
    );
  }
  if (chains.list.length > 0) {
    out();
    out(
      table([
        ['TASK', 'STATE', 'WAITS FOR'],
        ...chains.list.map((c) => [
          c.task,
          LABEL[c.state],
          c.after
            .map(
              (u) =>
                `${u.name === '' ? '' : `${u.name}: `}${u.task} (${u.state === null ? 'not in the run' : LABEL[u.state]})`,
            )
            .join(', '),
        ]),
      ]),
    );
    if (chains.more > 0)
      out(`…and ${chains.more} more chained task(s); \`mediabatch report ${run.id}\` lists every task.`);
  }
  if (problems.length > 0) {
    out();
    out(
      table([
        ['TASK', 'MODEL', 'STATE', 'TOKENS', 'ERROR'],
        ...problems.map((t) => [t.taskId, t.model, LABEL[t.state], tokensOf(t), oneLine(t.error ?? '')]),
      ]),
    );
    const listed = [...PROBLEM_STATES, ...others].reduce((n, s) => n + counts[s], 0);
    if (problems.length === STATUS_PROBLEM_LIMIT && listed > problems.length) {
      out(`…the first ${STATUS_PROBLEM_LIMIT} shown; \`mediabatch report ${run.id}\` lists every task.`);
    }
  }
  return EXIT.ok;
}

interface ChainLine {
  task: string;
  state: TaskState;
  after: Array<{ name: string; task: string; state: TaskState | null }>;
}

/** The run's chained tasks with their upstreams and states, the first STATUS_PROBLEM_LIMIT of them. */
function chainsOf(store: Store, runId: string): { list: ChainLine[]; more: number } {
  const links = store.upstreamsOfRun(runId);
  const list: ChainLine[] = [];
  for (const [taskId, ups] of links) {
    if (list.length === STATUS_PROBLEM_LIMIT) break;
    const task = store.getTask(runId, taskId);
    if (task === undefined) continue;
    list.push({
      task: taskId,
      state: task.state,
      after: ups.map((u) => ({
        name: u.name,
        task: u.upstreamId,
        state: store.getTask(runId, u.upstreamId)?.state ?? null,
      })),
    });
  }
  return { list, more: Math.max(0, links.size - list.length) };
}

function runJson(
  run: RunRecord,
  counts: Record<TaskState, number>,
  spent: { charged: number; refunded: number; net: number },
  ctx: ReadContext,
) {
  return {
    id: run.id,
    manifest: run.manifestPath,
    manifest_display: displayPath(ctx.io.cwd, run.manifestPath),
    name: run.manifestName,
    state: run.state,
    exit_code: run.exitCode,
    created_at: run.createdAt.toISOString(),
    started_at: run.startedAt?.toISOString() ?? null,
    finished_at: run.finishedAt?.toISOString() ?? null,
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
function notOnDisk(counts: Record<TaskState, number>): number {
  return NOT_ON_DISK.reduce((n, s) => n + counts[s], 0);
}

function total(counts: Record<TaskState, number>): number {
  return TASK_STATES.reduce((n, s) => n + counts[s], 0);
}

function shortTime(date: Date): string {
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
