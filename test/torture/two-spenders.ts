// `run` and `review --reroll` in separate processes against one sandbox and one state file, at random
// moments: the store arbitrates. Six reviewed stills of 0.2 and a budget of 1.6 (two re-rolls' worth
// beside the first submissions); while the run sends them, two `review --reroll` processes ask for three
// re-rolls at once ([1, 2] or [3] fits, not both). Whatever the timing: the sandbox never charges more than the budget, every charge it made is
// one the ledger knows, and no task is charged more often than it was asked (its first submission and
// its re-rolls recorded). A last `run` sends what was recorded and is not stuck.
// A few repeats in test/process/two-spenders.test.ts, 50 in `npm run torture`.

import { seeded, spawnCli } from '../helpers/child.js';
import { FAST_POLLS, makeRunEnv, SANDBOX_KEY, type TaskDecl } from '../helpers/run-env.js';

const STILLS: TaskDecl[] = [
  {
    id: 'still-{{product}}-{{index}}',
    model: 'flat-image',
    matrix: { product: ['mug'] },
    repeat: 6,
    review: true,
    input: { prompt: 'A {{product}}, variant {{index}}' },
  },
];
const BUDGET = 1.6;

export interface TwoSpendersRound {
  seed: number;
  /** Problems seen (empty when every guarantee held). */
  problems: string[];
  spent: number;
  charges: number;
  rerollsRecorded: number;
  exitCodes: Array<number | string>;
  /** What each review process said. */
  lines: string[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One round with the moments drawn from `seed`. */
export async function twoSpendersRound(seed: number): Promise<TwoSpendersRound> {
  const random = seeded(seed);
  // Jobs of about a second: the run is still sending and watching when the re-rolls are asked for.
  const env = await makeRunEnv({ speed: 0.1 });
  try {
    const file = await env.manifest({ tasks: STILLS, concurrency: 3, budget: BUDGET });
    const before = env.state();
    const childEnv = {
      MEDIABATCH_API_KEY: SANDBOX_KEY,
      MEDIABATCH_BASE_URL: env.sandbox.baseUrl,
      MEDIABATCH_POLL_SCALE: FAST_POLLS,
    };
    const cli = (args: string[]) => spawnCli(['--state', env.db, ...args], { cwd: env.dir, env: childEnv });
    const lines: string[] = [];
    const later = async (ms: number, args: string[]) => {
      await sleep(ms);
      const child = cli(args);
      const code = await child.exited;
      lines.push(
        `${args.slice(0, 2).join(' ')} after ${ms} ms: exit ${code} ${child.stdout().trim()} ${child.stderr().trim()}`,
      );
      return code;
    };
    const exitCodes = await Promise.all([
      cli(['run', file, '--yes']).exited,
      later(500 + Math.floor(random() * 5000), [
        'review',
        'batch',
        '--reroll',
        'still-mug-1,still-mug-2',
        '--yes',
      ]),
      later(500 + Math.floor(random() * 5000), ['review', 'batch', '--reroll', 'still-mug-3', '--yes']),
    ]);
    // What was recorded is sent by the next run, within the budget.
    const last = await env.run(['run', file, '--yes']);
    exitCodes.push(last.code);
    const problems: string[] = [];
    if (last.code !== 4 && last.code !== 0) problems.push(`the last run exited ${last.code}: ${last.stderr}`);
    const after = env.state();
    const spent = Math.round((before.balance - after.balance) * 1e6) / 1e6;
    if (spent > BUDGET) problems.push(`the sandbox charged ${spent}, over the budget of ${BUDGET}`);
    const charges = env.query<{ task_id: string; n: number }>(
      "SELECT task_id, count(*) AS n FROM ledger WHERE kind = 'charge' GROUP BY task_id",
    );
    const asked = new Map(
      env
        .query<{ task_id: string; n: number }>(
          "SELECT task_id, count(*) AS n FROM decisions WHERE verdict = 'reroll' GROUP BY task_id",
        )
        .map((r) => [r.task_id, r.n]),
    );
    const total = charges.reduce((n, c) => n + c.n, 0);
    if (total !== after.jobs.length) {
      problems.push(`the sandbox made ${after.jobs.length} jobs, the ledger knows ${total} charges`);
    }
    for (const c of charges) {
      const allowed = 1 + (asked.get(c.task_id) ?? 0);
      if (c.n > allowed) problems.push(`${c.task_id}: ${c.n} charges for ${allowed} asks`);
    }
    const open = env.query<{ n: number }>(
      "SELECT count(*) AS n FROM reservations WHERE state IN ('held', 'doubt')",
    )[0]?.n;
    if (open !== 0) problems.push(`${open} reservations still open after the last run`);
    const rerollsRecorded = [...asked.values()].reduce((n, v) => n + v, 0);
    return { seed, problems, spent, charges: total, rerollsRecorded, exitCodes, lines };
  } finally {
    await env.close();
  }
}
