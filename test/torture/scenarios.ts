// The faults on the user's own machine, each run end to end in-process (the CLI's clock can be
// injected only there) against a real sandbox on loopback, real folders and a real state file: a dated
// run interrupted and resumed after the date changed, a full output disk freed before the resume, a
// budget reached with tasks in flight, links planted in the output folder, a 2-character API key, and
// the sandbox with every quirk on plus faults. After each, every money guarantee is checked from the
// sandbox's own /_sandbox/state.

import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import type { SandboxOptions } from '../../src/sandbox/options.js';
import type { SandboxState } from '../../src/sandbox/server.js';
import type { CliRun } from '../helpers/cli.js';
import { images, makeRunEnv, type RunEnv, type TaskDecl } from '../helpers/run-env.js';
import { cannotMount, mountTmpfs } from '../util/mount.js';
import { type Guarantee, guarantee } from './guarantees.js';

export interface ScenarioOptions {
  /** Tasks per scenario (the budget and key scenarios use their own few). */
  tasks: number;
  log?: (line: string) => void;
}

export interface ScenarioCase {
  name: string;
  outcome: string;
  ms: number;
}

/** Exact to the micro-token, as the runner keeps money. */
const same = (a: number, b: number) => Math.abs(a - b) < 1e-6;
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const speech = (n: number, prefix = 'voice'): TaskDecl => ({
  id: `${prefix}-${n}`,
  model: 'speech-v3',
  input: { text: `${prefix} line number ${n}.` },
});
/** The text that makes a task's request unique, so a sandbox job names its task. */
const keyOf = (body: unknown): string => {
  const b = body as { prompt?: unknown; text?: unknown } | null;
  return String(b?.prompt ?? b?.text ?? '');
};

async function sandboxState(env: RunEnv): Promise<SandboxState> {
  const res = await request(`${env.sandbox.baseUrl}/_sandbox/state`);
  return (await res.body.json()) as SandboxState;
}

interface MoneyOptions {
  balanceBefore: number;
  /** Every task must end done (the scenario ends with the disk freed, the links removed…). */
  allDone?: boolean;
}

/**
 * The money guarantees, from the sandbox's state and the state file: at most one unrefunded charge per
 * task; the ledger (plus the charges never answered, all of tasks in doubt) equals the balance change;
 * every done task's files on disk with their recorded size and hash; no `.part` file left behind.
 */
export async function moneyGuarantees(label: string, env: RunEnv, o: MoneyOptions): Promise<Guarantee[]> {
  const state = await sandboxState(env);
  const tasks = env.query<{ run_id: string; task_id: string; state: string; body: string }>(
    'SELECT run_id, task_id, state, body FROM tasks',
  );
  const ledger = env.query<{ img_uuid: string; kind: string; tokens: number }>(
    'SELECT img_uuid, kind, tokens FROM ledger',
  );
  const files = env.query<{ run_id: string; task_id: string; path: string; bytes: number; sha256: string }>(
    'SELECT run_id, task_id, path, bytes, sha256 FROM files',
  );
  const taskByKey = new Map(tasks.map((t) => [keyOf(JSON.parse(t.body)), t]));
  const unrefunded = new Map<string, number>();
  const orphans: string[] = [];
  for (const job of state.jobs) {
    const task = taskByKey.get(keyOf(job.request));
    if (task === undefined) {
      orphans.push(job.img_uuid);
      continue;
    }
    const id = `${task.run_id}/${task.task_id}`;
    if (job.cost - job.refunded > 1e-9) unrefunded.set(id, (unrefunded.get(id) ?? 0) + 1);
  }
  const twice = [...unrefunded].filter(([, n]) => n > 1).map(([id, n]) => `${id}: ${n} charges`);

  const inLedger = new Set(ledger.filter((e) => e.kind === 'charge').map((e) => e.img_uuid));
  const unseen = state.jobs.filter((j) => !inLedger.has(j.img_uuid));
  const unseenNotInDoubt = unseen
    .filter((j) => taskByKey.get(keyOf(j.request))?.state !== 'in_doubt')
    .map((j) => `${j.img_uuid} (${taskByKey.get(keyOf(j.request))?.state ?? 'no task'})`);
  const ledgerNet = sum(ledger.map((e) => (e.kind === 'charge' ? e.tokens : -e.tokens)));
  const unseenNet = sum(unseen.map((j) => j.cost - j.refunded));
  const change = o.balanceBefore - state.balance;

  const fileProblems: string[] = [];
  for (const t of tasks.filter((r) => r.state === 'done')) {
    const own = files.filter((f) => f.run_id === t.run_id && f.task_id === t.task_id);
    if (own.length === 0) fileProblems.push(`${t.task_id}: done without files`);
    for (const f of own) {
      const bytes = existsSync(f.path) ? await readFile(f.path) : undefined;
      if (bytes === undefined) fileProblems.push(`${f.path} missing`);
      else if (bytes.length !== f.bytes || createHash('sha256').update(bytes).digest('hex') !== f.sha256)
        fileProblems.push(`${f.path} differs from its recorded size or sha256`);
    }
  }
  const parts = (await env.files()).filter((f) => f.endsWith('.part') || /\.tmp-/.test(f));
  const notDone = tasks.filter((t) => t.state !== 'done').map((t) => `${t.task_id}: ${t.state}`);
  const list = [
    guarantee(`${label}: at most one unrefunded charge per task`, twice.length === 0, twice),
    guarantee(`${label}: every sandbox job belongs to a task`, orphans.length === 0, orphans),
    guarantee(
      `${label}: every charge missing from the ledger belongs to a task in doubt`,
      unseenNotInDoubt.length === 0,
      unseenNotInDoubt,
    ),
    guarantee(
      `${label}: ledger net + charges never answered = the sandbox's balance change`,
      same(ledgerNet + unseenNet, change),
      `${ledgerNet} + ${unseenNet} vs ${change}`,
    ),
    guarantee(`${label}: every done task's files on disk, whole`, fileProblems.length === 0, fileProblems),
    guarantee(`${label}: no temporary files left`, parts.length === 0, parts),
  ];
  if (o.allDone) list.push(guarantee(`${label}: every task done at the end`, notDone.length === 0, notDone));
  return list;
}

/** The CLI's one line on a non-zero exit, and whether it printed a stack instead. */
function lastLine(r: CliRun): string {
  return r.stderr.trim().split('\n').pop() ?? '';
}
const hasStack = (r: CliRun) => /\n\s+at .+:\d+:\d+\)?/.test(r.stderr);

/** Rejects after `ms`: a run that does not end by itself is a broken guarantee, not a hung torture. */
function within<T>(ms: number, p: Promise<T>): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

type Scenario = (
  o: ScenarioOptions,
) => Promise<{ outcome: string; guarantees: Guarantee[]; skipped?: boolean }>;

async function withEnv<T>(opts: SandboxOptions, body: (env: RunEnv) => Promise<T>): Promise<T> {
  const env = await makeRunEnv(opts);
  try {
    return await body(env);
  } finally {
    await env.close();
  }
}

async function datedManifest(env: RunEnv, tasks: TaskDecl[], concurrency: number): Promise<string> {
  const file = await env.manifest({ tasks, concurrency });
  const text = await readFile(join(env.dir, file), 'utf8');
  await writeFile(join(env.dir, file), `run: "{{name}}-{{date}}"\n${text}`);
  return file;
}

/** (a) Interrupted at 23:50 with paid results not yet fetched; the same command at 00:10 the next day. */
const datedResume: Scenario = (o) =>
  withEnv({}, async (env) => {
    const before = env.state().balance;
    const file = await datedManifest(env, images(o.tasks, 'dated'), 2);
    env.sandbox.configure({ refuseDownloads: true });
    // Ctrl-C once about half the tasks are paid: the rest stay pending, the paid ones unfetched.
    const watch = setInterval(() => {
      if (env.state().jobs.length >= Math.ceil(o.tasks / 2)) {
        clearInterval(watch);
        env.signals.emit('SIGINT');
      }
    }, 5);
    const first = await env.run(['run', file, '--yes'], { now: () => new Date('2026-11-23T23:50:00Z') });
    clearInterval(watch);
    const firstJobs = env.state().jobs.map((j) => j.img_uuid);
    env.sandbox.configure({ refuseDownloads: false });
    const second = await within(
      60_000,
      env.run(['run', file, '--yes'], { now: () => new Date('2026-11-24T00:10:00Z') }),
    );
    const runs = env.query<{ id: string }>('SELECT id FROM runs').map((r) => r.id);
    const fetched = env.query<{ img_uuid: string }>(
      "SELECT img_uuid FROM tasks WHERE state = 'done' AND img_uuid IS NOT NULL",
    );
    const notFetched = firstJobs.filter((id) => !fetched.some((r) => r.img_uuid === id));
    const code = second === 'timeout' ? 'timeout' : second.code;
    return {
      outcome: `first exit ${first.code} with ${firstJobs.length} paid, resumed next day: exit ${code}, runs ${runs.join(', ')}`,
      guarantees: [
        guarantee(
          'dated run: interrupted with paid tasks unfetched (exit 4)',
          first.code === 4 && firstJobs.length > 0 && firstJobs.length < o.tasks,
          `exit ${first.code}, ${firstJobs.length} paid`,
        ),
        guarantee('dated run: the next day it resumes and ends (exit 0)', code === 0, `exit ${code}`),
        guarantee('dated run: only one run in the state file', runs.length === 1, runs),
        guarantee("dated run: the first run's paid jobs are downloaded", notFetched.length === 0, notFetched),
        guarantee(
          'dated run: one job per task',
          env.state().jobs.length === o.tasks,
          `${env.state().jobs.length} jobs`,
        ),
        ...(await moneyGuarantees('dated run', env, { balanceBefore: before, allDone: true })),
      ],
    };
  });

/** (b) A tmpfs output that fills up mid-run, then grows before the same command runs again. */
const fullDisk: Scenario = async (o) => {
  if (cannotMount !== undefined) return { outcome: `skipped: ${cannotMount}`, guarantees: [], skipped: true };
  return withEnv({}, async (env) => {
    const before = env.state().balance;
    const out = join(env.dir, 'out');
    await mkdir(out);
    const unmount = mountTmpfs(out, 48);
    try {
      const file = await env.manifest({ tasks: images(o.tasks, 'disk'), concurrency: 2 });
      const first = await within(60_000, env.run(['run', file, '--yes', '--allow-partial']));
      const paidAtFull = env.state().jobs.length;
      const firstCode = first === 'timeout' ? 'timeout' : first.code;
      const firstLine = first === 'timeout' ? '' : lastLine(first);
      // Room for what the preflight expects of every task (a few MB per image); tmpfs uses only what is written.
      execFileSync('mount', ['-o', 'remount,size=262144k', out]);
      const second = await within(60_000, env.run(['run', file, '--yes']));
      const code = second === 'timeout' ? 'timeout' : second.code;
      return {
        outcome: `full at ${paidAtFull}/${o.tasks} paid: exit ${firstCode}; freed: exit ${code}`,
        guarantees: [
          guarantee(
            'full disk: the run stops (exit 4) saying what to free',
            firstCode === 4 && /no space left on device .*free space, then run again/.test(firstLine),
            `exit ${firstCode}: ${firstLine}`,
          ),
          guarantee(
            'full disk: submitting stopped before every task was paid',
            paidAtFull < o.tasks,
            `${paidAtFull} of ${o.tasks} paid`,
          ),
          guarantee('full disk: once freed the same command ends (exit 0)', code === 0, `exit ${code}`),
          guarantee(
            'full disk: one job per task',
            env.state().jobs.length === o.tasks,
            `${env.state().jobs.length} jobs`,
          ),
          ...(await moneyGuarantees('full disk', env, { balanceBefore: before, allDone: true })),
        ],
      };
    } finally {
      unmount();
    }
  });
};

/** (c) Prices of 0.2 and 2 tokens, whose float sums drift, and a budget reached with tasks in flight. */
const budgetInFlight: Scenario = (o) =>
  withEnv({}, async (env) => {
    const before = env.state().balance;
    const n = Math.max(3, Math.round(o.tasks / 3));
    const tasks: TaskDecl[] = [];
    for (let i = 1; i <= n; i++) tasks.push(...images(1, `cheap-${i}`), speech(i));
    // Room for every image and all but the last line or so: the run meets its budget mid-flight.
    const budget = Math.round((n * 0.2 + (n - 1) * 2 - 0.1) * 10) / 10;
    const file = await env.manifest({ tasks, concurrency: 4, budget });
    const result = await within(30_000, env.run(['run', file, '--yes', '--allow-partial']));
    const code = result === 'timeout' ? 'timeout' : result.code;
    const line = result === 'timeout' ? '' : lastLine(result);
    const spent = sum(env.state().jobs.map((j) => j.cost - j.refunded));
    return {
      outcome: `budget ${budget}: exit ${code}, spent ${Math.round(spent * 1e6) / 1e6}`,
      guarantees: [
        guarantee('budget: the run ends by itself (exit 4)', code === 4, `exit ${code}: ${line}`),
        guarantee('budget: the reason names the budget', /budget of [\d.]+ tokens/.test(line), line),
        guarantee('budget: never spent over it', spent <= budget + 1e-6, `${spent} > ${budget}`),
        ...(await moneyGuarantees('budget', env, { balanceBefore: before })),
      ],
    };
  });

/** (d) Links in the output folder: the run folder, a task folder, a result's file name, report.json. */
const plantedLinks: Scenario = (o) =>
  withEnv({}, async (env) => {
    const before = env.state().balance;
    const victim = await mkdtemp(join(tmpdir(), 'mb-torture-victim-'));
    try {
      await writeFile(join(victim, 'precious.txt'), 'keep me');
      const victimFiles = async () => (await readdir(victim)).sort().join(',');
      const guarantees: Guarantee[] = [];
      // The run folder itself is a link: nothing may be written through it.
      const linkedRun = await env.manifest({ name: 'linked', tasks: images(2, 'whole') }, 'linked.yaml');
      await mkdir(join(env.dir, 'out'), { recursive: true });
      await symlink(victim, join(env.dir, 'out/linked'));
      const r1 = await within(30_000, env.run(['run', linkedRun, '--yes']));
      const c1 = r1 === 'timeout' ? 'timeout' : r1.code;
      guarantees.push(
        guarantee(
          'links: a linked run folder is refused with one line, no stack, not exit 70',
          r1 !== 'timeout' && c1 !== 0 && c1 !== 70 && !hasStack(r1),
          r1 === 'timeout' ? 'timeout' : `exit ${c1}: ${lastLine(r1)}`,
        ),
      );

      // In a real run folder: a linked task folder, a linked result file and a linked report.json.
      const n = Math.max(3, o.tasks);
      const file = await env.manifest({ tasks: images(n, 'planted') });
      const runDir = join(env.dir, 'out/batch');
      await mkdir(join(runDir, 'planted-2'), { recursive: true });
      await symlink(victim, join(runDir, 'planted-1'));
      await symlink(join(victim, 'precious.txt'), join(runDir, 'planted-2/1.png'));
      await symlink(join(victim, 'precious.txt'), join(runDir, 'report.json'));
      const r2 = await within(30_000, env.run(['run', file, '--yes']));
      const c2 = r2 === 'timeout' ? 'timeout' : r2.code;
      const line = r2 === 'timeout' ? '' : lastLine(r2);
      guarantees.push(
        guarantee(
          'links: tasks behind a link are left unfetched (exit 4), the link named',
          c2 === 4 && /symbolic link/.test(line),
          `exit ${c2}: ${line}`,
        ),
      );
      const untouched = (await victimFiles()) === 'precious.txt';
      const precious = await readFile(join(victim, 'precious.txt'), 'utf8');
      guarantees.push(
        guarantee(
          'links: nothing written outside the output folder',
          untouched && precious === 'keep me',
          `victim holds ${await victimFiles()}; precious.txt is ${JSON.stringify(precious.slice(0, 40))}`,
        ),
      );
      // A link the run replaced by its own file (a rename over the link) is gone already: keep the file.
      for (const link of ['planted-1', 'planted-2/1.png', 'report.json']) {
        if ((await lstat(join(runDir, link)).catch(() => undefined))?.isSymbolicLink())
          await rm(join(runDir, link));
      }
      const r3 = await within(30_000, env.run(['run', file, '--yes']));
      const c3 = r3 === 'timeout' ? 'timeout' : r3.code;
      guarantees.push(
        guarantee('links: removed, the same command fetches the rest (exit 0)', c3 === 0, `exit ${c3}`),
      );
      guarantees.push(...(await moneyGuarantees('links', env, { balanceBefore: before })));
      return { outcome: `linked run folder: exit ${c1}; planted links: exit ${c2}, then ${c3}`, guarantees };
    } finally {
      await rm(victim, { recursive: true, force: true });
    }
  });

/** (e) A 2-character API key: one clear line, never exit 70, the key never printed, nothing paid. */
const shortKey: Scenario = () =>
  withEnv({}, async (env) => {
    const key = 'Zq';
    const file = await env.manifest({ tasks: images(2, 'short') });
    const guarantees: Guarantee[] = [];
    const outcomes: string[] = [];
    for (const args of [['run', file, '--yes'], ['balance']]) {
      const r = await env.run(args, { env: { MEDIABATCH_API_KEY: key } });
      const lines = r.stderr.trim().split('\n');
      const what = args[0] ?? '';
      outcomes.push(`${what}: exit ${r.code}`);
      guarantees.push(
        guarantee(
          `short key (${what}): one line, exit 1 (not 70), no stack`,
          r.code === 1 && lines.length === 1 && /too short \(2 characters\)/.test(r.stderr) && !hasStack(r),
          `exit ${r.code}: ${r.stderr.slice(0, 300)}`,
        ),
        guarantee(
          `short key (${what}): the key is never printed`,
          !`${r.stdout}\n${r.stderr}`.includes(key),
          `${r.stdout}\n${r.stderr}`.slice(0, 300),
        ),
      );
    }
    guarantees.push(
      guarantee(
        'short key: nothing submitted',
        env.state().jobs.length === 0,
        `${env.state().jobs.length} jobs`,
      ),
    );
    return { outcome: outcomes.join('; '), guarantees };
  });

/** (f) Every quirk of the real service at once, plus failed jobs, 500s and charges whose answer is lost. */
const quirksAndFaults: Scenario = (o) =>
  withEnv(
    {
      quirks: ['all'],
      seed: 13,
      balance: 10_000,
      failRate: 0.15,
      errorRate: 0.05,
      chargeThenErrorRate: 0.05,
      latencyMs: 5,
    },
    async (env) => {
      const before = env.state().balance;
      // 429s with `Retry-After: 1` slow every request: a few tasks are enough to meet every quirk.
      const n = Math.max(4, Math.min(o.tasks, 16));
      const half = Math.ceil(n / 2);
      const tasks = [...images(half, 'quirk'), ...Array.from({ length: n - half }, (_, i) => speech(i + 1))];
      const file = await env.manifest({ tasks, concurrency: 6 });
      const codes: (number | string)[] = [];
      // Exit 4 leaves tasks to continue (the API kept failing): the same command, up to a few times.
      for (let round = 0; round < 6; round++) {
        const running = env.run(['run', file, '--yes']);
        const r = await within(120_000, running);
        const code = r === 'timeout' ? 'timeout' : r.code;
        codes.push(code);
        if (r === 'timeout') {
          // Stop the run that did not end, so that it does not outlive the torture.
          env.signals.emit('SIGINT');
          env.signals.emit('SIGINT');
          await running;
          break;
        }
        if (code !== 4) break;
      }
      const end = codes.at(-1);
      const state = await sandboxState(env);
      return {
        outcome: `exit codes ${codes.join(' ')}; ${state.jobs.length} jobs, ${state.quirks.throttled} throttled, ${state.quirks.busy} busy`,
        guarantees: [
          guarantee('quirks + faults: the run ends (exit 0 or 2)', end === 0 || end === 2, codes.map(String)),
          ...(await moneyGuarantees('quirks + faults', env, { balanceBefore: before })),
        ],
      };
    },
  );

export async function scenarioTorture(o: ScenarioOptions) {
  const log = o.log ?? (() => undefined);
  const all: [string, Scenario][] = [
    ['dated run resumed after the date changed', datedResume],
    ['full output disk freed before the resume', fullDisk],
    ['budget reached with tasks in flight', budgetInFlight],
    ['planted links in the output folder', plantedLinks],
    ['2-character API key', shortKey],
    ['every sandbox quirk plus faults', quirksAndFaults],
  ];
  const cases: ScenarioCase[] = [];
  const guarantees: Guarantee[] = [];
  const skipped: string[] = [];
  for (const [name, scenario] of all) {
    const start = performance.now();
    const r = await scenario(o);
    const ms = Math.round(performance.now() - start);
    cases.push({ name, outcome: r.outcome, ms });
    if (r.skipped) skipped.push(name);
    guarantees.push(...r.guarantees);
    log(`${name}: ${r.outcome} (${ms} ms)`);
  }
  return { cases, guarantees, skipped };
}
