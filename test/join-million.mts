// Manual measurement (not a test): a worker joining a new 1,000,000-task run on PostgreSQL while its first
// worker still stores the plan.
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { writeImagesManifest } from '../bench/lib/manifests.js';
import { startSandbox } from '../src/sandbox/server.js';
import { openStore } from '../src/store/index.js';
import { spawnCli } from './helpers/child.js';
import { startPostgres } from './helpers/postgres.js';

const n = Number(process.argv[2] ?? 1_000_000);
const pg = await startPostgres();
const url = pg.freshDatabase();
const sandbox = await startSandbox({ port: 0, speed: 1, seed: 1, apiKey: 'sandbox-key', balance: 1e9 });
const dir = await mkdtemp(join('/tmp/js/m', 'run-'));
const file = await writeImagesManifest(dir, { name: 'mil', count: n, concurrency: 16 });
const env = { MEDIABATCH_API_KEY: 'sandbox-key', MEDIABATCH_BASE_URL: sandbox.baseUrl };
const args = ['--state', url, 'run', file, '--yes', '--allow-local-output', '--allow-partial'];
const t0 = Date.now();
const s = (t: number) => ((t - t0) / 1000).toFixed(1);
const first = spawnCli(args, { cwd: dir, env });
const store = openStore(url);
const stored = () => Object.values(store.tasks.countTasksByState('mil')).reduce((a, b) => a + b, 0);
let joiner: ReturnType<typeof spawnCli> | undefined;
let tJoin = 0;
let joinSubmitted = false;
for (;;) {
  await new Promise((r) => setTimeout(r, 250));
  const workers = store.workers.list('mil');
  const run = store.runs.getRun('mil');
  if (!joiner && workers.length > 0) {
    console.log(`${s(Date.now())} s: first worker works; stored ${stored()}; digest recorded: ${run?.planDigest !== null}`);
    joiner = spawnCli(args, { cwd: dir, env });
    tJoin = Date.now();
  }
  if (joiner && !joinSubmitted && workers.some((w) => w.pid === joiner?.proc.pid && w.submitted > 0)) {
    joinSubmitted = true;
    console.log(`${s(Date.now())} s: joiner submitted, ${((Date.now() - tJoin) / 1000).toFixed(1)} s after it started; stored ${stored()} of ${n}; planStoring ${run?.planStoring}`);
  }
  if (run && run.planStoring === false && run.planDigest) {
    console.log(`${s(Date.now())} s: plan stored whole`);
    break;
  }
  if (Date.now() - t0 > 900_000) { console.log('timeout'); break; }
  if (first.proc.exitCode !== null) { console.log('first exited', first.stderr().slice(-500)); break; }
}
first.proc.kill('SIGINT');
joiner?.proc.kill('SIGINT');
console.log('exits', await first.exited, await joiner?.exited);
console.log(joiner?.stdout().slice(0, 400));
store.close();
await sandbox.close();
await pg.stop();
