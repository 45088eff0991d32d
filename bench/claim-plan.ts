// `npx tsx bench/claim-plan.ts [pending…]`: what one claim of 64 costs at a queue of many pending tasks. For
// each size (5,000 and 50,000 unless given), one run of that many pending tasks in a throwaway PostgreSQL on
// loopback and in a SQLite file: the server's plan of the claim (EXPLAIN ANALYZE of the prepared statement,
// its custom and its generic plan, run and rolled back), then the store's own claims of 64 timed from the
// worker, the claimed tasks moved off the queue between claims (not counted), as a worker's intents do.
// BENCH_PLANS=1 prints the two plans whole.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore, type Store } from '../src/store/index.js';
import type { NewTask } from '../src/store/types.js';
import { startPostgres } from '../test/helpers/postgres.js';
import { round } from './lib/measure.js';
import { psql } from './lib/psql.js';

const sizes = process.argv.slice(2).map(Number);
if (sizes.length === 0) sizes.push(5_000, 50_000);
const log = (line: string) => process.stderr.write(`bench: ${line}\n`);
const WORKER = 'worker-a';
const CLAIMS = 20;

/** The store's claim on PostgreSQL (src/store/pg/overrides.ts, longest first), its names as $n. */
const CLAIM_PG = `WITH next AS (SELECT rowid FROM tasks WHERE run_id = $1 AND state = 'pending' AND waits = 0
   AND (claimed_by IS NULL OR claimed_by = $2 OR claimed_by IN (SELECT worker_id FROM workers
     WHERE run_id = $1 AND (stopped_at IS NOT NULL OR lost_at IS NOT NULL)))
   AND (CAST($3 AS TEXT) IS NULL OR task_id IN (SELECT value FROM json_each($3)))
   AND (CAST($4 AS TEXT) IS NULL OR task_id NOT IN (SELECT value FROM json_each($4)))
   ORDER BY expected_ms DESC, seq LIMIT $5 FOR UPDATE SKIP LOCKED)
 UPDATE tasks SET claimed_by = $2 FROM next WHERE tasks.rowid = next.rowid
 RETURNING tasks.*`;

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

function fill(store: Store, n: number): void {
  store.runs.createRun({ id: 'r', manifestPath: '/m.yaml', manifestName: 'm', settings: {} });
  store.tasks.upsertTasks('r', rows(n));
  store.workers.join('r', WORKER, 'host-a', process.pid, 600_000);
  store.workers.join('r', 'worker-b', 'host-b', process.pid, 600_000);
}

/** The median ms of a claim of 64 from the worker, over `CLAIMS` claims (each claimed batch then leaves the queue). */
function claimMs(store: Store): number {
  const times: number[] = [];
  for (let i = 0; i < CLAIMS; i++) {
    const at = performance.now();
    const batch = store.claims.claimPending('r', WORKER, 64);
    times.push(performance.now() - at);
    store.batch(batch.map((t) => () => store.tasks.markBlocked('r', t.taskId, 'bench')));
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)] ?? Number.NaN;
}

/** EXPLAIN ANALYZE of the prepared claim, run 7 times (the sixth on is the generic plan), rolled back. */
function pgPlans(url: string): { custom: string; generic: string } {
  const explain = `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE claim('r', '${WORKER}', NULL, NULL, 64)`;
  const out = psql(
    url,
    `BEGIN; PREPARE claim(text, text, text, text, bigint) AS ${CLAIM_PG};
     ${Array.from({ length: 7 }, () => explain).join(';\n')}; ROLLBACK`,
  );
  const plans = out.split(/\n(?=(?:Update on|CTE Scan|Nested Loop|Hash Join|Merge Join) )/);
  return { custom: plans[0] ?? out, generic: plans[plans.length - 1] ?? out };
}

/** Where a plan's time goes: finding and locking the 64 rows (the CTE) against the whole statement. */
function split(plan: string): string {
  const total = /Execution Time: ([\d.]+) ms/.exec(plan)?.[1];
  const scan = /CTE next\s+->\s+Limit \(actual time=[\d.]+\.\.([\d.]+)/.exec(plan)?.[1];
  const join = /(Seq Scan|Index Scan using \w+) on tasks \(/.exec(plan)?.[1];
  return `${scan} ms to find and lock the rows (an index walk, stopped at 64) of ${total} ms; rows joined back by ${join}`;
}

const pg = await startPostgres();
const dir = mkdtempSync(join(tmpdir(), 'mb-claim-plan-'));
try {
  for (const n of sizes) {
    const url = pg.freshDatabase();
    const store = openStore(url);
    try {
      fill(store, n);
      psql(url, 'VACUUM ANALYZE tasks');
      const plans = pgPlans(url);
      if (process.env.BENCH_PLANS === '1') {
        log(`PostgreSQL, ${n} pending, the claim's first (custom) plan:\n${plans.custom}`);
        log(`PostgreSQL, ${n} pending, its generic plan (7th execution):\n${plans.generic}`);
      }
      for (const [name, plan] of Object.entries(plans)) {
        log(`PostgreSQL, ${n} pending, ${name} plan: ${split(plan)}`);
      }
      log(
        `PostgreSQL, ${n} pending: a claim of 64 from the worker, median of ${CLAIMS}: ${round(claimMs(store), 2)} ms`,
      );
    } finally {
      store.close();
    }
    const file = join(dir, `claims-${n}.db`);
    const lite = openStore(file);
    try {
      fill(lite, n);
      log(`SQLite, ${n} pending: a claim of 64, median of ${CLAIMS}: ${round(claimMs(lite), 2)} ms`);
    } finally {
      lite.close();
    }
  }
} finally {
  pg.stop();
  rmSync(dir, { recursive: true, force: true });
}
