// `status [run]`: the list of runs, or one run's tasks by state with the failing ones and their errors.
// Read only: a missing state file means "no runs yet", and no database is created for it.

import { describeRun, invocationCommand } from '../../account/index.js';
import { plural } from '../../report/format.js';
import { newRunCommandLine, scheduleCommandLine, stateInLine } from '../../results/invocation.js';
import { shownRunState } from '../../run/lease.js';
import { readRunStatus } from '../../run/run-status.js';
import { scheduledManifests } from '../../schedule/status.js';
import { activeMsOf, type RunRecord, type Store } from '../../store/index.js';
import { roundTokens } from '../../util/money.js';
import { EXIT } from '../errors.js';
import { displayPath, fmtTokens, table } from '../format.js';
import {
  openExistingStore,
  type ReadContext,
  readerOf,
  runFolder,
  runInvocation,
  unknownRunError,
} from '../read.js';
import { askedRun, type ShardFlags } from '../shard.js';
import {
  describeCounts,
  firstStart,
  notOnDisk,
  runJson,
  runStatusJson,
  runStatusLines,
  shortTime,
  total,
  workerJson,
  workerLines,
} from '../status-lines.js';

export async function statusCommand(
  asked: string | undefined,
  opts: { json?: boolean } & ShardFlags,
  ctx: ReadContext,
): Promise<number> {
  const store = openExistingStore(ctx);
  try {
    const runId = askedRun(asked, opts, ctx.io.env, () => store?.runs.listRuns() ?? [], ctx.statePath);
    if (runId === undefined) return listRuns(store, opts, ctx);
    const run = store?.runs.getRun(runId);
    if (store === undefined || run === undefined) throw unknownRunError(runId, store, ctx.statePath);
    return showRun(store, run, opts, ctx);
  } finally {
    store?.close();
  }
}

function listRuns(store: Store | undefined, opts: { json?: boolean }, ctx: ReadContext): number {
  const { io } = ctx;
  const runs = store === undefined ? [] : listedRuns(store, io.now());
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
      `${JSON.stringify({ runs: runs.map(({ run, counts, spent, stopped }) => ({ ...runJson(run, counts, spent, ctx.io.cwd), stopped: stopped ?? null })), scheduled: schedules }, null, 2)}\n`,
    );
    return EXIT.ok;
  }
  if (scheduled.length > 0) {
    const rows = [
      ['SCHEDULED MANIFEST', 'NEXT FIRING', 'LAST FIRED', 'LAST RUN'],
      ...scheduled.map((s) => [
        displayPath(io.cwd, s.manifestPath),
        s.nextFireAt
          ? `${shortTime(s.nextFireAt)}${s.overdue ? ` (overdue: is \`${scheduleCommandLine(readerOf(ctx), displayPath(io.cwd, s.manifestPath))}\` running?)` : ''}`
          : '-',
        s.lastFiredAt ? shortTime(s.lastFiredAt) : '-',
        s.lastRunId ? `${s.lastRunId} (${s.lastRunState ?? 'not started'})` : '-',
      ]),
    ];
    io.stdout.write(`${table(rows)}\n\n`);
  }
  if (runs.length === 0) {
    io.stdout.write(
      `No runs yet in ${stateInLine(ctx.statePath)}: start one with \`${newRunCommandLine(readerOf(ctx))}\`.\n`,
    );
    return EXIT.ok;
  }
  const rows = [
    ['RUN', 'MANIFEST', 'STARTED', 'STATE', 'TASKS', 'NET TOKENS', 'PAID, NOT ON DISK'],
    ...runs.map(({ run, counts, spent, stopped }) => [
      run.id,
      displayPath(io.cwd, run.manifestPath),
      shortTime(firstStart(run)),
      stopped === undefined ? run.state : `${run.state} (${stopped.reason})`,
      `${plural(total(counts), 'task')}: ${describeCounts(counts)}`,
      fmtTokens(roundTokens(spent.net)),
      String(notOnDisk(counts)),
    ]),
  ];
  io.stdout.write(`${table(rows)}\n`);
  return EXIT.ok;
}

/**
 * Each run's numbers are its one account (a few rows at any size): the same as `status <run>` states. A
 * run recorded as running with nobody alive holding it (kill -9) is shown as interrupted.
 */
function listedRuns(store: Store, now: Date) {
  return store.runs.listRuns().map((run) => {
    const account = describeRun(store, run.id, { shownState: (r) => shownRunState(store, r, now) });
    return {
      run: { ...run, state: account.run.state, activeMs: activeMsOf(store, run, account.run.state, now) },
      counts: account.by_state,
      spent: account.money,
      stopped: account.run.stopped,
    };
  });
}

function showRun(store: Store, recorded: RunRecord, opts: { json?: boolean }, ctx: ReadContext): number {
  const { io } = ctx;
  const inv = runInvocation(recorded, ctx);
  const status = readRunStatus(store, recorded, io.now(), invocationCommand(inv));
  const folder = runFolder(status.run, io.cwd);
  const workers = store.workers.list(recorded.id);
  if (opts.json) {
    const json = JSON.parse(runStatusJson(status, folder, io.cwd)) as Record<string, unknown>;
    if (workers.length > 0) json['workers'] = workers.map(workerJson);
    io.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
  } else {
    const lines = runStatusLines(status, folder, io.cwd, inv);
    if (workers.length > 0) lines.push('', ...workerLines(workers, io.now()));
    io.stdout.write(`${lines.join('\n')}\n`);
  }
  return EXIT.ok;
}
