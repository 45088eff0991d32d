// `review <run>`: lists the results awaiting a decision, or approves, rejects or re-rolls them.
// Flags to options and outcomes to lines; the decisions themselves are src/review/.

import { describeRun, invocationCommand } from '../../account/index.js';
import { commandLine, type RunInvocation } from '../../results/invocation.js';
import {
  type DecideOutcome,
  decide,
  listAwaiting,
  matchTasks,
  type RerollPrice,
  rerollPrice,
  rerollRefusal,
  type Verdict,
} from '../../review/index.js';
import { shownRunState } from '../../run/lease.js';
import type { Store } from '../../store/index.js';
import { countOf, fmtTokensWithUnit } from '../../util/numbers.js';
import { EXIT, ExitError } from '../errors.js';
import { displayPath, table } from '../format.js';
import { openExistingStore, type ReadContext, runInvocation, unknownRunError } from '../read.js';

export interface ReviewFlags {
  approve?: string;
  reject?: string;
  reroll?: string;
  note?: string;
  yes?: boolean;
  json?: boolean;
}

const PAST: Record<Verdict, string> = { approve: 'approved', reject: 'rejected', reroll: 're-rolled' };

export async function reviewCommand(runId: string, flags: ReviewFlags, ctx: ReadContext): Promise<number> {
  const store = openExistingStore(ctx);
  try {
    const run = store?.runs.getRun(runId);
    if (store === undefined || run === undefined) throw unknownRunError(runId, store, ctx.statePath);
    const inv = runInvocation(run, ctx);
    const asked = (['approve', 'reject', 'reroll'] as const).filter((v) => flags[v] !== undefined);
    if (asked.length === 0) return list(store, inv, flags, ctx);
    const outcomes: DecideOutcome[] = [];
    let price: RerollPrice | undefined;
    for (const verdict of asked) {
      const taskIds = idsOf(store, inv, `--${verdict}`, flags[verdict] as string);
      if (verdict === 'reroll') {
        price = rerollPrice(store, runId, taskIds);
        await confirmReroll(price, flags, ctx);
      }
      const note = flags.note !== undefined ? { note: flags.note } : {};
      outcomes.push(...(await decide(store, runId, taskIds, verdict, note)));
    }
    return printOutcomes(
      store,
      inv,
      outcomes,
      price,
      flags,
      ctx,
      store.tasks.countTasksByState(runId).pending,
    );
  } finally {
    store?.close();
  }
}

function list(store: Store, inv: RunInvocation, flags: ReviewFlags, ctx: ReadContext): number {
  const runId = inv.runId;
  const awaiting = listAwaiting(store, runId);
  const { io } = ctx;
  if (flags.json) {
    const account = describeRun(store, runId, {
      shownState: (r) => shownRunState(store, r, io.now()),
      command: invocationCommand(inv),
    });
    io.stdout.write(`${JSON.stringify({ run: runId, awaiting, account }, null, 2)}\n`);
    return EXIT.ok;
  }
  if (awaiting.length === 0) {
    io.stdout.write(`Run ${runId}: no result awaits review.\n`);
    return EXIT.ok;
  }
  io.stdout.write(
    `Run ${runId}: ${countOf(awaiting.length, 'result')} ${awaiting.length === 1 ? 'awaits' : 'await'} review:\n`,
  );
  // One row a result, in columns as status's tables are.
  const rows = awaiting.map((a) => {
    const files = a.files.map((f) => displayPath(io.cwd, f)).join(', ') || 'no files';
    const next = a.downstreams.length > 0 ? `; then ${a.downstreams.join(', ')}` : '';
    return [
      `  ${a.taskId}`,
      a.model,
      `attempt ${a.attempt}`,
      `version ${a.version}`,
      files,
      `(re-roll up to ${fmtTokensWithUnit(a.rerollPrice)}${next})`,
    ];
  });
  io.stdout.write(`${table(rows)}\n`);
  // A command that works as printed: the first results listed, to approve; the same ids (or others,
  // or globs) go to --reject or --reroll, and --note keeps a note with the decision.
  const example = awaiting.slice(0, DECIDE_EXAMPLE_IDS).map((a) => a.taskId);
  io.stdout.write(`Decide with: ${commandLine(inv, { command: 'review', approve: example })}\n`);
  io.stdout.write(
    `  (or --reject, --reroll in place of --approve; ids or globs, comma-separated; --note text keeps a note)\n`,
  );
  return EXIT.ok;
}

/** How many of the awaiting results the printed `review --approve` names. */
const DECIDE_EXAMPLE_IDS = 3;

/** Ids and globs, comma-separated; one that names no task of the run is a usage error (nothing decided). */
function idsOf(store: Store, inv: RunInvocation, flag: string, value: string): string[] {
  const runId = inv.runId;
  const patterns = value
    .split(',')
    .map((p) => p.trim())
    .filter((p) => p !== '');
  const { taskIds, unmatched } = matchTasks(store, runId, patterns);
  if (unmatched.length > 0 || taskIds.length === 0) {
    throw new ExitError(
      EXIT.invalid,
      `${flag} ${unmatched.join(',') || value}: names no task of run ${runId}; \`${commandLine(inv, { command: 'review' })}\` lists what awaits a decision`,
    );
  }
  return taskIds;
}

/** A re-roll is a new charge: refused over the budget, asked for unless --yes, refused when nobody can answer. */
async function confirmReroll(price: RerollPrice, flags: ReviewFlags, ctx: ReadContext): Promise<void> {
  if (!price.fits) throw new ExitError(EXIT.refused, rerollRefusal(price));
  if (flags.yes) {
    // Said before it is recorded, even unasked: the run will not go on by itself after it.
    if (price.nextRunRefuses) ctx.io.stderr.write(`warning: ${price.text}\n`);
    return;
  }
  const question = `${price.text} Re-roll? [y/N] `;
  if (!ctx.io.ask) {
    throw new ExitError(
      EXIT.refused,
      'not confirmed: standard input is not a terminal, so nobody can answer; add --yes to re-roll without asking',
    );
  }
  if ((await ctx.io.ask(question)) !== true)
    throw new ExitError(EXIT.refused, 'not confirmed; nothing was re-rolled');
}

function printOutcomes(
  store: Store,
  inv: RunInvocation,
  outcomes: readonly DecideOutcome[],
  price: RerollPrice | undefined,
  flags: ReviewFlags,
  ctx: ReadContext,
  toSend: number,
): number {
  const runId = inv.runId;
  const refused = outcomes.filter((o) => !o.ok);
  if (flags.json) {
    const shown = outcomes.map((o) => (o.ok ? { ...o, earlierFiles: o.earlierFiles.map((f) => f.path) } : o));
    ctx.io.stdout.write(
      `${JSON.stringify({ run: runId, outcomes: shown, ...(price ? { reroll: price } : {}), account: describeRun(store, runId, { shownState: (r) => shownRunState(store, r, ctx.io.now()), command: invocationCommand(inv) }) }, null, 2)}\n`,
    );
  } else {
    for (const o of outcomes) {
      if (o.ok) ctx.io.stdout.write(`${PAST[o.verdict]} ${o.taskId}${o.changed ? '' : ' (already)'}\n`);
    }
    if (toSend > 0) {
      // A run that is going picks decisions up; one that is not needs to be continued.
      ctx.io.stdout.write(
        `Then: \`${commandLine(inv, { command: 'run' })}\` sends the ${toSend} pending task(s) (a run going now picks them up itself).\n`,
      );
    }
  }
  if (refused.length === 0) return EXIT.ok;
  const first = refused[0] as { reason: string; overBudget?: true };
  // Over a budget (the run's, or a fired run's period) is a refusal like the preflight's, not bad input.
  throw new ExitError(
    first.overBudget === true ? EXIT.refused : EXIT.invalid,
    `${refused.length} decision(s) refused: ${first.reason}`,
    refused.slice(1).map((o) => (o.ok ? '' : `refused: ${o.reason}`)),
  );
}
