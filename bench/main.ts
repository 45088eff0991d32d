// `npm run bench`: every figure from one run, printed as a table and written to
// bench/results.json with the commit and the machine. Each figure is a ratio or a count, so it holds
// on a noisy machine. Takes about 8 minutes on 2 cores (2 of them the 100,000-task run, stopped then),
// plus about 4 for the three repetitions of the 48-task makespan at half speed, plus the view's figures,
// plus about 2 for what reserving in the store costs the runner (step 12, four runs of 5,000 images).
// plus about 7 for PostgreSQL's (13-16; `--million` plans 1,000,000 tasks into it instead of 100,000, and
// runs a worker of as many).
import { execFileSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { REPO, spawnSandbox } from '../test/helpers/child.js';
import {
  ACCOUNT_RSS_TARGET_MB,
  ACCOUNT_SECONDS_TARGET,
  type AccountScaleFigures,
  measureAccountScale,
} from './account-scale.js';
import { downloadRow, measureDownloads } from './download.js';
import { machine } from './lib/measure.js';
import { type MakespanFigures, measureMakespan, repetitionRow } from './makespan.js';
import { type MillionFigures, measureMillion } from './million.js';
import { measurePostgres, type PostgresFigures, postgresRows } from './postgres-steps.js';
import { measureRequests, TIME_SCALE } from './requests.js';
import { measureReserve, RESERVE_RATIO_TARGET, type ReserveFigures } from './reserve.js';
import { measureScale, RSS_TARGET_MB } from './scale.js';
import { measureStartup, type StartupFigures, startupRows } from './startup.js';
import { measureThroughput } from './throughput.js';
import {
  FIRST_RENDER_TARGET_MS,
  measureView,
  SSE_P95_TARGET_MS,
  THROUGHPUT_RATIO_TARGET,
  VIEW_RSS_TARGET_MB,
  type ViewFigures,
} from './view.js';

/** Job times and polling at a quarter of real time: ratios hold, and the two batches take ~3 minutes. */
const MAKESPAN_SPEED = 0.25;
const RESULTS = fileURLToPath(new URL('./results.json', import.meta.url));
const log = (line: string) => process.stderr.write(`bench: ${line}\n`);

interface SandboxLoad {
  submissions: number;
  perSecond: number;
  failures: number;
  p99Ms: number;
}

function sandboxLoad(): SandboxLoad {
  const out = execFileSync(
    process.execPath,
    ['--import', 'tsx', 'bench/sandbox-load.ts', '--seconds', '5', '--concurrency', '32', '--json'],
    { cwd: REPO, encoding: 'utf8' },
  );
  return JSON.parse(out.trim().split('\n').pop() ?? '{}') as SandboxLoad;
}

const started = performance.now();
const host = machine(REPO);
log(`${host.cpus} cpus, ${host.memoryGb} GB, node ${host.node}, commit ${host.commit}`);

log('1/8 sandbox submissions per second');
const load = sandboxLoad();

// One sandbox process for the throughput and scale figures: it outlives the runs, like the service.
const { child: sandbox, baseUrl } = await spawnSandbox(['--speed', '0', '--balance', '1e9', '--seed', '7']);
let figures: Record<string, unknown>;
try {
  log('2/8 runner throughput, 5,000 tasks, concurrency 64');
  const throughput = await measureThroughput(baseUrl, 5000, 64);
  log(`runner ${throughput.runnerTasksPerSecond} tasks/s, bare ${throughput.bareTasksPerSecond} tasks/s`);
  log(`3/8 requests per task and notice delay (speed ${TIME_SCALE}, poll scale ${TIME_SCALE})`);
  const polling = await measureRequests('polling');
  const callbacks = await measureRequests('callbacks');
  log(`polls per task ${polling.pollsPerTask} (polling), ${callbacks.pollsPerTask} (callbacks)`);
  log('4/8 and 5/8 scale and resume (10,000 and 100,000 tasks)');
  const scale = await measureScale(baseUrl, log);
  log('6/8 a 200 MB and a 500 MB download against curl + sync');
  const download = await measureDownloads([200, 500]);
  log(`7/8 makespan of a mixed batch against the ideal and a 5 s script (speed ${MAKESPAN_SPEED})`);
  const makespan = [
    await measureMakespan({ tasks: 64, concurrency: 8, speed: MAKESPAN_SPEED }),
    await measureMakespan({ tasks: 256, concurrency: 32, speed: MAKESPAN_SPEED }),
    // The figure: half speed, the target in every one of three repetitions.
    await measureMakespan({ tasks: 48, concurrency: 8, speed: 0.5, repetitions: 3 }),
  ];
  log('8/8 a million tasks against 100,000: plan, first submission, rate, Ctrl-C, status; validate start');
  const million = await measureMillion(baseUrl, { big: 1_000_000, small: 100_000, rateSeconds: 15 }, log);
  log('10 the view of a 1,000,000-task run: first render, memory, change to page, runner with a view');
  const view = await measureView(1_000_000, log);
  log('11 the account of a 1,000,000-task run (describeRun), in a process of its own');
  const account = await measureAccountScale(1_000_000, log);
  log('12 reserving in the store / the code before it: 5,000 images, concurrency 64, two of each');
  const reserve = await measureReserve(baseUrl, { tasks: 5000, concurrency: 64, repetitions: 2 });
  const postgres = await measurePostgres(baseUrl, {
    planTasks: process.argv.includes('--million') ? 1_000_000 : 100_000,
    log,
  });
  figures = {
    sandboxLoad: load,
    throughput,
    requests: { polling, callbacks },
    scale,
    download,
    makespan,
    million,
    view,
    account,
    reserve,
    postgres,
  };
} finally {
  sandbox.proc.kill('SIGTERM');
  await sandbox.exited;
}

// Start-up as a user meets it: the built package (dist/, with the CLI's bundle), against bare node.
log('9 start-up: npm run prepare, then node bin/mediabatch.js --version, --help, validate (median of 5)');
execFileSync('npm', ['run', 'prepare', '--silent'], { cwd: REPO, stdio: 'ignore' });
figures['startup'] = measureStartup(5);

const f = figures as {
  sandboxLoad: SandboxLoad;
  throughput: Awaited<ReturnType<typeof measureThroughput>>;
  requests: {
    polling: Awaited<ReturnType<typeof measureRequests>>;
    callbacks: Awaited<ReturnType<typeof measureRequests>>;
  };
  scale: Awaited<ReturnType<typeof measureScale>>;
  download: Awaited<ReturnType<typeof measureDownloads>>;
  makespan: MakespanFigures[];
  million: MillionFigures;
  startup: StartupFigures;
  view: ViewFigures;
  account: AccountScaleFigures;
  reserve: ReserveFigures;
  postgres: PostgresFigures;
};
const mark = (ok: boolean) => (ok ? 'met' : 'NOT met');
const { polling, callbacks } = f.requests;
const rows: [string, string, string][] = [
  [
    '1 sandbox submissions/s (speed 0, 32 connections)',
    `${f.sandboxLoad.perSecond}/s, p99 ${f.sandboxLoad.p99Ms} ms, ${f.sandboxLoad.failures} failed`,
    '',
  ],
  [
    '2 runner, 5,000 images, concurrency 64',
    `${f.throughput.runnerTasksPerSecond} tasks/s (${f.throughput.runnerSeconds} s)`,
    '',
  ],
  [
    '2 bare undici loop, same requests',
    `${f.throughput.bareTasksPerSecond} tasks/s (${f.throughput.bareSeconds} s)`,
    '',
  ],
  [
    '2 lean durable loop, same requests and commits',
    `${f.throughput.leanTasksPerSecond} tasks/s (${f.throughput.leanSeconds} s)`,
    '',
  ],
  [
    '2 runner alone (first submission to last done) / lean durable loop',
    `${f.throughput.leanPhaseRatio} (${f.throughput.runnerPhaseSeconds} s)`,
    `>= 0.8 ${mark(f.throughput.leanPhaseRatio >= 0.8)}`,
  ],
  ['2 runner end to end (start-up, plan, report) / lean durable loop', `${f.throughput.leanRatio}`, ''],
  ['2 runner / bare (information)', `${f.throughput.ratio}`, ''],
  [
    '3 requests/task, polling (submit/poll/download)',
    `${polling.submitsPerTask} / ${polling.pollsPerTask} / ${polling.downloadsPerTask}`,
    '',
  ],
  [
    '3 requests/task, callbacks',
    `${callbacks.submitsPerTask} / ${callbacks.pollsPerTask} / ${callbacks.downloadsPerTask}`,
    '',
  ],
  [
    '3 notice delay at speed 1, polling (median/p95)',
    `${polling.noticeMedianMsAtSpeed1} / ${polling.noticeP95MsAtSpeed1} ms`,
    '',
  ],
  [
    '3 notice delay, callbacks (median/p95)',
    `${callbacks.noticeMedianMs} / ${callbacks.noticeP95Ms} ms (${callbacks.byCallback}/${callbacks.tasks} by callback)`,
    '',
  ],
  ['4 plan 10,000 tasks', `${f.scale.plan10kSeconds} s, ${f.scale.plan10kPeakRssMb} MB`, ''],
  [
    '4 plan 100,000 tasks',
    `${f.scale.plan100kSeconds} s, ${f.scale.plan100kPeakRssMb} MB (x${f.scale.planGrowth})`,
    '',
  ],
  ['4 run 10,000 tasks peak RSS', `${f.scale.run10kPeakRssMb} MB (${f.scale.run10kSeconds} s)`, ''],
  [
    '4 run 100,000 tasks peak RSS',
    `${f.scale.run100kPeakRssMb} MB (stopped after ${f.scale.run100kSeconds} s, ${f.scale.run100kDone} done), x${f.scale.runGrowth} for x10 tasks`,
    `< ${RSS_TARGET_MB} MB ${mark(f.scale.run100kPeakRssMb < RSS_TARGET_MB)}`,
  ],
  ['5 resume, 99% of 101,000 done: to first submission', `${f.scale.resume.toFirstSubmitSeconds} s`, ''],
  ...f.download.map(downloadRow),
  ...f.download.map((d): [string, string, string] => [
    `6 ${d.megabytes} MB peak RSS, ours (1 MB baseline) / curl`,
    `${d.oursPeakRssMb} (${d.oursBaselineRssMb}) / ${d.curlPeakRssMb ?? '-'} MB`,
    '',
  ]),
  ...f.makespan.flatMap((m): [string, string, string][] =>
    m.runs.map((r) => {
      const toFile = Object.entries(r.toFile)
        .map(([kind, d]) => `${kind} ${d.medianMs}/${d.p95Ms} ms`)
        .join(', ');
      const polling = r.who === 'mediabatch polling';
      const fileTarget = r.who.includes('callbacks') ? 500 : 5_000;
      const p95 = Math.max(...Object.values(r.toFile).map((d) => d.p95Ms));
      const targets = r.who.startsWith('mediabatch')
        ? [
            ...(polling
              ? [`ratio <= 1.05 ${mark(r.ratio <= 1.05)}`, `<= 4.5 req ${mark(r.requestsPerTask <= 4.5)}`]
              : []),
            `p95 <= ${fileTarget} ms ${mark(p95 <= fileTarget)}`,
          ]
        : [];
      return [
        `7 ${m.tasks} tasks, c${m.concurrency}: ${r.who}`,
        `${r.ratio} x ideal of its order, ${r.vsListIdeal} x list-order ideal, ${r.requestsPerTask} req/task, success -> file ${toFile}`,
        targets.join(', '),
      ];
    }),
  ),
  [
    '8 validate, 3 tasks, compiled',
    `${f.million.validateSeconds} s`,
    `<= 0.3 s ${mark(f.million.validateSeconds <= 0.3)}`,
  ],
  [
    `8 plan ${f.million.plan.tasks.toLocaleString('en-US')} tasks`,
    `${f.million.plan.seconds} s, ${f.million.plan.peakRssMb} MB`,
    `<= 500 MB ${mark(f.million.plan.peakRssMb <= 500)}`,
  ],
  ...[f.million.small, f.million.big].map((r): [string, string, string] => [
    `8 run ${r.tasks.toLocaleString('en-US')} tasks`,
    `first submission ${r.toFirstSubmitSeconds} s, ${r.submitsPerSecond}/s, Ctrl-C to exit ${r.exitSeconds} s, ${r.peakRssMb} MB`,
    r.tasks >= 1_000_000
      ? `first <= 10 s ${mark(r.toFirstSubmitSeconds <= 10)}, exit <= 5 s ${mark(r.exitSeconds <= 5)}, <= 500 MB ${mark(r.peakRssMb <= 500)}`
      : '',
  ]),
  [
    '8 rate at 1,000,000 / at 100,000',
    `${f.million.rateRatio}`,
    `>= 0.8 ${mark(f.million.rateRatio >= 0.8)}`,
  ],
  [
    '8 status of the 1,000,000-task run',
    `${f.million.status.seconds} s, ${f.million.status.peakRssMb} MB`,
    `<= 500 MB ${mark(f.million.status.peakRssMb <= 500)}`,
  ],
  [
    '11 account of the 1,000,000-task run (describeRun, one read)',
    `${f.account.seconds} s, ${f.account.peakRssMb} MB`,
    `< ${ACCOUNT_SECONDS_TARGET} s, < ${ACCOUNT_RSS_TARGET_MB} MB ${mark(f.account.seconds < ACCOUNT_SECONDS_TARGET && f.account.peakRssMb < ACCOUNT_RSS_TARGET_MB)}`,
  ],
  [
    '12 runner with reservations in the store / before them (5,000 images, c64, best of 2)',
    `${f.reserve.ratio} (${f.reserve.beforeSeconds.join(', ')} s before, ${f.reserve.nowSeconds.join(', ')} s now); CPU ${f.reserve.cpuRatio}`,
    `>= ${RESERVE_RATIO_TARGET} ${mark(f.reserve.ratio >= RESERVE_RATIO_TARGET)}`,
  ],
  ...f.makespan.filter((m) => m.repeated.polling.length > 1).map(repetitionRow),
  [
    '10 view, 1,000,000 tasks: first render of counters, charts, results (again)',
    `${f.view.firstRenderMs} ms (${f.view.secondRenderMs} ms); view starts in ${f.view.viewStartMs} ms`,
    `<= ${FIRST_RENDER_TARGET_MS} ms ${mark(f.view.firstRenderMs <= FIRST_RENDER_TARGET_MS)}`,
  ],
  [
    '10 view server peak RSS',
    `${f.view.viewPeakRssMb} MB`,
    `< ${VIEW_RSS_TARGET_MB} MB ${mark(f.view.viewPeakRssMb < VIEW_RSS_TARGET_MB)}`,
  ],
  [
    '10 task change to open page (p95, median)',
    `${f.view.sseP95Ms} ms, ${f.view.sseMedianMs} ms (${f.view.changes} changes)`,
    `<= ${SSE_P95_TARGET_MS} ms ${mark(f.view.sseP95Ms <= SSE_P95_TARGET_MS)}`,
  ],
  [
    '10 runner with a page open on its run / without (run --view and Chromium vs run; 3,000 images, concurrency 64, median of 3)',
    `${f.view.runner.ratio} (${f.view.runner.withPage.join(', ')} / ${f.view.runner.without.join(', ')} tasks/s; load ${f.view.runner.load.join(' → ')})`,
    `>= ${THROUGHPUT_RATIO_TARGET} ${mark(f.view.runner.ratio >= THROUGHPUT_RATIO_TARGET)}`,
  ],
  ...f.makespan.map((m): [string, string, string] => [
    `7 ${m.tasks} tasks, c${m.concurrency}: longest-first ideal / list-order ideal`,
    `${m.longestFirstGain}`,
    `<= 0.85 ${mark(m.longestFirstGain <= 0.85)}`,
  ]),
  ...startupRows(f.startup),
  ...postgresRows(f.postgres),
];
const width = Math.max(...rows.map((r) => r[0].length));
const valueWidth = Math.max(...rows.map((r) => r[1].length));
console.log(
  `mediabatch bench, ${host.date}, ${host.cpus} cpus (${host.cpuModel}), ${host.memoryGb} GB, node ${host.node}`,
);
for (const [name, value, target] of rows)
  console.log(`${name.padEnd(width)}  ${value.padEnd(valueWidth)}  ${target}`);
const seconds = Math.round((performance.now() - started) / 1000);
console.log(`(${seconds} s in all; written to bench/results.json)`);
await writeFile(RESULTS, `${JSON.stringify({ machine: host, seconds, figures }, null, 2)}\n`);
