// `status` at 1,000,000 tasks: a state file built in seconds by SQL (the schema from `openStore`, then
// one transaction of generated rows in a realistic mix of states), then `mediabatch status <run>` and
// `mediabatch status` (the list) timed and their peak RSS read, as the compiled CLI runs them.
//
//   npx tsx bench/status-scale.ts [--tasks 1000000] [--json]
//
// Target: under 2 s and under 300 MB each.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { openStore } from '../src/store/index.js';
import { cliMeasured, type Measured, round } from './lib/measure.js';

export const STATUS_SECONDS_TARGET = 2;
export const STATUS_RSS_TARGET_MB = 300;
const RUN = 'big-2026-01-05';

export interface StatusScaleFigures {
  tasks: number;
  fillSeconds: number;
  dbMb: number;
  states: Record<string, number>;
  /** `mediabatch --version`: the floor every command pays to start. */
  startup: { seconds: number; peakRssMb: number };
  run: { seconds: number; peakRssMb: number };
  list: { seconds: number; peakRssMb: number };
  rssBy: string;
}

/**
 * The mix, by `i % 1000`: 0–2 unfetched, 3 lost, 4 stalled, 5–9 in doubt, 10–29 failed (refunded),
 * 30–34 rejected, 35–39 pending, 40–41 running, the rest (958 in 1,000) done with one file.
 * Every third task is speech-v3 at 2 tokens, the others flat-image at 0.2: float sums that drift.
 */
const STATE_OF_I = `CASE
  WHEN i % 1000 < 3 THEN 'unfetched' WHEN i % 1000 = 3 THEN 'lost' WHEN i % 1000 = 4 THEN 'stalled'
  WHEN i % 1000 < 10 THEN 'in_doubt' WHEN i % 1000 < 30 THEN 'failed' WHEN i % 1000 < 35 THEN 'rejected'
  WHEN i % 1000 < 40 THEN 'pending' WHEN i % 1000 < 42 THEN 'running' ELSE 'done' END`;

/** Fills `file` (created by openStore) with one run of `count` tasks; one other small run beside it. */
export function fillStatusRun(file: string, count: number): void {
  openStore(file).close();
  const db = new Database(file);
  try {
    // A bench file: nothing to lose on a crash, and each synced page would cost minutes.
    db.pragma('synchronous = OFF');
    const at = '2026-01-05T09:00:00.000Z';
    db.transaction(() => {
      for (const [id, n] of [
        [RUN, count],
        ['small-2026-01-04', 10],
      ] as const) {
        db.prepare(
          `INSERT INTO runs (id, manifest_path, manifest_name, state, exit_code, settings, created_at, started_at)
           VALUES (?, '/bench/big.yaml', 'big', 'interrupted', 4, '{"output":"/bench/out"}', ?, ?)`,
        ).run(id, at, at);
        db.prepare(
          `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :count),
           g AS (SELECT i, ${STATE_OF_I} AS state, i % 3 = 0 AS speech FROM n)
           INSERT INTO tasks (run_id, task_id, seq, model, endpoint, body, body_hash, est_tokens, est_min,
             est_max, est_basis, est_assumed, state, img_uuid, cost, refunded, error, submitted_at,
             finished_at, job_status, updated_at)
           SELECT :run, 't-' || i, i - 1,
             CASE WHEN speech THEN 'speech-v3' ELSE 'flat-image' END,
             CASE WHEN speech THEN '/api/v1/audio/speech' ELSE '/api/v1/images/generations' END,
             json_object('prompt', 'A studio product shot of an Acme mug, variant ' || i || ', soft light'),
             printf('%064x', i),
             CASE WHEN speech THEN 2 ELSE 0.2 END, CASE WHEN speech THEN 2 ELSE 0.2 END,
             CASE WHEN speech THEN 2 ELSE 0.2 END, 'list price', 0, state,
             CASE WHEN state IN ('pending', 'in_doubt', 'rejected') THEN NULL ELSE :run || '-' || i END,
             CASE WHEN state IN ('pending', 'in_doubt', 'rejected') THEN NULL
                  WHEN speech THEN 2 ELSE 0.2 END,
             CASE WHEN state = 'failed' THEN CASE WHEN speech THEN 2 ELSE 0.2 END END,
             CASE state WHEN 'unfetched' THEN 'ENOSPC: no space left on device, free some space'
               WHEN 'lost' THEN 'result link expired' WHEN 'failed' THEN 'job failed: content policy'
               WHEN 'rejected' THEN 'ratio: must be one of 1:1, 16:9' WHEN 'in_doubt' THEN 'connection reset'
               END,
             :at, CASE WHEN state IN ('done', 'failed') THEN :at END,
             CASE WHEN state IN ('done', 'unfetched', 'lost') THEN 'success'
                  WHEN state = 'failed' THEN 'failed' END,
             :at
           FROM g`,
        ).run({ run: id, count: n, at });
        db.prepare(
          `INSERT INTO attempts (run_id, task_id, attempt_no, sent_at, answered_at, outcome, http_status, code, img_uuid)
           SELECT run_id, task_id, 1, :at, :at,
             CASE state WHEN 'in_doubt' THEN 'in_doubt' WHEN 'rejected' THEN 'rejected' ELSE 'submitted' END,
             CASE state WHEN 'in_doubt' THEN NULL WHEN 'rejected' THEN 400 ELSE 200 END,
             CASE state WHEN 'in_doubt' THEN NULL WHEN 'rejected' THEN 400 ELSE 200 END, img_uuid
           FROM tasks WHERE run_id = :run AND state <> 'pending'`,
        ).run({ run: id, at });
        db.prepare(
          `INSERT INTO ledger (key_fingerprint, period, run_id, task_id, img_uuid, kind, tokens, at)
           SELECT 'fp0123456789', '2026-01', run_id, task_id, img_uuid, 'charge', cost, :at
           FROM tasks WHERE run_id = :run AND img_uuid IS NOT NULL`,
        ).run({ run: id, at });
        db.prepare(
          `INSERT INTO ledger (key_fingerprint, period, run_id, task_id, img_uuid, kind, tokens, at)
           SELECT 'fp0123456789', '2026-01', run_id, task_id, img_uuid, 'refund', refunded, :at
           FROM tasks WHERE run_id = :run AND state = 'failed'`,
        ).run({ run: id, at });
        db.prepare(
          `INSERT INTO files (run_id, task_id, idx, kind, path, bytes, sha256, source_host, completed_at)
           SELECT run_id, task_id, 1, CASE WHEN model = 'speech-v3' THEN 'audio' ELSE 'image' END,
             '/bench/out/' || run_id || '/' || task_id || '/1.png', 180000 + seq % 5000, body_hash,
             'cdn.example.com', :at
           FROM tasks WHERE run_id = :run AND state = 'done'`,
        ).run({ run: id, at });
        // The counts and estimates the store keeps beside the rows (its own inserts keep them; these rows
        // bypass it).
        db.prepare(
          `INSERT INTO task_counts (run_id, state, n, est_micro, est_min_micro, est_max_micro)
           SELECT run_id, state, count(*), sum(CAST(round(est_tokens * 1000000) AS INTEGER)),
             sum(CAST(round(est_min * 1000000) AS INTEGER)), sum(CAST(round(est_max * 1000000) AS INTEGER))
           FROM tasks WHERE run_id = :run GROUP BY state ON CONFLICT (run_id, state) DO UPDATE SET
             n = excluded.n, est_micro = excluded.est_micro, est_min_micro = excluded.est_min_micro,
             est_max_micro = excluded.est_max_micro`,
        ).run({ run: id });
      }
    })();
  } finally {
    db.close();
  }
}

function checked(what: string, m: Measured): Measured {
  if (m.code !== 0) throw new Error(`${what} exited ${m.code}: ${m.stderr.slice(-2000)}`);
  return m;
}

export async function measureStatusScale(
  count: number,
  log: (line: string) => void = () => undefined,
): Promise<StatusScaleFigures> {
  const dir = await mkdtemp(join(tmpdir(), 'mb-bench-status-'));
  try {
    const file = join(dir, 'state.db');
    const started = performance.now();
    fillStatusRun(file, count);
    const fillSeconds = round((performance.now() - started) / 1000, 1);
    const db = new Database(file, { readonly: true });
    const states = Object.fromEntries(
      (
        db.prepare('SELECT state, count(*) AS n FROM tasks WHERE run_id = ? GROUP BY state').all(RUN) as {
          state: string;
          n: number;
        }[]
      ).map((r) => [r.state, r.n]),
    );
    const pages = db.pragma('page_count', { simple: true }) as number;
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    db.close();
    const dbMb = round((pages * pageSize) / 2 ** 20, 0);
    log(`filled ${count} tasks in ${fillSeconds} s (${dbMb} MB)`);
    // A first read warms the page cache, as the file of a run that just ended is warm. Then the best
    // of three: the machine is shared, and a slow outlier measures the neighbours, not `status`.
    checked('status (warm-up)', await cliMeasured(['--state', file, 'status', RUN], { cwd: dir }));
    const best = async (what: string, args: string[]) => {
      const all: Measured[] = [];
      for (let i = 0; i < 3; i++) all.push(checked(what, await cliMeasured(args, { cwd: dir })));
      return {
        seconds: round(Math.min(...all.map((m) => m.ms)) / 1000),
        peakRssMb: Math.max(...all.map((m) => m.peakRssMb)),
        rssBy: all[0]?.rssBy ?? 'VmHWM',
      };
    };
    const startup = await best('--version', ['--version']);
    log(`--version (the CLI's start-up alone): ${startup.seconds} s, ${startup.peakRssMb} MB`);
    const run = await best('status <run>', ['--state', file, 'status', RUN]);
    log(`status ${RUN}: ${run.seconds} s, ${run.peakRssMb} MB`);
    const list = await best('status', ['--state', file, 'status']);
    log(`status: ${list.seconds} s, ${list.peakRssMb} MB`);
    return {
      tasks: count,
      fillSeconds,
      dbMb,
      states,
      startup: { seconds: startup.seconds, peakRssMb: startup.peakRssMb },
      run: { seconds: run.seconds, peakRssMb: run.peakRssMb },
      list: { seconds: list.seconds, peakRssMb: list.peakRssMb },
      rssBy: run.rssBy,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: { tasks: { type: 'string', default: '1000000' }, json: { type: 'boolean', default: false } },
  });
  const count = Number(values.tasks);
  if (!Number.isInteger(count) || count < 1)
    throw new Error(`--tasks: must be a whole number, got ${values.tasks}`);
  const f = await measureStatusScale(count, (line) => process.stderr.write(`status-scale: ${line}\n`));
  if (values.json) process.stdout.write(`${JSON.stringify(f)}\n`);
  else {
    const mark = (m: { seconds: number; peakRssMb: number }) =>
      m.seconds < STATUS_SECONDS_TARGET && m.peakRssMb < STATUS_RSS_TARGET_MB ? 'met' : 'NOT met';
    console.log(`status <run> of ${count} tasks: ${f.run.seconds} s, ${f.run.peakRssMb} MB (${mark(f.run)})`);
    console.log(`--version (start-up):   ${f.startup.seconds} s, ${f.startup.peakRssMb} MB`);
    console.log(`status (list):          ${f.list.seconds} s, ${f.list.peakRssMb} MB (${mark(f.list)})`);
  }
}
