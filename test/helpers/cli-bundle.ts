// vitest's global setup: the CLI bundled once per test run, from the sources as they are now, the way
// `npm run prepare` bundles it for users (scripts/bundle-cli.ts), for every test that runs mediabatch as
// a child process (test/helpers/child.ts). A child started from the bundle costs about a quarter of the
// CPU of one started through tsx's loader (0.2 s against 0.8 s for `validate`), and the suite starts
// hundreds of them on a 2-core machine.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import { bundleCli } from '../../scripts/bundle-cli.js';
import { CLI_BUNDLE_VARIABLE } from './child.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export default async function setup(project: TestProject): Promise<() => void> {
  // Two folders below the package root, as dist/bin is: the view's assets and the sandbox's samples are
  // found from there, and the bundle's package imports resolve from the root's node_modules. One folder
  // per test run, so two runs in one checkout never build over each other's bundle.
  // MB_TEST_NO_BUNDLE=1: the children run the sources through tsx, as before (to compare, or to debug).
  if (process.env['MB_TEST_NO_BUNDLE'] === '1') return () => {};
  const dir = join(ROOT, 'test-artifacts', `cli-${process.pid}`);
  await bundleCli(dir);
  process.env[CLI_BUNDLE_VARIABLE] = join(dir, 'main.js');
  // In watch mode the sources change between runs: bundled again before each.
  project.onTestsRerun(() => bundleCli(dir));
  return () => rmSync(dir, { recursive: true, force: true });
}
