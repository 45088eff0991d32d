// The CLI as one bundle: `npm run prepare` compiles the library with tsc (dist/, with its types,
// for `import 'mediabatch'`), then this bundles src/cli/main.ts into dist/bin/ for bin/mediabatch.js.
// One file for what every command needs (the manifest, the catalog, zod, YAML, commander) instead of about
// 170 modules read one by one: validate starts about 100 ms sooner. Commands stay lazy (their own chunks),
// and the heavy or native packages stay outside: they load only for the commands that use them.
// Source maps are written beside each chunk; src/cli/stack.ts maps an internal error's stack with them.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Bundled into the CLI: small, pure JavaScript, and loaded by nearly every command. */
export const BUNDLED_PACKAGES = ['zod', 'yaml', 'commander', 'p-limit', 'yocto-queue'];

/** Every dependency but BUNDLED_PACKAGES stays a package import (native code, workers, the AWS SDK). */
function externals(): string[] {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
    optionalDependencies?: Record<string, string>;
  };
  return Object.keys({ ...pkg.dependencies, ...pkg.optionalDependencies })
    .filter((name) => !BUNDLED_PACKAGES.includes(name))
    .flatMap((name) => [name, `${name}/*`]);
}

/** Writes the CLI's bundle into `outdir` (dist/bin by default): main.js, its lazy chunks and their maps. */
export async function bundleCli(outdir = join(ROOT, 'dist/bin')): Promise<void> {
  await build({
    entryPoints: [join(ROOT, 'src/cli/main.ts')],
    outdir,
    bundle: true,
    // Each command's module is imported when its command runs: a chunk of its own.
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: true,
    external: externals(),
    // commander is CommonJS: its require() of node's modules needs a require in an ES module.
    banner: {
      js: "import { createRequire as __mediabatchRequire } from 'node:module'; const require = __mediabatchRequire(import.meta.url);",
    },
    logLevel: 'warning',
  });
}

if (import.meta.url === `file://${process.argv[1]}`) await bundleCli();
