// The account of a 1,000,000-task run (describeRun: counts by shown state, money by kind, estimate,
// next steps) read from a state file built by SQL (bench/status-scale.ts's mix of states, with failed
// and refunded jobs sent again and tasks in doubt), in a process of its own: time and peak RSS.
// Measured, not asserted.
//
//   npx tsx bench/account-scale.ts [--tasks 1000000]
//
// Target: under 1 s and under 300 MB.
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { REPO } from '../test/helpers/child.js';
import { round } from './lib/measure.js';
import { fillStatusRun } from './status-scale.js';

export const ACCOUNT_SECONDS_TARGET = 1;
export const ACCOUNT_RSS_TARGET_MB = 300;
const RUN = 'big-2026-01-05';

export interface AccountScaleFigures {
  tasks: number;
  seconds: number;
  peakRssMb: number;
}

/**
 * Half the failed tasks (1 in 100) sent again and done: a second attempt and its charge, which the
 * account tells apart job by job (a retry after a failed, refunded job).
 */
function sendAgain(file: string): void {
  const db = new Database(file);
  try {
    db.pragma('synchronous = OFF');
    db.transaction(() => {
      db.prepare(
        `INSERT INTO attempts (run_id, task_id, attempt_no, sent_at, answered_at, outcome, http_status, code, img_uuid)
         SELECT run_id, task_id, 2, updated_at, updated_at, 'submitted', 200, 200, img_uuid || '-again'
         FROM tasks WHERE run_id = ? AND state = 'failed' AND seq % 2 = 0`,
      ).run(RUN);
      db.prepare(
        `INSERT INTO ledger (key_fingerprint, period, run_id, task_id, img_uuid, kind, tokens, at)
         SELECT 'fp0123456789', '2026-01', run_id, task_id, img_uuid || '-again', 'charge', cost, updated_at
         FROM tasks WHERE run_id = ? AND state = 'failed' AND seq % 2 = 0`,
      ).run(RUN);
    })();
  } finally {
    db.close();
  }
}

export async function measureAccountScale(
  count: number,
  log: (line: string) => void = () => undefined,
): Promise<AccountScaleFigures> {
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-account-'));
  try {
    const file = join(dir, 'state.db');
    fillStatusRun(file, count);
    sendAgain(file);
    log(`filled ${count} tasks`);
    const out = execFileSync(process.execPath, ['--import', 'tsx', 'bench/account-child.ts', file, RUN], {
      cwd: REPO,
      encoding: 'utf8',
    });
    const f = JSON.parse(out.trim()) as { tasks: number; ms: number; peakRssMb: number };
    log(`describeRun of ${f.tasks} tasks: ${f.ms} ms, ${f.peakRssMb} MB`);
    return { tasks: f.tasks, seconds: round(f.ms / 1000), peakRssMb: f.peakRssMb };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { tasks: { type: 'string', default: '1000000' } } });
  const count = Number(values.tasks);
  if (!Number.isInteger(count) || count < 1)
    throw new Error(`--tasks: must be a whole number, got ${values.tasks}`);
  const f = await measureAccountScale(count, (line) => process.stderr.write(`account-scale: ${line}\n`));
  const met = f.seconds < ACCOUNT_SECONDS_TARGET && f.peakRssMb < ACCOUNT_RSS_TARGET_MB ? 'met' : 'NOT met';
  console.log(`account of ${f.tasks} tasks: ${f.seconds} s, ${f.peakRssMb} MB (${met})`);
}
