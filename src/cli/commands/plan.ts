import type { Config } from '../../config.js';
import type { ProbeResult } from '../../media/types.js';
import {
  type MediaNeed,
  mediaNeeds,
  type PlannedTask,
  type PlanTotals,
  planTotals,
  priceTasks,
} from '../../plan/plan.js';
import { EXIT, ExitError } from '../errors.js';
import { fmtRange, fmtTokens, fmtUsd, table } from '../format.js';
import type { CliIO } from '../io.js';
import { loadChecked, problemsError } from '../load.js';

export interface PlanDeps {
  io: CliIO;
  config: Config;
  /** Absent with --no-probe: lengths then come from media_seconds or become ranges. */
  measure?: (needs: MediaNeed[]) => Promise<Map<string, ProbeResult>>;
  /** Absent when no credentials are set. */
  balance?: () => Promise<number>;
}

export interface PlanResult {
  runId: string;
  tasks: PlannedTask[];
  totals: PlanTotals;
}

/** Expand, check, measure and price a manifest. Shared by `plan` and `run`'s preflight. */
export async function buildPlan(file: string, deps: PlanDeps) {
  const { manifest, tasks } = await loadChecked(file, deps.io);
  const needs = mediaNeeds(tasks);
  const measured = deps.measure && needs.length > 0 ? await deps.measure(needs) : undefined;
  const priced = priceTasks(tasks, measured, deps.config.prices, manifest.settings.callbackUrl);
  if (priced.problems.length > 0) throw problemsError(file, priced.problems);
  return { manifest, tasks: priced.tasks, totals: planTotals(priced.tasks) };
}

export async function planCommand(file: string, opts: { json?: boolean }, deps: PlanDeps): Promise<number> {
  const { manifest, tasks, totals } = await buildPlan(file, deps);
  const { io } = deps;
  let balance: number | undefined;
  let balanceError: string | undefined;
  if (deps.balance) {
    try {
      balance = await deps.balance();
    } catch (error) {
      if (error instanceof ExitError && error.exitCode === EXIT.unauthorized) throw error;
      balanceError = (error as Error).message;
    }
  }

  if (opts.json) {
    const out = {
      run: manifest.settings.runId,
      tasks: tasks.map((t) => ({
        id: t.spec.id,
        model: t.entry.model,
        endpoint: t.entry.endpoint,
        body: t.wire,
        estimate: {
          tokens: t.estimate.tokens,
          min: t.estimate.min,
          max: t.estimate.max,
          basis: t.estimate.basis,
          assumedPrice: t.estimate.assumedPrice,
        },
      })),
      totals,
      ...(balance !== undefined ? { balance, afterRun: balance - totals.max } : {}),
      ...(balanceError ? { balanceError } : {}),
    };
    io.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
    return EXIT.ok;
  }

  const lines: string[] = [];
  lines.push(
    `Plan for run ${manifest.settings.runId} (${file}): ${tasks.length} task${tasks.length === 1 ? '' : 's'}`,
  );
  lines.push('');
  lines.push(
    table([
      ['TASK', 'MODEL', 'TOKENS', 'BASIS'],
      ...tasks.map((t) => [
        t.spec.id,
        t.entry.model,
        fmtRange(t.estimate.tokens, t.estimate.min, t.estimate.max),
        t.estimate.basis,
      ]),
    ]),
  );
  lines.push('');
  lines.push('By model:');
  lines.push(
    table(
      Object.entries(totals.byModel).map(([model, m]) => [
        `  ${model}`,
        `${m.tasks} task${m.tasks === 1 ? '' : 's'}`,
        `${fmtRange(m.tokens, m.min, m.max)} tokens`,
        fmtUsd(m.max),
      ]),
    ),
  );
  lines.push('');
  lines.push(
    `Total: ${fmtRange(totals.tokens, totals.min, totals.max)} tokens, up to ${fmtUsd(totals.max)} (at $0.02 per token)`,
  );
  if (totals.assumedPrice) {
    lines.push(
      'Some prices are our assumption (face swap, oc-maker): override them under `prices:` in mediabatch.config.yaml.',
    );
  }
  if (manifest.settings.budget !== undefined) {
    const fits = totals.max <= manifest.settings.budget;
    lines.push(
      `Budget: ${fmtTokens(manifest.settings.budget)} tokens — ${fits ? 'the plan fits' : 'the plan can exceed it'}`,
    );
  }
  if (balance !== undefined) {
    const left = balance - totals.max;
    lines.push(
      `Balance: ${fmtTokens(balance)} tokens; after the run at most ${fmtTokens(totals.max)} are spent, leaving ${fmtTokens(left)}${left < 0 ? ' — NOT ENOUGH' : ''}`,
    );
  } else if (balanceError) {
    lines.push(`Balance: could not be fetched (${balanceError})`);
  } else {
    lines.push(
      'Balance: not checked; set MEDIABATCH_API_KEY (and MEDIABATCH_BASE_URL) to compare the plan with your balance.',
    );
  }
  lines.push('Nothing was submitted.');
  io.stdout.write(`${lines.join('\n')}\n`);
  return EXIT.ok;
}
