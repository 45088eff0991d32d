// The shape of a run's account, version 1: the one set of counts, money and next steps every surface
// renders (progress line, status, report, gallery, view, review, merged shards). The zod schema is the
// single source: the TypeScript type, schemas/run-account.schema.json (scripts/write-schemas.ts) and the
// tests come from it. Add fields freely; renaming or removing one, or changing its meaning, needs version 2.

import { z } from 'zod';
import { MONEY_KINDS, RUN_STATES, TASK_STATES } from '../store/types.js';

const tokens = z.number().describe('Tokens, to 1e-6 (the API’s unit; USD = tokens × usd_per_token).');
const count = z.number().int().nonnegative();

export { MONEY_KINDS, type MoneyKind } from '../store/types.js';

const kindMoney = z
  .object({
    jobs: count.describe('Jobs of this kind the API accepted (each charged once).'),
    tasks: count.describe('Tasks with at least one such job.'),
    charged: tokens,
    refunded: tokens,
    net: tokens.describe('charged − refunded.'),
  })
  .strict();

export const NEXT_ACTIONS = ['retry-in-doubt', 'review', 'continue', 'merge', 'none'] as const;
export type NextAction = (typeof NEXT_ACTIONS)[number];

export const nextStepSchema = z
  .object({
    action: z
      .enum(NEXT_ACTIONS)
      .describe(
        '`retry-in-doubt`: tasks may have been charged and wait for the user to check; `review`: results wait for a decision; `continue`: tasks are unfinished, running the run again goes on; `merge`: shards to run or merge; `none`: nothing is left to do.',
      ),
    tasks: count.describe('How many tasks the step is about.'),
    task_ids: z.array(z.string()).describe('The first of them (at most 20), in manifest order.'),
    shards: z
      .array(z.number().int().positive())
      .optional()
      .describe('For `merge`: the shards (counted from 1) still to run or to report.'),
    command: z
      .string()
      .nullable()
      .describe('The command that takes the step, typable as printed; null when there is none.'),
  })
  .strict();

export const runAccountSchema = z
  .object({
    version: z.literal(1),
    usd_per_token: z.number(),
    run: z
      .object({
        id: z.string(),
        name: z.string().describe('The manifest’s name.'),
        manifest: z.string(),
        state: z.enum(RUN_STATES).describe('As shown: a run whose holder died is `interrupted`.'),
        exit_code: z.number().int().nullable(),
        stopped: z
          .object({
            reason: z
              .string()
              .describe(
                'Why: `budget`, `period-budget`, `insufficient-tokens` (the balance), `quota-exceeded`, `interrupted` (a signal), `unauthorized`, `unreachable`, `local-disk`, `limit`, `internal`, `review`, `unfinished`, `refused` (the preflight: over balance, quota or budget, or a folder it cannot write), or `lost` (its process or every worker ended without closing it: killed, crashed, or its PostgreSQL state went away).',
              ),
            label: z
              .string()
              .optional()
              .describe("The reason in a person's words, as `status`, the report and the view say it."),
            message: z.string().describe('The one line the run said when it stopped.'),
            at: z.string().nullable().describe('When it stopped; null for `lost`.'),
          })
          .strict()
          .optional()
          .describe(
            'Why a run that did not finish stopped (the first reason); absent while it runs and once finished.',
          ),
        shard: z
          .object({ index: z.number().int().positive(), count: z.number().int().positive(), run: z.string() })
          .strict()
          .optional(),
      })
      .strict(),
    tasks: count,
    by_state: z
      .record(z.enum(TASK_STATES), count)
      .describe(
        'Tasks per state as shown, every state present. A result rejected in review counts as `rejected` (not `done`); `awaiting_review` and `skipped` are their own states.',
      ),
    finished: count.describe('Tasks that reached an end: done, failed, rejected, blocked, lost or skipped.'),
    unfinished: count.describe('Tasks a later `run` goes on with (awaiting review and in doubt included).'),
    rejected: z
      .object({
        by_api: count.describe('Requests the API refused: nothing was charged.'),
        in_review: count.describe('Results a person rejected: charged, and kept on disk.'),
      })
      .strict(),
    review: z
      .object({
        reviewed: count.describe('Tasks marked `review: true`.'),
        awaiting: count.describe('Results waiting for a decision.'),
        approved: count,
        rejected: count,
        rerolls_asked: count,
        waiting: count.describe('Downstream tasks held until a result is approved.'),
      })
      .strict()
      .nullable()
      .describe('Null for a run without reviewed tasks.'),
    money: z
      .object({
        jobs: count.describe('Every job the API charged.'),
        charged: tokens,
        refunded: tokens,
        net: tokens.describe('charged − refunded: what the account paid.'),
        net_usd: z.number(),
        by_kind: z
          .record(z.enum(MONEY_KINDS), kindMoney)
          .describe(
            '`first`: each task’s first job; `retry`: sent again automatically after a failed, refunded job; `reroll`: a new result a person asked for; `doubt_retry`: sent again with --retry-in-doubt after an answer was lost (the lost one may have been charged too); `sent_again`: sent again for another reason (a changed request accepted). They add up to the totals.',
          ),
      })
      .strict(),
    paid_without_result: z
      .object({
        tasks: count,
        tokens: tokens.describe('Their net cost (charged − refunded).'),
        unfetched: z
          .object({ tasks: count, tokens })
          .strict()
          .describe('Result not on disk yet: a later run fetches it.'),
        stalled: z
          .object({ tasks: count, tokens })
          .strict()
          .describe('Job past its deadline: still watched.'),
        lost: z.object({ tasks: count, tokens }).strict().describe('The service no longer has the result.'),
      })
      .strict()
      .describe('Tasks charged whose result is not on disk (tasks in doubt are counted apart).'),
    in_doubt: z
      .object({
        tasks: count,
        at_most: tokens.describe('The most they may have cost: their estimates’ maxima.'),
      })
      .strict(),
    estimate: z
      .object({
        tokens: tokens.describe('The best estimate of every task still in the run: a skipped one leaves it.'),
        min: tokens,
        max: tokens,
        usd: z.number(),
      })
      .strict(),
    worst_case_left: z
      .object({
        tasks: count.describe('Tasks not charged yet: pending, awaiting review, being sent.'),
        tokens: tokens.describe('The most they can still cost: their estimates’ maxima.'),
      })
      .strict(),
    next: z.array(nextStepSchema).describe('What to do next, most urgent first; one `none` when nothing.'),
  })
  .strict()
  .meta({
    title: 'mediabatch run account',
    description:
      'One account of a run, read from the state database in one transaction (`describeRun()`): what `status --json`, report.json’s `account`, the view’s run answer and `review --json` carry.',
  });

export type RunAccount = z.infer<typeof runAccountSchema>;
export type NextStep = z.infer<typeof nextStepSchema>;
export type KindMoney = z.infer<typeof kindMoney>;

export function runAccountJsonSchema(): object {
  return z.toJSONSchema(runAccountSchema, { target: 'draft-2020-12', io: 'output' });
}
