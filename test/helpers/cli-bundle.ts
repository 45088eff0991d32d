// vitest's global setup: the CLI bundled once per test run, from the sources as they are now, the way
// `npm run prepare` bundles it for users (scripts/bundle-cli.ts), for every test that runs mediabatch as
// a child process (test/helpers/child.ts). A child started from the bundle costs about a quarter of the
// CPU of one started through tsx's loader (0.2 s against 0.8 s for `validate`), and the suite starts
// hundreds of them on a 2-core machine.
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import { bundleCli } from '../../scripts/bundle-cli.js';
import { CLI_BUNDLE_VARIABLE } from './child.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Whether process `pid` is still running (a bundle of a run killed before its teardown is not). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Bundles left by earlier runs that were killed before their teardown. */
function removeLeftBundles(artifacts: string): void {
  let names: string[];
  try {
    names = readdirSync(artifacts);
  } catch {
    return;
  }
  for (const name of names) {
    const pid = /^cli-(\d+)$/.exec(name)?.[1];
    if (pid !== undefined && !alive(Number(pid)))
      rmSync(join(artifacts, name), { recursive: true, force: true });
  }
}

export default async function setup(project: TestProject): Promise<() => void> {
  // MB_TEST_NO_BUNDLE=1: the children run the sources through tsx, as before (to compare, or to debug).
  if (process.env['MB_TEST_NO_BUNDLE'] === '1') return () => {};
  removeLeftBundles(join(ROOT, 'test-artifacts'));
  // Two folders below the package root, as dist/bin is: the view's assets and the sandbox's samples are
  // found from there, and the bundle's package imports resolve from the root's node_modules. One folder
  // per test run, so two runs in one checkout never build over each other's bundle.
  const dir = join(ROOT, 'test-artifacts', `cli-${process.pid}`);
  await bundleCli(dir);
  process.env[CLI_BUNDLE_VARIABLE] = join(dir, 'main.js');
  // In watch mode the sources change between runs: bundled again before each.
  project.onTestsRerun(() => bundleCli(dir));
  return () => rmSync(dir, { recursive: true, force: true });
}
