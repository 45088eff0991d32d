// The two sizes of the torture: the full one (`npm run torture`) and the one inside `npm test`.
import type { CrashTortureOptions } from './crash-loop.js';
import type { ScenarioOptions } from './scenarios.js';

const FAULTS = { failRate: 0.15, errorRate: 0.05, chargeThenErrorRate: 0.05, latencyMs: 15 };

export const FULL: { crash: CrashTortureOptions; scenarios: ScenarioOptions } = {
  scenarios: { tasks: 40 },
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

export const SMALL: { crash: CrashTortureOptions; scenarios: ScenarioOptions } = {
  scenarios: { tasks: 6 },
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
