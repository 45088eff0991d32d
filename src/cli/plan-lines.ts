// The lines and JSON of `mediabatch plan`: the table of tasks, the totals per model, and what the plan (or
// what is left of its run) comes to against the budget, the balance and the quota.

import type { ManifestSettings } from '../manifest/types.js';
import { localRefsIn } from '../media/local-input.js';
import type { PlanResult } from '../plan/build.js';
import type { PlannedTask, PlanTotals } from '../plan/plan.js';
import type { Verdict } from '../run/left-to-pay.js';
import { TASK_STATES, type TaskState } from '../store/index.js';
import { fmtTokensWithUnit, withTokenUnit } from '../util/numbers.js';
import { STATE_LABELS } from '../view/labels.js';
import { fmtRange, fmtTokens, fmtUsdRange, table, tableLines } from './format.js';
import type { CliIO } from './io.js';
import { LOCAL_FILES_NOTE, plural } from './load.js';

/** What the plan command reads of a plan; its tasks may be an array or produced again at each pass. */
export interface PlanLike {
  manifest: { settings: ManifestSettings };
  totals: PlanTotals;
  /** With --shard: the whole manifest's. */
  wholeTotals?: PlanTotals;
  tasks: Iterable<PlannedTask>;
}

export type BalanceCheck =
  | { state: 'ok'; balance: number }
  | { state: 'failed'; reason: string }
  | { state: 'no-key' }
  | { state: 'no-base-url' };

/** Lines written a thousand at a time: a plan of a million tasks is never one string. */
export function writeLines(io: CliIO, lines: Iterable<string>): void {
  let chunk: string[] = [];
  for (const line of lines) {
    chunk.push(line);
    if (chunk.length === 1000) {
      io.stdout.write(`${chunk.join('\n')}\n`);
      chunk = [];
    }
  }
  if (chunk.length > 0) io.stdout.write(`${chunk.join('\n')}\n`);
}

function describeCounts(counts: Record<TaskState, number>): string {
  const parts = TASK_STATES.filter((s) => counts[s] > 0).map((s) => `${counts[s]} ${STATE_LABELS[s]}`);
  return parts.length > 0 ? parts.join(', ') : 'no tasks yet';
}

export function planJson(
  { manifest, tasks, totals }: PlanResult,
  balance: BalanceCheck,
  verdict: Verdict,
): string {
  const { existing, remaining } = verdict;
  const out = {
    run: manifest.settings.runId,
    ...(existing
      ? {
          existingRun: {
            id: existing.id,
            state: existing.state,
            counts: Object.fromEntries(
              TASK_STATES.filter((s) => existing.counts[s] > 0).map((s) => [s, existing.counts[s]]),
            ),
            charged: existing.charged,
          },
        }
      : {}),
    ...(verdict.takenBy
      ? { runOfAnotherManifest: { id: verdict.takenBy.runId, manifest: verdict.takenBy.manifest } }
      : {}),
    tasks: tasks.map((t) => ({
      id: t.spec.id,
      model: t.entry.model,
      endpoint: t.entry.endpoint,
      body: t.wire,
      ...(t.spec.after !== undefined
        ? { after: t.spec.after.map((u) => ({ name: u.name, task: u.taskId })) }
        : {}),
      ...((t.spec.review ?? manifest.settings.review) ? { review: true } : {}),
      ...(existing ? { toPay: !existing.handled.has(t.spec.id) } : {}),
      estimate: {
        tokens: t.estimate.tokens,
        min: t.estimate.min,
        max: t.estimate.max,
        basis: t.estimate.basis,
        assumedPrice: t.estimate.assumedPrice,
      },
      ...(Object.keys(t.media).length > 0 ? { measured: t.media } : {}),
      ...(t.mediaNotes.length > 0 ? { notes: t.mediaNotes } : {}),
    })),
    totals,
    remaining,
    ...(manifest.settings.budget === undefined ? {} : { budget: manifest.settings.budget }),
    ...(balance.state === 'ok'
      ? { balance: balance.balance, leftAfterRun: leftAfter(balance.balance, remaining.max) }
      : {}),
    ...(balance.state === 'failed' ? { balanceError: balance.reason } : {}),
    ...(verdict.quota ? { quota: verdict.quota } : {}),
    fits: verdict.fits,
  };
  return JSON.stringify(out, null, 2);
}

function leftAfter(balance: number, max: number): number {
  return Number((balance - max).toFixed(4));
}

export function* planText(
  file: string,
  plan: PlanLike,
  balance: BalanceCheck,
  verdict: Verdict,
  deps: { measure?: unknown },
): Generator<string> {
  const { manifest, tasks, totals } = plan;
  // The run `run` would drive: an unfinished older run of the manifest, which it resumes, is that run.
  yield `Plan for run ${verdict.existing?.id ?? manifest.settings.runId} (${file}): ${plural(totals.tasks, 'task')}`;
  yield '';
  // Two passes over the tasks (widths, then lines), each expanding a streamed plan again.
  yield* tableLines(
    function* () {
      yield ['TASK', 'MODEL', 'TOKENS', 'USD', 'BASIS'];
      for (const t of tasks) {
        yield [
          t.spec.id,
          t.entry.model,
          fmtRange(t.estimate.tokens, t.estimate.min, t.estimate.max),
          fmtUsdRange(t.estimate.min, t.estimate.max),
          t.estimate.basis,
        ];
      }
    },
    ['left', 'left', 'right', 'right', 'left'],
  );

  const noted: { id: string; notes: string[] }[] = [];
  const local = new Set<string>();
  const review = reviewTally(manifest.settings.review);
  for (const t of tasks) {
    if (t.mediaNotes.length > 0) noted.push({ id: t.spec.id, notes: t.mediaNotes });
    for (const { path } of localRefsIn(t.body)) local.add(path);
    review.add(t);
  }
  const lines: string[] = [];
  // Only worth listing when measuring was attempted: with --no-probe nothing is measured on purpose.
  if (deps.measure && noted.length > 0) {
    lines.push('');
    lines.push('Lengths that could not be measured (priced from media_seconds, or up to the maximum):');
    lines.push(table(noted.flatMap((t) => t.notes.map((note) => ['', t.id, note]))));
  } else if (!deps.measure && noted.length > 0) {
    lines.push('');
    lines.push(
      'Media not measured (--no-probe): lengths come from media_seconds or are priced up to the maximum.',
    );
  }

  lines.push('');
  lines.push(
    table(
      [
        ['MODEL', 'TASKS', 'TOKENS', 'USD'],
        ...Object.entries(totals.byModel).map(([model, m]) => [
          model,
          fmtTokens(m.tasks),
          fmtRange(m.tokens, m.min, m.max),
          fmtUsdRange(m.min, m.max),
        ]),
        [
          'Total',
          fmtTokens(totals.tasks),
          fmtRange(totals.tokens, totals.min, totals.max),
          fmtUsdRange(totals.min, totals.max),
        ],
      ],
      ['left', 'right', 'right', 'right'],
    ),
  );
  lines.push('');
  lines.push(...moneyLines(plan, balance, verdict));
  lines.push(...review.lines());
  if (local.size > 0) lines.push(`${LOCAL_FILES_NOTE(local.size)}.`);
  lines.push('Nothing was submitted.');
  yield* lines;
}

/**
 * Downstreams of results marked `review: true` are priced as if every result were approved, the
 * worst case, and the plan says so; the budget and the balance are compared with that.
 */
function reviewTally(reviewAll: boolean) {
  const reviewed = new Set<string>();
  const chained: Array<{ upstreams: string[]; max: number }> = [];
  return {
    add(t: PlannedTask): void {
      if (t.spec.review ?? reviewAll) reviewed.add(t.spec.id);
      if (t.spec.after) chained.push({ upstreams: t.spec.after.map((u) => u.taskId), max: t.estimate.max });
    },
    lines(): string[] {
      if (reviewed.size === 0) return [];
      const waiting = chained.filter((c) => c.upstreams.some((u) => reviewed.has(u)));
      const most = waiting.reduce((n, c) => n + c.max, 0);
      const tail =
        waiting.length === 0
          ? ''
          : ` ${plural(waiting.length, 'task')} wait for a reviewed result: priced as if every one is approved (the worst case, up to ${fmtTokensWithUnit(most)}); a rejected result's downstreams are skipped and cost nothing.`;
      return [
        `Review: ${plural(reviewed.size, 'result')} must be approved (the \`review\` command, or the view) before anything downstream is submitted.${tail}`,
      ];
    },
  };
}

function moneyLines({ manifest, totals }: PlanLike, balance: BalanceCheck, verdict: Verdict): string[] {
  const lines: string[] = [];
  const { existing, remaining, leftAfter } = verdict;
  const cost = `${withTokenUnit(fmtRange(totals.tokens, totals.min, totals.max))} (${fmtUsdRange(totals.min, totals.max)}) at $0.02 per token`;
  lines.push(
    totals.min === totals.max
      ? `Cost: ${cost}.`
      : `Cost: ${cost}; budget and balance are compared with the most, ${fmtTokens(totals.max)}.`,
  );
  if (totals.assumedPrice) {
    lines.push(
      'Some prices are our assumption, not the spec’s (face swap, oc-maker): override them under `prices:` in mediabatch.config.yaml.',
    );
  }
  // With a run in the state file, only what `run` would still submit is compared with the limits.
  const what = existing ? 'the rest' : 'the plan';
  if (verdict.takenBy) {
    const { runId, manifest: other } = verdict.takenBy;
    lines.push(
      `Run ${runId} was started from ${other}: \`run\` refuses another manifest under that run id (unless it is ${other} moved); give this one a \`name:\` of its own, or --run-id and another id.`,
    );
  }
  if (existing) {
    lines.push(
      `Run ${existing.id} exists (${existing.state}): ${describeCounts(existing.counts)}; ${fmtTokensWithUnit(existing.charged)} charged so far.`,
    );
    lines.push(
      `Left to pay: ${plural(remaining.tasks, 'task')}, ${withTokenUnit(fmtRange(remaining.tokens, remaining.min, remaining.max))} (${fmtUsdRange(remaining.min, remaining.max)}).`,
    );
  }
  const budget = manifest.settings.budget;
  if (budget !== undefined && leftAfter.budget !== undefined) {
    const charged = existing ? `, ${fmtTokensWithUnit(existing.charged)} charged so far` : '';
    lines.push(
      leftAfter.budget >= 0
        ? `Budget: ${fmtTokensWithUnit(budget)}${charged}; ${what} fits, leaving ${fmtTokensWithUnit(leftAfter.budget)}.`
        : `Budget: ${fmtTokensWithUnit(budget)}${charged}; ${what} can cost ${fmtTokensWithUnit(-leftAfter.budget)} more: \`run\` would refuse it. Raise budget or trim the tasks.`,
    );
  }
  switch (balance.state) {
    case 'ok': {
      const left = leftAfter.balance ?? balance.balance - remaining.max;
      lines.push(
        left >= 0
          ? `Balance: ${fmtTokensWithUnit(balance.balance)}; ${fmtTokensWithUnit(left)} left after the run at most.`
          : `Balance: ${fmtTokensWithUnit(balance.balance)}; NOT ENOUGH: ${what} can cost ${fmtTokensWithUnit(-left)} more. Top up, or trim the tasks.`,
      );
      break;
    }
    case 'failed':
      lines.push(`Balance: could not be fetched (${balance.reason}).`);
      break;
    case 'no-base-url':
      lines.push(
        'Balance: not checked; MEDIABATCH_API_KEY is set but no base URL is: set MEDIABATCH_BASE_URL, --base-url, or base_url in mediabatch.config.yaml.',
      );
      break;
    case 'no-key':
      lines.push(
        'Balance: not checked; to compare the plan with your balance, set MEDIABATCH_API_KEY (and MEDIABATCH_BASE_URL) in the environment.',
      );
      break;
  }
  const quota = verdict.quota;
  if (quota && leftAfter.quota !== undefined) {
    const head = `Quota: ${fmtTokens(quota.used)} of ${fmtTokensWithUnit(quota.limit)} used this period (${quota.source})`;
    lines.push(
      leftAfter.quota >= 0
        ? `${head}; ${fmtTokensWithUnit(leftAfter.quota)} left after the run at most.`
        : `${head}; NOT ENOUGH: ${what} can cost ${fmtTokensWithUnit(-leftAfter.quota)} more.`,
    );
  }
  return lines;
}
