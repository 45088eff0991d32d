// The shape of report.json, version 2 (version 1 knew neither the states stalled, unfetched and lost,
// nor attempts, assumed costs and recovery from doubt). The zod schema is the single source: the TypeScript type, the
// committed schemas/report.schema.json (scripts/write-report-schema.ts) and the tests all come from it.
// Add fields freely; renaming or removing one, or changing its meaning, needs version 3.

import { z } from 'zod';
import { runAccountSchema } from '../account/schema.js';
import { RUN_STATES, TASK_STATES } from '../store/types.js';

const tokens = z.number().describe('Tokens (may be fractional).');
const iso = z.string().describe('ISO 8601 UTC time.');

const money = z
  .object({
    tokens,
    usd: z.number().describe('The same amount in USD, at usd_per_token.'),
  })
  .strict();

const byStatus = z
  .record(z.enum(TASK_STATES), z.number().int().nonnegative())
  .describe('Task count per status, every status present (zero included).');

const notOnDisk = z
  .object({
    tasks: z.number().int().nonnegative(),
    tokens: tokens.describe('What the ledger says they cost: charged − refunded.'),
  })
  .strict();

const summary = z
  .object({
    tasks: z.number().int().nonnegative(),
    by_status: byStatus,
    jobs: z
      .number()
      .int()
      .nonnegative()
      .describe('Jobs charged; more than tasks when a task was sent again (--retry-in-doubt).'),
    estimated: z
      .object({
        tokens: tokens.describe(
          'Sum of the best estimates (list price) of every task still in the run: a skipped task leaves it.',
        ),
        min: tokens,
        max: tokens,
        usd: z.number(),
      })
      .strict(),
    charged: money.describe('Every charge in the ledger.'),
    refunded: money.describe('Every refund in the ledger (failed jobs).'),
    net: money.describe('charged − refunded: what the account paid.'),
    list_price_of_charged: tokens
      .nullable()
      .describe(
        'List price of the charged jobs whose estimate is exact (min = max); null when there is none.',
      ),
    charge_ratio: z
      .number()
      .nullable()
      .describe(
        'Charged ÷ list price over those same jobs: 1 means list price, 0.8 means 20% off. Null when unknown.',
      ),
    discount: z.number().nullable().describe('1 − charge_ratio: the discount observed. Null when unknown.'),
    paid_without_result: z
      .object({
        tasks: z.number().int().nonnegative(),
        tokens: tokens.describe('Their net cost (charged − refunded).'),
        unfetched: notOnDisk.describe('Charged, result not on disk yet: every later run fetches it again.'),
        stalled: notOnDisk.describe('Charged, job past its deadline: still watched.'),
        lost: notOnDisk.describe('Charged, and the service no longer has the result.'),
      })
      .strict()
      .describe('Tasks charged whose result is not on disk (tasks in doubt are counted apart).'),
    recovered_from_doubt: z
      .number()
      .int()
      .nonnegative()
      .describe('Tasks in doubt whose job a callback later proved accepted.'),
    retried: z
      .number()
      .int()
      .nonnegative()
      .describe(
        'Tasks submitted again automatically after a failed (refunded) job. Re-rolls and retries of doubt are not retries: see `account.money.by_kind`.',
      ),
    cost_assumed: z
      .number()
      .int()
      .nonnegative()
      .describe('Tasks with a charge booked at list price because the API did not state the cost.'),
  })
  .strict();

const file = z
  .object({
    path: z.string().describe('Relative to the run folder, `/`-separated, e.g. `hero-mug/1.png`.'),
    kind: z.enum(['image', 'audio', 'video', 'json']),
    bytes: z.number().int().nonnegative(),
    sha256: z.string(),
  })
  .strict();

/** Where a reviewed task's result stands, and every decision taken on it. */
export const taskReviewSchema = z
  .object({
    status: z
      .enum(['waiting', 'awaiting', 'approved', 'rejected'])
      .describe('`waiting`: no result to decide on yet; `awaiting`: a result awaits a decision.'),
    attempt: z.number().int().positive().describe('1, then one more after each re-roll.'),
    version: z.number().int().positive().describe('What a decision names as the state it saw.'),
    decisions: z.array(
      z
        .object({
          verdict: z.enum(['approve', 'reject', 'reroll']),
          attempt: z.number().int().positive().describe('The result (attempt) it was taken on.'),
          note: z.string().nullable(),
          by: z.string().describe('The local user who took it.'),
          at: iso,
        })
        .strict(),
    ),
  })
  .strict();

export const reportTaskSchema = z
  .object({
    id: z.string().describe('The task id from the manifest.'),
    model: z.string(),
    img_uuid: z.string().nullable().describe('The API job id of the latest submission.'),
    status: z.enum(TASK_STATES),
    job_status: z.string().nullable().describe('The last job status the API reported.'),
    request: z
      .record(z.string(), z.unknown())
      .nullable()
      .describe('The request body as sent, without the callback URL; an API key pasted into it is scrubbed.'),
    folder: z.string().describe('The task folder, relative to the run folder.'),
    estimate: z
      .object({
        tokens: tokens.describe('Best estimate of the list price.'),
        min: tokens,
        max: tokens,
        basis: z.string().describe('How the estimate was made, in words.'),
        assumed: z.boolean().describe('True when the list price itself is assumed, not from the spec.'),
      })
      .strict(),
    charged: tokens,
    refunded: tokens,
    net: tokens,
    net_usd: z.number(),
    jobs: z.number().int().nonnegative().describe('Charges in the ledger (one per job the API accepted).'),
    attempts: z.number().int().nonnegative().describe('Submissions sent, whatever their answer.'),
    charged_attempts: z
      .number()
      .int()
      .nonnegative()
      .describe('Submissions the API accepted, each charged; failed jobs among them were refunded.'),
    cost_assumed: z
      .boolean()
      .describe('True when the API did not state a cost and the list price was booked instead.'),
    recovered_from_doubt: z
      .boolean()
      .describe('True when the task was in doubt and a callback proved its submission accepted.'),
    submitted_at: iso.nullable(),
    finished_at: iso.nullable(),
    job_duration_s: z.number().nullable().describe('Duration from the job record, in seconds.'),
    elapsed_s: z.number().nullable().describe('finished_at − submitted_at, in seconds.'),
    files: z.array(file),
    bytes: z.number().int().nonnegative().describe('Total size of the files.'),
    error: z
      .string()
      .nullable()
      .describe('Why the task failed, was rejected or blocked, or why its paid result is not on disk.'),
    after: z
      .array(
        z
          .object({
            name: z
              .string()
              .describe("The name in the manifest's `after` mapping; '' for `after: <task id>`."),
            task: z.string().describe('The task it waits for and takes results from.'),
          })
          .strict(),
      )
      .describe('The tasks this one waits for (chains); empty when it waits for none.'),
    planned_estimate: z
      .object({ tokens, min: tokens, max: tokens, basis: z.string() })
      .strict()
      .nullable()
      .describe(
        "A chained task priced exactly once its upstream was done: the plan's estimate (`estimate` is then the exact price); null otherwise.",
      ),
    review: taskReviewSchema
      .optional()
      .describe('Only for a task marked `review: true`: its review status and decisions.'),
  })
  .strict();

const inDoubt = z
  .object({
    id: z.string(),
    model: z.string(),
    sent_at: iso.nullable().describe('When the last submission was sent.'),
    reason: z.string().nullable(),
    at_most: tokens.describe('The most it may have cost (the estimate’s max).'),
  })
  .strict();

const quotaKey = z
  .object({
    key_fingerprint: z.string().describe('A short hash of the API key; never the key.'),
    charged: tokens,
    refunded: tokens,
    net: tokens.describe('What the local ledger spent with this key in the period, all runs together.'),
    limit: tokens.nullable().describe('The quota, from configuration or the API’s last code-101 answer.'),
    used: tokens.nullable().describe('Quota used in the period as far as mediabatch knows.'),
    source: z.string().nullable().describe('Where limit and used come from.'),
  })
  .strict();

export const reportSchema = z
  .object({
    version: z.literal(2).describe('Report format version; 2 since the states stalled, unfetched and lost.'),
    generated_at: iso,
    usd_per_token: z.number(),
    run: z
      .object({
        id: z.string(),
        name: z.string().describe('The manifest’s name.'),
        manifest: z.string().describe('The manifest file the run came from.'),
        state: z.enum(RUN_STATES),
        exit_code: z.number().int().nullable(),
        created_at: iso,
        started_at: iso.nullable().describe('The first start of the run; later resumes do not move it.'),
        finished_at: iso.nullable().describe('The latest end.'),
        active_s: z
          .number()
          .int()
          .nonnegative()
          .describe(
            'Seconds the run was worked on, over every session; a session whose process or workers were lost counts up to their last heartbeat.',
          ),
        shard: z
          .object({
            index: z.number().int().positive().describe('Counted from 1.'),
            count: z.number().int().positive(),
            run: z.string().describe('The run the shard belongs to: its results are in `<output>/<run>/`.'),
          })
          .strict()
          .optional()
          .describe('Present when the run is one shard of a run split over machines (`--shard i/n`).'),
        invocation: z
          .object({
            manifest: z.string().describe('The manifest as the commands of this report name it.'),
            state: z.string().describe('The state file (`--state`) as the commands of this report name it.'),
            sandbox: z.boolean().optional().describe('A run of the embedded sandbox (`--sandbox`).'),
            config: z.string().optional().describe('`--config`: the account settings file.'),
            base_url: z.string().optional().describe('`--base-url`, when the run was started with one.'),
            budget: z.number().optional().describe('`--budget`, when the run was started with one.'),
            allow_outside_data: z.boolean().optional().describe('`--allow-outside-data`.'),
            allow_local_output: z
              .boolean()
              .optional()
              .describe('`--allow-local-output`: the workers of a PostgreSQL state share the output folder.'),
            allow_partial: z
              .boolean()
              .optional()
              .describe('`--allow-partial`: the run was started knowing it may not all fit.'),
          })
          .strict()
          .optional()
          .describe(
            'What a command about this run carries to reach it; the commands in `advice` are built from it, and `report --merge` builds each shard’s command from its report’s.',
          ),
      })
      .strict(),
    advice: z.array(z.string()).describe('What needs the user’s attention, most urgent first.'),
    in_doubt: z
      .array(inDoubt)
      .describe(
        'Tasks sent whose answer was lost: they may have been charged. Never resubmitted automatically.',
      ),
    totals: summary,
    account: runAccountSchema
      .optional()
      .describe(
        "The run's one account (describeRun(), schemas/run-account.schema.json): the counts, money by kind, estimate and next steps that `status --json`, the view and `review --json` state too. `totals` agrees with it. Absent only in reports written before it existed.",
      ),
    by_model: z.array(summary.extend({ model: z.string() }).strict()),
    balance: z
      .object({
        before: tokens.nullable().describe('API balance before the run’s first submission.'),
        after: tokens.nullable().describe('API balance when the run last ended.'),
        change: tokens
          .nullable()
          .describe(
            'before − after; the API may round the balance, and other spending on the account shows here too.',
          ),
      })
      .strict(),
    quota: z
      .object({
        period: z.string().describe('`YYYY-MM` (UTC) of generated_at.'),
        keys: z.array(quotaKey).describe('Every API key the run was charged under.'),
      })
      .strict(),
    review: z
      .object({
        reviewed: z.number().int().nonnegative(),
        awaiting: z.number().int().nonnegative(),
        waiting: z
          .number()
          .int()
          .nonnegative()
          .describe('Tasks not sent yet that wait for a reviewed result nobody approved.'),
        approved: z.number().int().nonnegative(),
        rejected: z.number().int().nonnegative(),
        rerolls: z
          .object({
            asked: z.number().int().nonnegative().describe('Re-rolls the user asked for.'),
            jobs: z.number().int().nonnegative().describe('Their jobs the API charged.'),
            charged: tokens,
            refunded: tokens,
            net: tokens,
          })
          .strict()
          .describe('What re-rolls cost, apart: each is a second ask, charged once (included in totals).'),
      })
      .strict()
      .optional()
      .describe('Only for a run with `review: true` tasks.'),
    tasks: z.array(reportTaskSchema).describe('In-doubt tasks first, then in manifest order.'),
    shards: z
      .object({
        count: z.number().int().positive(),
        merged: z
          .array(
            z
              .object({
                index: z.number().int().positive(),
                run: z.string(),
                state: z.enum(RUN_STATES),
                exit_code: z.number().int().nullable(),
                tasks: z.number().int().nonnegative(),
                unfinished: z.number().int().nonnegative().describe('Its tasks pending or not yet done.'),
              })
              .strict(),
          )
          .describe('The shard reports merged, by index.'),
        missing: z
          .array(z.number().int().positive())
          .describe('Shards with no report: their tasks are absent.'),
        unfinished: z
          .array(z.number().int().positive())
          .describe('Shards whose run is not finished: run their command again, then merge again.'),
        commands: z
          .record(z.string(), z.string())
          .optional()
          .describe(
            'By shard index, the command that runs (missing) or continues (unfinished) that shard, as a person types it: its `--shard i/n`, `--run-id` and state file.',
          ),
      })
      .strict()
      .optional()
      .describe('Present in the report `report --merge` writes for a run split into shards.'),
  })
  .strict()
  .meta({
    title: 'mediabatch cost report',
    description:
      'The cost report of one run, `<output>/<run>/report.json`. Every figure comes from the state database; tokens are the API’s unit, USD = tokens × usd_per_token.',
  });

export type Report = z.infer<typeof reportSchema>;
export type ReportTask = z.infer<typeof reportTaskSchema>;
export type ReportSummary = z.infer<typeof summary>;
export type ReportFile = z.infer<typeof file>;
export type TaskReview = z.infer<typeof taskReviewSchema>;

export function reportJsonSchema(): object {
  return z.toJSONSchema(reportSchema, { target: 'draft-2020-12', io: 'output' });
}
