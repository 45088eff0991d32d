// A large state file for the view's paging test and bench: the run and its tasks stored by the store's
// own insert (upsertTasks, one transaction, so the counts by state are kept as a real run keeps them),
// then moved into a realistic mix of states in one more transaction: finished over an hour (so the
// charts have a shape), charged in the ledger, failures with a few reasons, some in doubt, files.
import Database from 'better-sqlite3';
import { type NewTask, openStore } from '../src/store/index.js';

export const VIEW_RUN = 'big';
const START = Date.parse('2026-01-05T09:00:00.000Z');

function* tasks(count: number): Generator<NewTask> {
  for (let i = 1; i <= count; i++) {
    const speech = i % 3 === 0;
    const price = speech ? 2 : 0.2;
    yield {
      taskId: `t-${i}`,
      model: speech ? 'speech-v3' : 'flat-image',
      endpoint: speech ? '/api/v1/audio/speech' : '/api/v1/images/generations',
      wireBody: JSON.stringify({ prompt: `A studio product shot of an Acme mug, variant ${i}, soft light` }),
      estimate: { tokens: price, min: price, max: price, basis: 'list price', assumedPrice: false },
    };
  }
}

/** By `i % 1000`: 0–9 in doubt, 10–29 failed (3 reasons), 30–39 pending, 40–41 running, the rest done. */
const STATE = `CASE WHEN seq % 1000 < 10 THEN 'in_doubt' WHEN seq % 1000 < 30 THEN 'failed'
  WHEN seq % 1000 < 40 THEN 'pending' WHEN seq % 1000 < 42 THEN 'running' ELSE 'done' END`;

export function fillViewRun(file: string, count: number, outDir = '/bench/out'): void {
  const store = openStore(file);
  try {
    store.runs.createRun({
      id: VIEW_RUN,
      manifestPath: '/bench/big.yaml',
      manifestName: 'big',
      settings: { output: outDir, budget: count },
    });
    store.tasks.upsertTasks(VIEW_RUN, tasks(count), { allNew: true });
  } finally {
    store.close();
  }
  const db = new Database(file);
  try {
    db.pragma('synchronous = OFF');
    const run = VIEW_RUN;
    db.transaction(() => {
      db.prepare(
        `UPDATE tasks SET state = ${STATE},
           img_uuid = CASE WHEN ${STATE} IN ('pending', 'in_doubt') THEN NULL ELSE run_id || '-' || seq END,
           error = CASE WHEN ${STATE} = 'in_doubt' THEN 'connection reset after the request was sent'
             WHEN ${STATE} = 'failed' THEN 'job failed: ' || CASE seq % 3 WHEN 0 THEN 'content policy'
               WHEN 1 THEN 'timeout' ELSE 'server error' END END,
           finished_at = CASE WHEN ${STATE} IN ('done', 'failed')
             THEN strftime('%Y-%m-%dT%H:%M:%fZ', :start / 1000.0 + seq * 3600.0 / :count, 'unixepoch') END
         WHERE run_id = :run`,
      ).run({ run, start: START, count });
      db.prepare(
        `INSERT INTO ledger (key_fingerprint, period, run_id, task_id, img_uuid, kind, tokens, at)
         SELECT 'fp0123456789', '2026-01', run_id, task_id, img_uuid, 'charge', est_tokens, finished_at
         FROM tasks WHERE run_id = :run AND finished_at IS NOT NULL`,
      ).run({ run });
      db.prepare(
        `INSERT INTO ledger (key_fingerprint, period, run_id, task_id, img_uuid, kind, tokens, at)
         SELECT 'fp0123456789', '2026-01', run_id, task_id, img_uuid, 'refund', est_tokens, finished_at
         FROM tasks WHERE run_id = :run AND state = 'failed'`,
      ).run({ run });
      db.prepare(
        `INSERT INTO files (run_id, task_id, idx, kind, path, bytes, sha256, source_host, completed_at)
         SELECT run_id, task_id, 1, CASE WHEN model = 'speech-v3' THEN 'audio' ELSE 'image' END,
           :out || '/' || run_id || '/' || task_id || '/1.' || CASE WHEN model = 'speech-v3' THEN 'mp3' ELSE 'png' END,
           180000 + seq % 5000, printf('%064x', seq), 'cdn.example.com', finished_at
         FROM tasks WHERE run_id = :run AND state = 'done'`,
      ).run({ run, out: outDir });
    })();
  } finally {
    db.close();
  }
}
