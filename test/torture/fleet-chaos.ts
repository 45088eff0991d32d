// A fleet under chaos: worker processes (`mediabatch --state postgres://… run m.yaml --wait-for-review`)
// on one run of stills that a person reviews (`mediabatch review --approve/--reject`), clips chained
// after them and plain images, all against one sandbox, results into an S3 bucket. At seeded random
// moments (measured in jobs the sandbox has accepted) a worker is killed with SIGKILL and started again,
// PostgreSQL is stopped and started again on the same port, and one worker's connection to the database
// goes through a TCP proxy that drops its packets and then cuts it. Workers that exit are started again,
// as a Deployment does, until the run is finished. Then every guarantee is read from outside the
// workers: the sandbox's books, the bucket and the database (through psql).
// Shared by `npm run torture` (300 tasks, 10 kills, 10 s) and the slice in `npm test`.

import type { SandboxState } from '../../src/sandbox/server.js';
import type { Child } from '../helpers/child.js';
import { seeded } from '../helpers/child.js';
import { cli } from '../helpers/cli.js';
import { type FleetStage, jobsByPrompt, startFleetStage } from '../helpers/fleet.js';
import { spawnTcpProxy, type TcpProxyProcess } from '../helpers/tcp-proxy.js';
import { type Guarantee, guarantee } from './guarantees.js';

export interface FleetChaosOptions {
  /** Reviewed stills; each has a clip chained after it. */
  stills: number;
  images: number;
  workers: number;
  kills: number;
  /**
   * The share of the run's jobs within which the kills fall (default up to 0.8). A small run on a quiet
   * machine can end before a late kill finds a worker alive, and the chaos would not have happened.
   */
  killsBy?: number;
  /** How long PostgreSQL stays stopped (0: never stopped). */
  pgPauseMs: number;
  /** The budget as a share of the run's worst case: below 1 it runs out, and the workers stop on it. */
  budgetShare: number;
  /** How long the proxied worker's packets are dropped before its connection is cut (0: never). */
  blackholeMs: number;
  seed: number;
  concurrency: number;
  /** The sandbox's job duration factor (1 realistic). */
  speed: number;
  /** Give up after this long, reporting what was seen. */
  deadlineMs: number;
  log?: (line: string) => void;
}

export interface FleetChaosFigures {
  seed: number;
  tasks: number;
  kills: number;
  starts: number;
  exitCodes: Record<string, number>;
  pgPausedMs: number;
  blackholedMs: number;
  approved: number;
  rejected: number;
  states: Record<string, number>;
  maxPostsPerTask: number;
  inDoubt: number;
  results: number;
  ledgerNetMicro: number;
  sandboxNetMicro: number;
  /** Net charges of the sandbox's jobs whose task is in doubt (the ledger cannot know them). */
  inDoubtNetMicro: number;
  budgetMicro: number;
  /** The largest net spend the ledger ever held, in the order its rows were recorded. */
  peakLedgerMicro: number;
  /** Worker processes that sent at least one task, and those the others marked lost. */
  senders: number;
  lostWorkers: number;
  budgetStops: number;
  finished: boolean;
  seconds: number;
}

export interface FleetChaos {
  figures: FleetChaosFigures;
  guarantees: Guarantee[];
}

const RUN = 'fleet-chaos';
const STILL_PRICE = 0.2;
const CLIP_PRICE = 10.5;
const IMAGE_PRICE = 0.2;
const micro = (tokens: number) => Math.round(tokens * 1e6);

/** The manifest's tasks, and the task each prompt belongs to (the sandbox books jobs by request). */
function tasksOf(o: FleetChaosOptions): { tasks: unknown[]; owner: Map<string, string>; budget: number } {
  const owner = new Map<string, string>();
  for (let i = 1; i <= o.stills; i++) {
    owner.set(`still ${i}`, `still-${i}`);
    owner.set(`clip ${i}`, `clip-${i}`);
  }
  for (let i = 1; i <= o.images; i++) owner.set(`image ${i}`, `image-${i}`);
  const tasks = [
    {
      id: 'still-{{index}}',
      model: 'flat-image',
      repeat: o.stills,
      review: true,
      input: { prompt: 'still {{index}}' },
    },
    {
      id: 'clip-{{index}}',
      model: 'studio-2-6',
      repeat: o.stills,
      after: 'still-{{index}}',
      input: { prompt: 'clip {{index}}', image_url: '{{after.image}}', duration: 5, resolution: '720p' },
    },
    { id: 'image-{{index}}', model: 'flat-image', repeat: o.images, input: { prompt: 'image {{index}}' } },
  ];
  // A share of the worst case (every still approved): below 1, three workers race for its last tokens.
  const budget = o.budgetShare * (o.stills * (STILL_PRICE + CLIP_PRICE) + o.images * IMAGE_PRICE);
  return { tasks, owner, budget: Math.round(budget * 1e6) / 1e6 };
}

interface Crew {
  children: (Child | undefined)[];
  starts: number;
  kills: number;
  codes: Map<string, number>;
  /** Worker slots whose last run ended with 0 or 2 (the run is over as far as it knows). */
  settled: Set<number>;
  /** Runs that stopped because the budget could not cover the next task. */
  budgetStops: number;
  stopping: boolean;
  log: (line: string) => void;
  /** Endings no worker should have: a bug (70), a crash (1 with a stack), anything but 0, 2, 4 or a kill. */
  odd: string[];
}

/** Starts worker `i` and, whenever it exits with anything but 0 or 2, starts it again after a pause. */
function keep(stage: FleetStage, crew: Crew, i: number, state: string, manifest: string): void {
  if (crew.stopping) return;
  const child = stage.spawn(state, [
    'run',
    manifest,
    '--yes',
    '--run-id',
    RUN,
    '--wait-for-review',
    '--allow-partial',
  ]);
  crew.children[i] = child;
  crew.starts += 1;
  crew.settled.delete(i);
  void child.exited.then((code) => {
    const said = child.stderr().trim().split('\n');
    crew.log(
      `worker ${i} exited ${code}: ${(code === 1 || code === 70 ? said.slice(-12) : said.slice(-1)).join('\n')}`,
    );
    crew.codes.set(String(code), (crew.codes.get(String(code)) ?? 0) + 1);
    if (![0, 2, 4, 'SIGKILL'].includes(code)) crew.odd.push(`exit ${code}: ${said.slice(-3).join(' / ')}`);
    if (crew.children[i] !== child) return;
    crew.children[i] = undefined;
    // Stopped by the budget (exit 4, saying so): starting it again would stop again at once.
    const budgetStop =
      code === 4 && /the budget of .* cannot cover|did not fit under the budget of/.test(said.at(-1) ?? '');
    if (budgetStop) crew.budgetStops += 1;
    if (code === 0 || code === 2 || budgetStop) {
      crew.settled.add(i);
      return;
    }
    setTimeout(() => keep(stage, crew, i, state, manifest), 1000);
  });
}

/** Decides every awaiting still as a person would: most approved, some rejected. */
async function reviewRound(
  stage: FleetStage,
  state: string,
  random: () => number,
  tally: { approved: number; rejected: number },
): Promise<void> {
  const io = { env: stage.env(), cwd: stage.dir, now: () => new Date() };
  const listed = await cli(['--state', state, 'review', RUN, '--json'], io);
  if (listed.code !== 0) return;
  const awaiting = (JSON.parse(listed.stdout) as { awaiting: { taskId: string }[] }).awaiting.map(
    (a) => a.taskId,
  );
  const approve = awaiting.filter(() => random() < 0.8);
  const reject = awaiting.filter((id) => !approve.includes(id));
  if (approve.length > 0) {
    const r = await cli(['--state', state, 'review', RUN, '--approve', approve.join(',')], io);
    if (r.code === 0) tally.approved += approve.length;
  }
  if (reject.length > 0) {
    const r = await cli(['--state', state, 'review', RUN, '--reject', reject.join(',')], io);
    if (r.code === 0) tally.rejected += reject.length;
  }
}

/** The moments of chaos, as counts of jobs accepted by the sandbox, spread over the run. */
function schedule(o: FleetChaosOptions, random: () => number, tasks: number) {
  // Within a share of the run: the database's stop and the dropped packets in windows of their own, so
  // each is felt on its own and not hidden by the other.
  const at = (from: number, to: number) => Math.max(1, Math.floor((from + random() * (to - from)) * tasks));
  const kills = Array.from({ length: o.kills }, () => at(0.05, o.killsBy ?? 0.8)).sort((a, b) => a - b);
  return {
    kills,
    pgPause: at(0.2, 0.45),
    blackhole: at(0.55, 0.8),
    delays: () => Math.floor(random() * 300),
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// Long on purpose: the chaos is one timeline (start, kill, stop the database, drop packets, review, end),
// easier to follow in order than spread over callbacks.
async function drive(
  stage: FleetStage,
  o: FleetChaosOptions,
  state: string,
  proxy: TcpProxyProcess,
  manifest: string,
  tasks: number,
  budget: number,
): Promise<{
  crew: Crew;
  tally: { approved: number; rejected: number };
  pgPausedMs: number;
  blackholedMs: number;
  finished: boolean;
}> {
  const log = o.log ?? (() => undefined);
  const random = seeded(o.seed);
  const plan = schedule(o, random, tasks);
  const crew: Crew = {
    children: [],
    starts: 0,
    kills: 0,
    codes: new Map(),
    settled: new Set(),
    budgetStops: 0,
    odd: [],
    stopping: false,
    log,
  };
  // The last worker reaches the database through the proxy, with short TCP timeouts in its URL's query.
  const proxied = `${proxy.through(state)}&keepalives_idle=1&keepalives_interval=1&keepalives_count=2&tcp_user_timeout=2000`;
  for (let i = 0; i < o.workers; i++) keep(stage, crew, i, i === o.workers - 1 ? proxied : state, manifest);
  const tally = { approved: 0, rejected: 0 };
  let pgPausedMs = 0;
  let blackholedMs = 0;
  let pgDone = o.pgPauseMs <= 0;
  let holeDone = o.blackholeMs <= 0;
  const deadline = Date.now() + o.deadlineMs;
  const chaos: Promise<void>[] = [];
  while (Date.now() < deadline) {
    const jobs = (await stage.sandbox().catch(() => ({ jobs: [] as SandboxState['jobs'] }))).jobs;
    // How far the run is, in jobs or in money, whichever is further: a budget below the worst case ends
    // the run with tasks left (and faster workers end it sooner), so a moment counted in jobs alone may
    // never come. Money spent is counted as the share of the tasks it would be.
    const spent = jobs.reduce((n, j) => n + j.cost - j.refunded, 0);
    const accepted = Math.max(jobs.length, Math.floor((spent / budget) * tasks));
    const next = plan.kills[0];
    // A kill whose moment came while no worker was alive (all restarting after the database's stop or
    // an earlier kill) waits for the next one up, or the chaos would be skipped, not tried.
    const alive = crew.children.map((c, i) => (c ? i : -1)).filter((i) => i >= 0);
    if (next !== undefined && accepted >= next && alive.length > 0) {
      const victim = alive[Math.floor(random() * alive.length)];
      await sleep(plan.delays());
      const child = victim === undefined ? undefined : crew.children[victim];
      if (child && child.proc.exitCode === null && child.proc.signalCode === null) {
        plan.kills.shift();
        child.proc.kill('SIGKILL');
        crew.kills += 1;
        log(`kill -9 worker ${victim} at ${accepted} jobs`);
      }
    }
    if (!pgDone && accepted >= plan.pgPause) {
      pgDone = true;
      log(`PostgreSQL stopped for ${o.pgPauseMs} ms at ${accepted} jobs`);
      const t = Date.now();
      stage.pg.pause();
      chaos.push(
        sleep(o.pgPauseMs).then(() => {
          stage.pg.resume();
          pgPausedMs = Date.now() - t;
        }),
      );
    }
    // The proxied worker must be up and connected, or there is nothing for the drop to hit.
    const proxiedUp = crew.children[o.workers - 1] !== undefined && (await proxy.counts()).open > 0;
    if (!holeDone && accepted >= plan.blackhole && proxiedUp) {
      holeDone = true;
      log(`worker ${o.workers - 1}'s database packets dropped for ${o.blackholeMs} ms at ${accepted} jobs`);
      await proxy.hole(o.blackholeMs);
      // What the worker's kernel does once tcp_user_timeout passes on a real network: the proxy's own
      // kernel acknowledged every byte, so only the cut after the drop ends the connection here.
      blackholedMs = o.blackholeMs;
    }
    await reviewRound(stage, state, random, tally).catch(() => undefined);
    const chaosOver = plan.kills.length === 0 && pgDone && holeDone;
    if (crew.settled.size === o.workers && (chaosOver || plan.kills.length > 0)) break;
    await sleep(300);
  }
  await Promise.all(chaos);
  crew.stopping = true;
  const finished = crew.settled.size === o.workers;
  return { crew, tally, pgPausedMs, blackholedMs, finished };
}

export async function fleetChaos(o: FleetChaosOptions): Promise<FleetChaos> {
  const started = Date.now();
  const stage = await startFleetStage([
    '--speed',
    String(o.speed),
    '--latency',
    '5',
    '--seed',
    String(o.seed),
  ]);
  // In a process of its own: this one blocks on its synchronous database calls (the reviews).
  const proxy = await spawnTcpProxy({ port: stage.pg.port });
  try {
    const { tasks, owner, budget } = tasksOf(o);
    const manifest = await stage.manifest('fleet.yaml', {
      name: RUN,
      concurrency: o.concurrency,
      budget,
      tasks,
    });
    const state = stage.database();
    o.log?.(`fleet chaos: ${owner.size} tasks, ${o.workers} workers, seed ${o.seed}`);
    const run = await drive(stage, o, state, proxy, manifest, owner.size, budget);
    return await judge(stage, o, state, { ...run, owner, budget, started });
  } finally {
    await proxy.close();
    await stage.close();
  }
}

// Long on purpose: each guarantee is read from its own source (the sandbox, the bucket, the database)
// and checked in one place, so the report lists them in the order the issue names them.
async function judge(
  stage: FleetStage,
  o: FleetChaosOptions,
  state: string,
  run: Awaited<ReturnType<typeof drive>> & { owner: Map<string, string>; budget: number; started: number },
): Promise<FleetChaos> {
  const books = await stage.sandbox();
  const byPrompt = jobsByPrompt(books);
  const rows = stage.sql(state, `SELECT task_id, state FROM tasks WHERE run_id = '${RUN}'`);
  const taskState = new Map(rows.map(([id, s]) => [id as string, s as string]));
  const states: Record<string, number> = {};
  for (const s of taskState.values()) states[s] = (states[s] ?? 0) + 1;
  const twice = [...byPrompt]
    .filter(([, jobs]) => jobs.length > 1)
    .map(([p, jobs]) => `${p} ×${jobs.length}`);
  const strangers = [...byPrompt.keys()].filter((p) => !run.owner.has(p));

  const ledger = stage.sql(
    state,
    `SELECT img_uuid, kind, tokens FROM ledger WHERE run_id = '${RUN}' ORDER BY id`,
  );
  const booked = new Set(ledger.filter((r) => r[1] === 'charge').map((r) => r[0]));
  let net = 0;
  let peak = 0;
  for (const [, kind, tokens] of ledger) {
    net += (kind === 'charge' ? 1 : -1) * micro(Number(tokens));
    peak = Math.max(peak, net);
  }
  let sandboxNetMicro = 0;
  let inDoubtNetMicro = 0;
  const lost: string[] = [];
  for (const [prompt, jobs] of byPrompt) {
    const task = run.owner.get(prompt) ?? '?';
    for (const job of jobs) {
      const jobNet = micro(job.cost) - micro(job.refunded);
      sandboxNetMicro += jobNet;
      if (booked.has(job.img_uuid)) continue;
      if (taskState.get(task) === 'in_doubt') inDoubtNetMicro += jobNet;
      else lost.push(`${task} (${job.img_uuid}, ${taskState.get(task)})`);
    }
  }

  const objects = stage.objects();
  const perTask = new Map<string, number>();
  for (const key of objects) {
    const task = key.split('/')[2] ?? '?';
    perTask.set(task, (perTask.get(task) ?? 0) + 1);
  }
  const done = [...taskState].filter(([, s]) => s === 'done').map(([id]) => id);
  const notOnce = done.filter((id) => perTask.get(id) !== 1).map((id) => `${id}: ${perTask.get(id) ?? 0}`);
  const strayObjects = objects
    .filter((key) => taskState.get(key.split('/')[2] ?? '?') !== 'done')
    .map((key) => `${key} (${taskState.get(key.split('/')[2] ?? '?')})`);
  // Tasks the budget could not cover stay pending; anything else unfinished is a run that did not end.
  const unfinished = [...taskState]
    .filter(([, s]) => !TERMINAL.has(s) && !(s === 'pending' && run.crew.budgetStops > 0))
    .map(([id, s]) => `${id} ${s}`);

  const senders = Number(
    stage.sql(state, `SELECT count(DISTINCT worker_id) FROM attempts WHERE run_id = '${RUN}'`)[0]?.[0] ?? 0,
  );
  const lostWorkers = Number(
    stage.sql(
      state,
      `SELECT count(*) FROM workers WHERE run_id = '${RUN}' AND lost_at IS NOT NULL`,
    )[0]?.[0] ?? 0,
  );
  const inDoubt = states['in_doubt'] ?? 0;
  const status = await cli(['--state', state, 'status', RUN], {
    env: stage.env(),
    cwd: stage.dir,
    now: () => new Date(),
  });
  const budgetMicro = micro(run.budget);
  const figures: FleetChaosFigures = {
    seed: o.seed,
    tasks: run.owner.size,
    kills: run.crew.kills,
    starts: run.crew.starts,
    exitCodes: Object.fromEntries(run.crew.codes),
    pgPausedMs: run.pgPausedMs,
    blackholedMs: run.blackholedMs,
    approved: run.tally.approved,
    rejected: run.tally.rejected,
    states,
    maxPostsPerTask: Math.max(0, ...[...byPrompt.values()].map((j) => j.length)),
    inDoubt,
    results: objects.length,
    ledgerNetMicro: net,
    sandboxNetMicro,
    inDoubtNetMicro,
    budgetMicro,
    peakLedgerMicro: peak,
    senders,
    lostWorkers,
    budgetStops: run.crew.budgetStops,
    finished: run.finished,
    seconds: Math.round((Date.now() - run.started) / 1000),
  };
  const guarantees = [
    guarantee(
      'the run finishes when the workers run again',
      run.finished && unfinished.length === 0,
      unfinished,
    ),
    guarantee(
      'every task submitted once at most (the sandbox counts jobs per request)',
      twice.length === 0,
      twice,
    ),
    guarantee('no job the manifest did not ask for', strangers.length === 0, strangers),
    guarantee(
      'nothing paid lost: every charged job is in the ledger or its task is in doubt',
      lost.length === 0,
      lost,
    ),
    guarantee(
      'the ledger plus the charges of tasks in doubt equal the sandbox books',
      net + inDoubtNetMicro === sandboxNetMicro,
      `ledger ${net} + in doubt ${inDoubtNetMicro} vs sandbox ${sandboxNetMicro} micro-tokens`,
    ),
    guarantee('every done task has exactly one result in the bucket', notOnce.length === 0, notOnce),
    guarantee('no result in the bucket for a task that is not done', strayObjects.length === 0, strayObjects),
    guarantee(
      'the budget never exceeded at record time',
      peak <= budgetMicro,
      `peak ${peak} of ${budgetMicro}`,
    ),
    guarantee(
      'tasks in doubt are reported by status',
      inDoubt === 0 || /in doubt/.test(status.stdout),
      `${inDoubt} in doubt; status said: ${status.stdout.split('\n').slice(0, 6).join(' / ')}`,
    ),
    guarantee('the work was shared: more than one worker process sent tasks', senders > 1, `${senders} sent`),
    // Rejected stills block their clips and real prices come under the worst cases: a seed whose review
    // rejects many can end every task under the budget, with no stop to check.
    guarantee(
      'a budget below the worst case ran out and stopped the workers, or every task ended under it',
      o.budgetShare >= 1 ||
        run.crew.budgetStops > 0 ||
        ((states['pending'] ?? 0) === 0 && net <= budgetMicro),
      `${run.crew.budgetStops} stops on the budget; ${states['pending'] ?? 0} pending; ledger ${net} of ${budgetMicro}`,
    ),
    guarantee('the chaos happened', run.crew.kills === o.kills, `${run.crew.kills} of ${o.kills} kills`),
  ];
  return { figures, guarantees };
}

/** A task in one of these is finished as far as a run can take it without a person. */
const TERMINAL = new Set(['done', 'failed', 'rejected', 'skipped', 'in_doubt', 'lost', 'blocked']);
