// Loopback load on the sandbox: bounded in time, stops by itself, prints submissions per second.
// Usage: tsx bench/sandbox-load.ts [--seconds 3] [--concurrency 32] [--json]
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { startSandbox } from '../src/sandbox/server.js';

const TARGET_PER_SECOND = 1000;

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '32' },
    json: { type: 'boolean', default: false },
  },
});
const seconds = Number(values.seconds);
const concurrency = Number(values.concurrency);
if (
  !(seconds > 0 && seconds <= 60) ||
  !(Number.isInteger(concurrency) && concurrency > 0 && concurrency <= 1024)
) {
  console.error('sandbox-load: --seconds must be in (0, 60] and --concurrency a whole number from 1 to 1024');
  process.exit(1);
}

const sandbox = await startSandbox({ speed: 0, balance: 1e9, seed: 7, tickMs: 1000 });
const pool = new Pool(sandbox.baseUrl, { connections: concurrency, pipelining: 1 });
const body = JSON.stringify({ model: 'flat-image', prompt: 'a mug on a table', ratio: '1:1' });
const headers = { authorization: 'Bearer sandbox-key', 'content-type': 'application/json' };
const latencies: number[] = [];
let failures = 0;

const start = performance.now();
const deadline = start + seconds * 1000;
async function worker(): Promise<void> {
  while (performance.now() < deadline) {
    const sent = performance.now();
    const response = await pool.request({
      path: '/api/v1/images/generations',
      method: 'POST',
      headers,
      body,
    });
    const answer = (await response.body.json()) as { code?: number };
    if (response.statusCode !== 200 || answer.code !== 0) failures++;
    latencies.push(performance.now() - sent);
  }
}
await Promise.all(Array.from({ length: concurrency }, worker));
const elapsed = (performance.now() - start) / 1000;
await pool.close();
const state = sandbox.state();
await sandbox.close();

latencies.sort((a, b) => a - b);
const at = (q: number): number =>
  Math.round((latencies[Math.floor(q * (latencies.length - 1))] ?? 0) * 100) / 100;
const perSecond = Math.round(latencies.length / elapsed);
const result = {
  submissions: latencies.length,
  failures,
  seconds: Math.round(elapsed * 100) / 100,
  concurrency,
  perSecond,
  p50Ms: at(0.5),
  p99Ms: at(0.99),
  jobs: state.jobs.length,
  target: TARGET_PER_SECOND,
  meetsTarget: perSecond >= TARGET_PER_SECOND && failures === 0,
};
if (values.json) console.log(JSON.stringify(result));
else {
  console.log(
    `sandbox-load: ${result.submissions} submissions in ${result.seconds} s = ${perSecond}/s ` +
      `(concurrency ${concurrency}, p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, ${failures} failed; ` +
      `target >= ${TARGET_PER_SECOND}/s: ${result.meetsTarget ? 'met' : 'NOT met'})`,
  );
}
