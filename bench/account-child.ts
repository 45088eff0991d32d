// The account of one run read in this process (spawned by bench/account-scale.ts, so its peak memory is
// the read's own): a warm-up, then the best of three timed reads. Prints one JSON line.
//
//   node --import tsx bench/account-child.ts <state file> <run id>
import { describeRun } from '../src/account/index.js';
import { openReadOnlyStore } from '../src/store/index.js';

const [file, runId] = process.argv.slice(2);
if (file === undefined || runId === undefined)
  throw new Error('usage: account-child.ts <state file> <run id>');
const store = openReadOnlyStore(file);
try {
  describeRun(store, runId);
  const times: number[] = [];
  let tasks = 0;
  for (let i = 0; i < 3; i++) {
    const started = performance.now();
    tasks = describeRun(store, runId).tasks;
    times.push(performance.now() - started);
  }
  const peakRssMb = Math.round(process.resourceUsage().maxRSS / 1024);
  process.stdout.write(`${JSON.stringify({ tasks, ms: Math.round(Math.min(...times)), peakRssMb })}\n`);
} finally {
  store.close();
}
