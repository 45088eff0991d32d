// A fleet started all at once on a new run whose plan is stored while it works (PostgreSQL), and the
// worker storing it killed with SIGKILL at seeded moments, again and again; once, every worker at once.
// Each killed worker is replaced by a new one, as a Deployment does, and workers that end while the run is
// unfinished are started again. Then what must hold is read from outside the workers: every task of the
// plan stored and ended, none sent twice (the sandbox's POSTs), the ledger the sandbox's books, the plan
// marked whole. `npm run torture` runs it (`--small`: fewer tasks and kills); in `npm test`, one kill of
// the storer is test/postgres/join-start.test.ts's.

import type { Child } from '../helpers/child.js';
import { seeded } from '../helpers/child.js';
import { type FleetStage, jobsByPrompt, sandboxNet, startFleetStage } from '../helpers/fleet.js';
import { type Guarantee, guarantee } from './guarantees.js';

export interface StoringChaosOptions {
  tasks: number;
  workers: number;
  /** Kills of the worker holding the storing lease; the last one kills every worker. */
  kills: number;
  /** Rows stored before the run starts, and per transaction after (MEDIABATCH_STORE_FIRST). */
  storeFirst: number;
  seed: number;
  concurrency: number;
  speed: number;
  deadlineMs: number;
  log?: (line: string) => void;
}

export interface StoringChaosFigures {
  seed: number;
  tasks: number;
  kills: number;
  /** Tasks stored when each kill came (of `tasks`). */
  storedAtKills: number[];
  starts: number;
  exitCodes: Record<string, number>;
  states: Record<string, number>;
  stored: number;
  maxPostsPerTask: number;
  ledgerNetMicro: number;
  inDoubtNetMicro: number;
  sandboxNetMicro: number;
  finished: boolean;
  seconds: number;
}

const RUN = 'storing-chaos';

interface Crew {
  stage: FleetStage;
  state: string;
  file: string;
  storeFirst: number;
  children: Child[];
  starts: number;
  codes: Map<string, number>;
}

function start(crew: Crew): Child {
  const child = crew.stage.spawn(crew.state, ['run', crew.file, '--yes'], {
    MEDIABATCH_STORE_FIRST: String(crew.storeFirst),
  });
  crew.children.push(child);
  crew.starts++;
  void child.exited.then((code) => {
    const key = String(code);
    crew.codes.set(key, (crew.codes.get(key) ?? 0) + 1);
  });
  return child;
}

const alive = (crew: Crew) =>
  crew.children.filter((c) => c.proc.exitCode === null && c.proc.signalCode === null);

/** The run's plan as the database has it: tasks stored, whether it is still being stored, its storer. */
function planNow(crew: Crew): { stored: number; storing: boolean; storer: number | undefined } {
  return crew.stage.read(crew.state, (store) => {
    const run = store.runs.getRun(RUN);
    const counts: Record<string, number> = run ? store.tasks.countTasksByState(RUN) : {};
    const holder = store.leases.getLease(`run:${RUN}:storing`)?.holder;
    return {
      stored: Object.values(counts).reduce((n, c) => n + c, 0),
      storing: run === undefined || run.planStoring,
      storer: holder === undefined ? undefined : Number(holder.split('@')[0]),
    };
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Long on purpose: the chaos is one story (start, kill the storer, replace, finish, read the books). */
export async function storingChaos(o: StoringChaosOptions): Promise<{
  figures: StoringChaosFigures;
  guarantees: Guarantee[];
}> {
  const started = performance.now();
  const random = seeded(o.seed);
  const stage = await startFleetStage(['--speed', String(o.speed)]);
  try {
    const state = stage.database();
    const file = await stage.manifest('m.yaml', {
      name: RUN,
      concurrency: o.concurrency,
      tasks: [
        { id: 'img-{{index}}', model: 'flat-image', repeat: o.tasks, input: { prompt: 'image {{index}}' } },
      ],
    });
    const crew: Crew = {
      stage,
      state,
      file,
      storeFirst: o.storeFirst,
      children: [],
      starts: 0,
      codes: new Map(),
    };
    for (let i = 0; i < o.workers; i++) start(crew);
    const storedAtKills: number[] = [];
    const deadline = Date.now() + o.deadlineMs;
    while (storedAtKills.length < o.kills && Date.now() < deadline) {
      await sleep(150 + random() * 900);
      const plan = planNow(crew);
      // Stored whole: no storer to kill any more (the guarantee below says the chaos fell short).
      if ((!plan.storing && plan.stored > 0) || plan.stored >= o.tasks) break;
      const last = storedAtKills.length === o.kills - 1;
      const victims = last ? alive(crew) : alive(crew).filter((c) => c.proc.pid === plan.storer);
      if (victims.length === 0) continue;
      for (const v of victims) v.proc.kill('SIGKILL');
      await Promise.all(victims.map((v) => v.exited));
      storedAtKills.push(plan.stored);
      o.log?.(`killed ${victims.length} worker(s) (${last ? 'all' : 'the storer'}) at ${plan.stored} stored`);
      for (const _ of victims) start(crew);
    }
    // Workers that end while the run is unfinished (exit 4: nothing left for them now) start again.
    let finished = false;
    while (Date.now() < deadline) {
      await sleep(300);
      finished = stage.read(state, (store) => store.runs.getRun(RUN)?.state === 'finished');
      if (finished) break;
      for (let i = alive(crew).length; i < o.workers; i++) start(crew);
    }
    await Promise.all(crew.children.map((c) => c.exited));
    const sandbox = await stage.sandbox();
    const byPrompt = jobsByPrompt(sandbox);
    const { states, ledgerNetMicro, inDoubt, stored, whole } = stage.read(state, (store) => {
      const counts = store.tasks.countTasksByState(RUN);
      return {
        states: Object.fromEntries(Object.entries(counts).filter(([, n]) => n > 0)),
        ledgerNetMicro: Math.round(store.ledger.runSpent(RUN).net * 1e6),
        inDoubt: store.tasks.tasksByState(RUN, ['in_doubt']).map((t) => t.taskId),
        stored: Object.values(counts).reduce((n, c) => n + c, 0),
        whole: store.runs.getRun(RUN)?.planStoring === false,
      };
    });
    const inDoubtNetMicro = inDoubt.reduce((n, id) => {
      const jobs = byPrompt.get(`image ${id.slice('img-'.length)}`) ?? [];
      return n + jobs.reduce((m, j) => m + Math.round(j.cost * 1e6) - Math.round(j.refunded * 1e6), 0);
    }, 0);
    const maxPostsPerTask = Math.max(0, ...[...byPrompt.values()].map((jobs) => jobs.length));
    const done = (states['done'] as number | undefined) ?? 0;
    const figures: StoringChaosFigures = {
      seed: o.seed,
      tasks: o.tasks,
      kills: storedAtKills.length,
      storedAtKills,
      starts: crew.starts,
      exitCodes: Object.fromEntries(crew.codes),
      states,
      stored,
      maxPostsPerTask,
      ledgerNetMicro,
      inDoubtNetMicro,
      sandboxNetMicro: sandboxNet(sandbox),
      finished,
      seconds: Math.round((performance.now() - started) / 1000),
    };
    const killedWhileStoring = storedAtKills.filter((n) => n < o.tasks).length;
    const guarantees = [
      guarantee(
        'the storer killed while the plan was being stored, each time',
        storedAtKills.length === o.kills && killedWhileStoring === o.kills,
        `stored at the kills: ${storedAtKills.join(', ')} of ${o.tasks}`,
      ),
      guarantee(
        'every task of the plan stored, the plan marked whole, the run finished',
        stored === o.tasks && whole && finished,
        `stored ${stored}, whole ${whole}, finished ${finished}`,
      ),
      guarantee(
        'every task done or in doubt, none sent twice',
        done + inDoubt.length === o.tasks && maxPostsPerTask <= 1,
        `states ${JSON.stringify(states)}, most POSTs for one task ${maxPostsPerTask}`,
      ),
      guarantee(
        'the ledger plus what is in doubt is the sandbox’s books',
        ledgerNetMicro + inDoubtNetMicro === figures.sandboxNetMicro,
        `ledger ${ledgerNetMicro} + in doubt ${inDoubtNetMicro}, sandbox ${figures.sandboxNetMicro}`,
      ),
    ];
    return { figures, guarantees };
  } finally {
    await stage.close();
  }
}
