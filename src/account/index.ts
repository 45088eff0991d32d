// One account of a run: its counts by shown state, its money by kind, its estimate as decisions changed
// it, and its next steps, read from the store in one read transaction (describeRun) and assembled by a
// pure function (accountOf). Every surface renders this one account and counts nothing on its own: the
// progress line's last frame, `status`, report.json/.md/.csv, the gallery, the view's run answer,
// `review --json` and the merged report of shards (sumAccounts).

import { MediabatchError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import { parseShardRunId } from '../plan/shard.js';
import { commandLine, DEFAULT_STATE_FILE, type RunInvocation } from '../results/invocation.js';
import {
  type AccountFacts,
  emptyTaskCounts,
  type KindSums,
  type RunRecord,
  type RunState,
  type Store,
  TASK_STATES,
  UNFINISHED,
} from '../store/index.js';
import { fromMicro, tokensToUsd, toMicro, USD_PER_TOKEN } from '../util/money.js';
import { type KindMoney, MONEY_KINDS, type MoneyKind, type NextStep, type RunAccount } from './schema.js';

export {
  type KindMoney,
  MONEY_KINDS,
  type MoneyKind,
  NEXT_ACTIONS,
  type NextAction,
  type NextStep,
  type RunAccount,
  runAccountJsonSchema,
  runAccountSchema,
} from './schema.js';

/**
 * Turns a next step into the command a person types, or null when there is none. The surfaces pass the
 * one command builder of the run's invocation; `plainCommand` is the builder of last resort.
 */
export type StepCommand = (
  step: Omit<NextStep, 'command'>,
  account: Omit<RunAccount, 'next'>,
) => string | null;

export interface DescribeRunOptions {
  /**
   * The run's state as shown; the recorded one when not given. The CLI and the view pass the run
   * layer's shownRunState (a run whose holder died is `interrupted`), which this layer cannot import.
   */
  shownState?: (run: RunRecord) => RunState;
  /** The command of each next step; `plainCommand` when not given. */
  command?: StepCommand;
}

/** A run id the store does not know (the commands check the id first and word it themselves). */
class UnknownAccountRunError extends MediabatchError {
  override name = 'UnknownAccountRunError';
  override readonly exitCode = EXIT.invalid;
  constructor(runId: string) {
    super(`run ${runId}: not found in the state database`);
  }
}

/** The account of one run, from the store in one read. */
/** Each stop reason in a person's words: every surface (status, report, view) says the same. */
const STOP_LABEL: Readonly<Record<string, string>> = {
  budget: "the run's budget",
  'period-budget': "the manifest's budget_per_period",
  'insufficient-tokens': 'the balance',
  'quota-exceeded': "the key's quota",
  interrupted: 'interrupted by a signal',
  unauthorized: 'the API key refused',
  unreachable: 'the API kept failing',
  'lease-lost': 'another process took the run over',
  'local-disk': 'the local disk',
  limit: '--limit',
  internal: 'an error',
  review: 'results await review',
  unfinished: 'tasks left unfinished',
  lost: 'its process or workers lost',
  refused: 'the preflight refused it',
};

export function describeRun(store: Store, runId: string, opts: DescribeRunOptions = {}): RunAccount {
  const read = store.readAtOnce(() => {
    const recorded = store.runs.getRun(runId);
    if (recorded === undefined) return undefined;
    const state = opts.shownState?.(recorded) ?? recorded.state;
    const run = { ...recorded, state, ...lostStop(recorded, state) };
    return { run, facts: store.accountFacts(runId) };
  });
  if (read === undefined) throw new UnknownAccountRunError(runId);
  return accountOf(read.run, read.facts, opts.command ?? plainCommand);
}

/**
 * A run recorded as running that nobody alive drives (shown as interrupted) stopped without saying why:
 * its process, or every worker of a fleet, was killed or crashed, or lost its PostgreSQL state.
 */
function lostStop(recorded: RunRecord, shown: RunRecord['state']): Pick<RunRecord, 'stop'> {
  if (recorded.stop !== undefined || recorded.state !== 'running' || shown !== 'interrupted') return {};
  return {
    stop: {
      reason: 'lost',
      message:
        'the process driving it (or every worker of it) ended without closing it: killed, crashed, or its PostgreSQL state went away; run it again to continue',
      at: null,
    },
  };
}

/** The account from the facts read: pure. */
export function accountOf(
  run: RunRecord,
  facts: AccountFacts,
  command: StepCommand = plainCommand,
): RunAccount {
  const byState = { ...facts.counts };
  // A result a person rejected is a rejection, not a result the run delivered.
  const inReview = Math.min(facts.review.rejected, byState.done);
  byState.done -= inReview;
  byState.rejected += inReview;
  const tasks = TASK_STATES.reduce((n, s) => n + byState[s], 0);
  const unfinished = UNFINISHED.reduce((n, s) => n + byState[s], 0);
  const money = moneyOf(facts);
  const e = facts.estimates;
  const shard = parseShardRunId(run.id);
  const head: Omit<RunAccount, 'next'> = {
    version: 1,
    usd_per_token: USD_PER_TOKEN,
    run: {
      id: run.id,
      name: run.manifestName,
      manifest: run.manifestPath,
      state: run.state,
      exit_code: run.exitCode,
      ...(run.stop !== undefined && run.state !== 'running' && run.state !== 'finished'
        ? {
            stopped: {
              reason: run.stop.reason,
              label: STOP_LABEL[run.stop.reason] ?? run.stop.reason,
              message: run.stop.message,
              at: run.stop.at === null ? null : run.stop.at.toISOString(),
            },
          }
        : {}),
      ...(shard ? { shard: { index: shard.shard.index, count: shard.shard.count, run: shard.base } } : {}),
    },
    tasks,
    by_state: byState,
    finished: tasks - unfinished,
    unfinished,
    rejected: { by_api: facts.counts.rejected, in_review: inReview },
    review:
      facts.review.reviewed === 0
        ? null
        : {
            reviewed: facts.review.reviewed,
            awaiting: facts.review.awaiting,
            approved: facts.review.approved,
            rejected: facts.review.rejected,
            rerolls_asked: facts.review.rerollsAsked,
            waiting: facts.review.waiting,
          },
    money,
    paid_without_result: paidWithoutResult(facts.notOnDisk),
    in_doubt: { tasks: byState.in_doubt, at_most: fromMicro(e.inDoubtMax) },
    estimate: {
      tokens: fromMicro(e.tokens),
      min: fromMicro(e.min),
      max: fromMicro(e.max),
      usd: tokensToUsd(fromMicro(e.tokens)),
    },
    worst_case_left: {
      tasks: byState.pending + byState.awaiting_review + byState.submitting,
      tokens: fromMicro(e.leftMax),
    },
  };
  return { ...head, next: nextSteps(head, facts.ids, command) };
}

/** The next steps, most urgent first: what may have been charged, what waits for a person, what goes on. */
function nextSteps(
  account: Omit<RunAccount, 'next'>,
  ids: AccountFacts['ids'],
  command: StepCommand,
): NextStep[] {
  const steps: Omit<NextStep, 'command'>[] = [];
  if (account.in_doubt.tasks > 0) {
    steps.push({ action: 'retry-in-doubt', tasks: account.in_doubt.tasks, task_ids: ids.inDoubt });
  }
  const awaiting = account.review?.awaiting ?? 0;
  if (awaiting > 0) steps.push({ action: 'review', tasks: awaiting, task_ids: ids.awaiting });
  // Tasks held by a result nobody decided on go on only after the review: they are not a `continue`.
  const goesOn = account.unfinished - account.by_state.awaiting_review;
  if (goesOn > 0) steps.push({ action: 'continue', tasks: goesOn, task_ids: ids.unfinished });
  if (steps.length === 0) steps.push({ action: 'none', tasks: 0, task_ids: [] });
  return steps.map((step) => ({ ...step, command: command(step, account) }));
}

/**
 * Each next step as the one command builder words it (src/results/invocation.ts), from how the run was
 * started and is reached now: its state file, `--sandbox`, `--config`, shard and run id.
 */
export function invocationCommand(inv: RunInvocation): StepCommand {
  return (step) => {
    switch (step.action) {
      case 'retry-in-doubt':
        return commandLine(inv, { command: 'run', retryInDoubt: true });
      case 'review':
        return commandLine(inv, { command: 'review' });
      case 'continue':
        return commandLine(inv, { command: 'run' });
      default:
        return null;
    }
  };
}

/**
 * The commands for a caller without the run's invocation (a report read back from its file): the run's
 * manifest and id on the default state file. Surfaces that know how the run was reached pass
 * invocationCommand.
 */
export function plainCommand(
  step: Omit<NextStep, 'command'>,
  account: Omit<RunAccount, 'next'>,
): string | null {
  const inv = { runId: account.run.id, manifest: account.run.manifest, state: DEFAULT_STATE_FILE };
  return invocationCommand(inv)(step, account);
}

/** Money by kind: the sums the store keeps per kind of job, in micro-tokens. */
function moneyOf(facts: AccountFacts): RunAccount['money'] {
  let jobs = 0;
  let charged = 0;
  let refunded = 0;
  for (const k of MONEY_KINDS) {
    jobs += facts.money[k].jobs;
    charged += facts.money[k].charged;
    refunded += facts.money[k].refunded;
  }
  const kind = (m: KindSums): KindMoney => ({
    jobs: m.jobs,
    tasks: m.tasks,
    charged: fromMicro(m.charged),
    refunded: fromMicro(m.refunded),
    net: fromMicro(m.charged - m.refunded),
  });
  return {
    jobs,
    charged: fromMicro(charged),
    refunded: fromMicro(refunded),
    net: fromMicro(charged - refunded),
    net_usd: tokensToUsd(fromMicro(charged - refunded)),
    by_kind: Object.fromEntries(MONEY_KINDS.map((k) => [k, kind(facts.money[k])])) as Record<
      MoneyKind,
      KindMoney
    >,
  };
}

function paidWithoutResult(f: AccountFacts['notOnDisk']): RunAccount['paid_without_result'] {
  const of = (x: { tasks: number; tokens: number }) => ({ tasks: x.tasks, tokens: tokens(x.tokens) });
  return {
    tasks: f.unfetched.tasks + f.stalled.tasks + f.lost.tasks,
    tokens: tokens(f.unfetched.tokens + f.stalled.tokens + f.lost.tokens),
    unfetched: of(f.unfetched),
    stalled: of(f.stalled),
    lost: of(f.lost),
  };
}

/** Tokens as the account holds them: to 1e-6, the float noise of sums removed. */
function tokens(n: number): number {
  return fromMicro(toMicro(n));
}

/** An account with nothing in it, every state and kind present: where sums of accounts start. */
export function emptyAccount(run: RunAccount['run']): RunAccount {
  const zero = (): KindMoney => ({ jobs: 0, tasks: 0, charged: 0, refunded: 0, net: 0 });
  return {
    version: 1,
    usd_per_token: USD_PER_TOKEN,
    run,
    tasks: 0,
    by_state: emptyTaskCounts(),
    finished: 0,
    unfinished: 0,
    rejected: { by_api: 0, in_review: 0 },
    review: null,
    money: {
      jobs: 0,
      charged: 0,
      refunded: 0,
      net: 0,
      net_usd: 0,
      by_kind: Object.fromEntries(MONEY_KINDS.map((k) => [k, zero()])) as Record<MoneyKind, KindMoney>,
    },
    paid_without_result: paidWithoutResult({
      unfetched: { tasks: 0, tokens: 0 },
      stalled: { tasks: 0, tokens: 0 },
      lost: { tasks: 0, tokens: 0 },
    }),
    in_doubt: { tasks: 0, at_most: 0 },
    estimate: { tokens: 0, min: 0, max: 0, usd: 0 },
    worst_case_left: { tasks: 0, tokens: 0 },
    next: [],
  };
}

// Long on purpose: every figure of an account summed in one pass, the money in micro-tokens.
/**
 * The account of a run split into shards: the sum of its shards' accounts (each read from its own
 * state file). `pending` names the shards still to run or to report: a `merge` step comes first then.
 */
export function sumAccounts(
  accounts: readonly RunAccount[],
  run: RunAccount['run'],
  pending: readonly number[] = [],
  command: StepCommand = plainCommand,
): RunAccount {
  const sum = emptyAccount(run);
  const micro = { charged: 0, refunded: 0, estimate: [0, 0, 0], atMost: 0, left: 0, paid: 0 };
  const kindMicro = Object.fromEntries(MONEY_KINDS.map((k) => [k, { charged: 0, refunded: 0 }]));
  let jobs = 0;
  for (const a of accounts) {
    sum.tasks += a.tasks;
    for (const s of TASK_STATES) sum.by_state[s] += a.by_state[s];
    sum.finished += a.finished;
    sum.unfinished += a.unfinished;
    sum.rejected.by_api += a.rejected.by_api;
    sum.rejected.in_review += a.rejected.in_review;
    if (a.review !== null) {
      sum.review ??= { reviewed: 0, awaiting: 0, approved: 0, rejected: 0, rerolls_asked: 0, waiting: 0 };
      const r = sum.review;
      for (const key of Object.keys(r) as (keyof typeof r)[]) r[key] += a.review[key];
    }
    jobs += a.money.jobs;
    micro.charged += toMicro(a.money.charged);
    micro.refunded += toMicro(a.money.refunded);
    for (const k of MONEY_KINDS) {
      const into = sum.money.by_kind[k];
      const from = a.money.by_kind[k];
      into.jobs += from.jobs;
      into.tasks += from.tasks;
      (kindMicro[k] as { charged: number }).charged += toMicro(from.charged);
      (kindMicro[k] as { refunded: number }).refunded += toMicro(from.refunded);
    }
    for (const s of ['unfetched', 'stalled', 'lost'] as const) {
      sum.paid_without_result[s].tasks += a.paid_without_result[s].tasks;
      sum.paid_without_result[s].tokens = fromMicro(
        toMicro(sum.paid_without_result[s].tokens) + toMicro(a.paid_without_result[s].tokens),
      );
    }
    sum.in_doubt.tasks += a.in_doubt.tasks;
    micro.atMost += toMicro(a.in_doubt.at_most);
    micro.estimate = [
      (micro.estimate[0] ?? 0) + toMicro(a.estimate.tokens),
      (micro.estimate[1] ?? 0) + toMicro(a.estimate.min),
      (micro.estimate[2] ?? 0) + toMicro(a.estimate.max),
    ];
    sum.worst_case_left.tasks += a.worst_case_left.tasks;
    micro.left += toMicro(a.worst_case_left.tokens);
  }
  const charged = fromMicro(micro.charged);
  const refunded = fromMicro(micro.refunded);
  const net = fromMicro(micro.charged - micro.refunded);
  sum.money = {
    ...sum.money,
    jobs,
    charged,
    refunded,
    net,
    net_usd: tokensToUsd(net),
  };
  for (const k of MONEY_KINDS) {
    const m = kindMicro[k] as { charged: number; refunded: number };
    Object.assign(sum.money.by_kind[k], {
      charged: fromMicro(m.charged),
      refunded: fromMicro(m.refunded),
      net: fromMicro(m.charged - m.refunded),
    });
  }
  const p = sum.paid_without_result;
  p.tasks = p.unfetched.tasks + p.stalled.tasks + p.lost.tasks;
  p.tokens = fromMicro(toMicro(p.unfetched.tokens) + toMicro(p.stalled.tokens) + toMicro(p.lost.tokens));
  sum.in_doubt.at_most = fromMicro(micro.atMost);
  const [est = 0, min = 0, max = 0] = micro.estimate;
  sum.estimate = {
    tokens: fromMicro(est),
    min: fromMicro(min),
    max: fromMicro(max),
    usd: tokensToUsd(fromMicro(est)),
  };
  sum.worst_case_left.tokens = fromMicro(micro.left);
  const { next: _none, ...head } = sum;
  sum.next = mergedSteps(accounts, pending).map((step) => ({ ...step, command: command(step, head) }));
  return sum;
}

/** The shards' next steps added up by action, a `merge` first while shards are to run or to report. */
function mergedSteps(
  accounts: readonly RunAccount[],
  pending: readonly number[],
): Omit<NextStep, 'command'>[] {
  const steps: Omit<NextStep, 'command'>[] = [];
  if (pending.length > 0) steps.push({ action: 'merge', tasks: 0, task_ids: [], shards: [...pending] });
  for (const action of ['retry-in-doubt', 'review', 'continue'] as const) {
    const of = accounts.flatMap((a) => a.next.filter((s) => s.action === action));
    if (of.length === 0) continue;
    steps.push({
      action,
      tasks: of.reduce((n, s) => n + s.tasks, 0),
      task_ids: of.flatMap((s) => s.task_ids).slice(0, 20),
    });
  }
  if (steps.length === 0) steps.push({ action: 'none', tasks: 0, task_ids: [] });
  return steps;
}
