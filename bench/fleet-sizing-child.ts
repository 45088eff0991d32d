// One worker's database side of its tasks, through the store as `run` calls it (spawned by
// bench/fleet-sizing.ts, one process per worker, so each has its own connection): claim 64 pending tasks
// (row locks, SKIP LOCKED), then per task its intent (the run's money lock, the reservation, the move,
// the counts lock at commit) and its answer (the charge: the ledger, the run's money rows, the move).
// No API and no files: what the database lets through, with this process's CPU beside it. Starts at
// `startAt` (ms since the epoch) so that all workers go together; prints one JSON line.
//
//   node --import tsx bench/fleet-sizing-child.ts <url> <run id> <seconds> <startAt>
import { hostname } from 'node:os';
import { leaseHolder, openStore } from '../src/store/index.js';

const [url, runId, seconds, startAt] = process.argv.slice(2);
if (url === undefined || runId === undefined || seconds === undefined || startAt === undefined) {
  throw new Error('usage: fleet-sizing-child.ts <url> <run id> <seconds> <startAt>');
}
const store = openStore(url);
try {
  const worker = leaseHolder(process.pid, hostname(), runId);
  store.workers.join(runId, worker, hostname(), process.pid, 60_000);
  const wait = Number(startAt) - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const until = started + Number(seconds) * 1000;
  let tasks = 0;
  let claims = 0;
  while (performance.now() < until) {
    const batch = store.claims.claimPending(runId, worker, 64);
    claims += 1;
    if (batch.length === 0) break;
    for (const t of batch) {
      if (performance.now() >= until) break;
      const attempt = store.submissions.recordSubmitIntent(runId, t.taskId, worker);
      store.submissions.recordSubmitted(runId, t.taskId, attempt, {
        imgUuid: `${runId}-${t.taskId}`,
        cost: 0.2,
        keyFingerprint: 'bench0000000',
      });
      tasks += 1;
    }
  }
  const elapsed = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  process.stdout.write(
    `${JSON.stringify({ tasks, claims, seconds: elapsed, cpuMs: (cpu.user + cpu.system) / 1000 })}\n`,
  );
} finally {
  store.close();
}
