// The order test files start in. vitest starts the longest first when it has timed them before (its
// cache under node_modules/.vite), but a fresh clone (CI) has no timings, and vitest then starts the
// largest files first: a short file that runs a minute (the store's contract on PostgreSQL, the
// torture) started last keeps one worker busy alone at the end. Without timings, the files known to be
// slow start first, slowest first, so the rest fill in around them.
import { existsSync } from 'node:fs';
import { join, relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The files over about 10 s of test time, slowest first (a full run on the shared 2-core machine,
 * 2026-11-28; docs/benchmarks.md), and a few that were slower before. A file that grows past that belongs here.
 */
export const SLOW_FILES = [
  'test/docs/readme-commands.test.ts',
  'test/view/review-browser.test.ts',
  'test/store/postgres.test.ts',
  'test/postgres/timeouts.test.ts',
  'test/postgres/fleet.test.ts',
  'test/view/browser.test.ts',
  'test/run/service-habits.test.ts',
  'test/run/chains.test.ts',
  'test/run/callbacks.test.ts',
  'test/postgres/fleet-chaos.test.ts',
  'test/run/state-disk.test.ts',
  'test/process/pack.test.ts',
  'test/run/quit.test.ts',
  'test/view/run-view-exit.test.ts',
  'test/view/fleet-browser.test.ts',
  'test/bench/million.test.ts',
  'test/run/crash.test.ts',
  'test/postgres/fleet-chains.test.ts',
  'test/postgres/join-plan.test.ts',
  'test/process/two-spenders.test.ts',
  'test/postgres/schedule-replicas.test.ts',
  'test/run/chain-crash.test.ts',
  'test/postgres/outage.test.ts',
  'test/run/shards.test.ts',
  'test/storage/bucket-crash.test.ts',
  'test/torture/crash.test.ts',
  'test/examples/manifests.test.ts',
  'test/torture/scenarios.test.ts',
  'test/storage/multipart-kill.test.ts',
  'test/run/hints.test.ts',
  'test/run/store-while-running.test.ts',
];

export class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const root = this.ctx.config.root;
    const key = (file: TestSpecification) => `${file.project.name}:${relative(root, file.moduleId)}`;
    if (sorted.every((file) => this.ctx.cache.getFileTestResults(key(file)) !== undefined)) return sorted;
    const rank = (file: TestSpecification) => {
      const at = SLOW_FILES.indexOf(relative(root, file.moduleId));
      return at === -1 ? SLOW_FILES.length : at;
    };
    // Array.prototype.sort is stable: the files not listed keep vitest's order among themselves.
    return sorted.sort((a, b) => rank(a) - rank(b));
  }
}

/** Listed files that are gone (renamed or removed), for the shape test: the list must follow the suite. */
export function missingSlowFiles(root: string): string[] {
  return SLOW_FILES.filter((file) => !existsSync(join(root, file)));
}
