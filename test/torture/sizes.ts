// The two sizes of the torture: the full one (`npm run torture`) and the one inside `npm test`.
import type { CrashTortureOptions } from './crash-loop.js';
import type { FleetChaosOptions } from './fleet-chaos.js';
import type { ScenarioOptions } from './scenarios.js';
import type { StoringChaosOptions } from './storing-chaos.js';

const FAULTS = { failRate: 0.15, errorRate: 0.05, chargeThenErrorRate: 0.05, latencyMs: 15 };

type Sizes = {
  crash: CrashTortureOptions;
  scenarios: ScenarioOptions;
  fleet: FleetChaosOptions;
  storing: StoringChaosOptions;
};

export const FULL: Sizes = {
  scenarios: { tasks: 40 },
  // A new run of 4,000 images stored 4 rows a transaction (a thousand chunks, as a large plan has) by three
  // workers; the storer killed four times, then every worker at once. The seed changes every run and is printed.
  storing: {
    tasks: 4_000,
    workers: 3,
    kills: 5,
    storeFirst: 4,
    seed: Number(process.env['STORING_CHAOS_SEED'] ?? Date.now() % 1_000_000),
    concurrency: 8,
    speed: 0.02,
    deadlineMs: 10 * 60_000,
  },
  // 300 tasks: 50 reviewed stills, a clip after each, 200 images; three workers, ten kills, the database
  // stopped for 10 s, one worker's packets dropped for 5 s. The seed changes every run and is printed.
  fleet: {
    stills: 50,
    images: 200,
    workers: 3,
    kills: 10,
    pgPauseMs: 10_000,
    blackholeMs: 5_000,
    budgetShare: 0.7,
    seed: Number(process.env['FLEET_CHAOS_SEED'] ?? Date.now() % 1_000_000),
    concurrency: 8,
    speed: 0.02,
    deadlineMs: 12 * 60_000,
  },
  crash: {
    images: 400,
    lines: 100,
    kills: 20,
    seed: 20261121,
    // Short and narrow enough that 20 kills happen before the run can end.
    killWindowMs: 300,
    concurrency: 6,
    ...FAULTS,
  },
};

export const SMALL: Sizes = {
  scenarios: { tasks: 6 },
  storing: {
    tasks: 600,
    workers: 2,
    kills: 2,
    storeFirst: 4,
    seed: 35,
    concurrency: 4,
    speed: 0.02,
    deadlineMs: 150_000,
  },
  fleet: {
    stills: 3,
    images: 12,
    workers: 3,
    kills: 2,
    killsBy: 0.4,
    pgPauseMs: 3_000,
    // Packets dropped then the connection cut stay in the full run: here the proxy's cuts are
    // test/postgres/outage.test.ts's, and waiting for a proxied worker to be up costs the slice a minute.
    blackholeMs: 0,
    budgetShare: 1,
    seed: 35,
    concurrency: 4,
    speed: 0.02,
    deadlineMs: 150_000,
  },
  crash: {
    images: 45,
    lines: 15,
    kills: 5,
    seed: 8,
    killWindowMs: 400,
    concurrency: 8,
    ...FAULTS,
    chargeThenErrorRate: 0.1,
  },
};
