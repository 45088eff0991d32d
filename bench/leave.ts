// `npx tsx bench/leave.ts [tasks] [held]`: what a worker leaving a large run costs on PostgreSQL. One run of
// `tasks` tasks in a throwaway PostgreSQL on loopback, every one claimed by worker A, which finished all but
// `held` of them (those it still holds: claimed to send). Measured: the statement leaving used to be (clear
// A's name on every task it ever claimed, through the index of every claim it had then; run and rolled back,
// without a statement_timeout), and the store's leave now (the tasks A still holds, through `tasks_held`).
// Both on the same database, one after the other, so their ratio holds on a noisy machine. And the count of
// what the other workers hold (a worker with nothing left to claim makes it every second), before and now.
import { HELD_STATES } from '../src/store/claims.js';
import { openStore } from '../src/store/index.js';
import type { NewTask } from '../src/store/types.js';
import { startPostgres } from '../test/helpers/postgres.js';
import { round } from './lib/measure.js';
import { psql } from './lib/psql.js';

const tasks = Number(process.argv[2] ?? 1_000_000);
const held = Number(process.argv[3] ?? 64);
const log = (line: string) => process.stderr.write(`bench: ${line}\n`);
const A = 'worker-a';

/** The server's own time for `sql`, in ms, from psql's \timing, inside a transaction rolled back after `setup`. */
function timedRolledBack(url: string, sql: string, setup = ''): number {
  const out = psql(url, `BEGIN;\n${setup}\n\\timing on\n${sql};\n\\timing off\nROLLBACK`);
  const ms = /Time: ([\d.]+) ms/.exec(out)?.[1];
  if (ms === undefined) throw new Error(`no timing in psql's answer: ${out}`);
  return Number(ms);
}

function* rows(n: number): Generator<NewTask> {
  for (let i = 0; i < n; i++) {
    yield {
      taskId: `t${i}`,
      model: 'flat-image',
      endpoint: '/api/v1/images/generations',
      wireBody: JSON.stringify({ model: 'flat-image', prompt: `p${i}` }),
      estimate: { tokens: 0.2, min: 0.2, max: 0.2, basis: '0.2 per image', assumedPrice: false },
    };
  }
}

const pg = await startPostgres();
try {
  const url = pg.freshDatabase();
  const store = openStore(url);
  try {
    let at = performance.now();
    store.runs.createRun({ id: 'r', manifestPath: '/m.yaml', manifestName: 'm', settings: {} });
    store.tasks.upsertTasks('r', rows(tasks));
    store.workers.join('r', A, 'host-a', 1, 600_000);
    store.workers.join('r', 'worker-b', 'host-b', 2, 600_000);
    log(`${tasks} tasks stored in ${round((performance.now() - at) / 1000, 1)} s`);
    at = performance.now();
    // A's history, written straight into the table (its triggers' sums are not what is measured here).
    psql(
      url,
      `SET session_replication_role = replica;
       UPDATE tasks SET claimed_by = '${A}', state = CASE WHEN seq < ${held} THEN 'pending' ELSE 'done' END
       WHERE run_id = 'r';
       VACUUM ANALYZE tasks`,
    );
    log(`A's claims and finished tasks written in ${round((performance.now() - at) / 1000, 1)} s`);

    // The index every claim had before migration 27, for the statement that used it.
    psql(url, 'CREATE INDEX tasks_claimed ON tasks (run_id, claimed_by) WHERE claimed_by IS NOT NULL');
    const everyClaimMs = timedRolledBack(
      url,
      `UPDATE tasks SET claimed_by = NULL WHERE run_id = 'r' AND claimed_by = '${A}'`,
    );
    log(`the former leave (every claim A ever made): ${round(everyClaimMs)} ms`);
    // What a worker with nothing left to claim counts every second, through the index of every claim.
    const formerCountMs = timedRolledBack(
      url,
      `SELECT count(*) FROM tasks WHERE run_id = 'r' AND claimed_by IS NOT NULL AND claimed_by <> 'worker-b'
         AND state IN (${HELD_STATES.map((s) => `'${s}'`).join(', ')})`,
      'DROP INDEX tasks_held;',
    );
    log(`the former count of what the others hold: ${round(formerCountMs)} ms`);
    psql(url, 'DROP INDEX tasks_claimed; ANALYZE tasks');

    store.claims.heldByOthers('r', 'worker-b');
    at = performance.now();
    const heldByA = store.claims.heldByOthers('r', 'worker-b');
    const countMs = performance.now() - at;
    log(`the count of what the others hold now: ${round(countMs, 2)} ms (${heldByA})`);
    at = performance.now();
    const left = store.claims.leave('r', A);
    const leaveMs = performance.now() - at;
    const stillA = Number(psql(url, `SELECT count(*) FROM tasks WHERE claimed_by = '${A}'`));
    const freed = Number(
      psql(url, `SELECT count(*) FROM tasks WHERE state = 'pending' AND claimed_by IS NULL`),
    );
    if (freed !== held || stillA !== tasks - held) {
      throw new Error(`leave gave back ${freed} tasks (expected ${held}) and left ${stillA} named A`);
    }
    log(
      `the store's leave now (the ${held} tasks A holds): ${round(leaveMs, 2)} ms (others: ${left.others})`,
    );
    const figures = {
      tasks,
      held,
      formerLeaveMs: round(everyClaimMs),
      formerLeaveUsPerTask: round((everyClaimMs * 1000) / tasks, 2),
      leaveMs: round(leaveMs, 2),
      formerOverNow: round(everyClaimMs / leaveMs, 0),
      formerHeldCountMs: round(formerCountMs, 2),
      heldCountMs: round(countMs, 2),
    };
    process.stdout.write(`${JSON.stringify(figures)}\n`);
  } finally {
    store.close();
  }
} finally {
  pg.stop();
}
