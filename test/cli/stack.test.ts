// The CLI runs from a bundle; an internal error's stack still names the sources' files and
// lines (src/cli/stack.ts reads the bundle's source maps only then), and a stack without maps is kept.
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mapStack } from '../../src/cli/stack.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mb-stack-'));
  await writeFile(
    join(dir, 'thrower.ts'),
    'export function throwsHere(): never {\n  const why: string = "a bug";\n  throw new Error(why);\n}\n',
  );
  await writeFile(
    join(dir, 'entry.ts'),
    "import { throwsHere } from './thrower.js';\nexport const run = () => throwsHere();\n",
  );
  await build({
    entryPoints: [join(dir, 'entry.ts')],
    outfile: join(dir, 'out/bundle.js'),
    bundle: true,
    format: 'esm',
    platform: 'node',
    sourcemap: true,
  });
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('mapStack', () => {
  it("names the source file and line of each bundled frame, not the bundle's", async () => {
    // In a process of its own: vitest maps the stacks of the code it runs, as node would not.
    const script = `import { run } from './bundle.js';\ntry { run(); } catch (error) { process.stdout.write(error.stack); }\n`;
    await writeFile(join(dir, 'out/main.mjs'), script);
    const stack = execFileSync(process.execPath, [join(dir, 'out/main.mjs')], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '' },
    });
    expect(stack).toContain('out/bundle.js:');
    const mapped = mapStack(stack);
    expect(mapped).toContain(`${pathToFileURL(join(dir, 'thrower.ts')).href}:3:`);
    expect(mapped).toContain(`${pathToFileURL(join(dir, 'entry.ts')).href}:2:`);
    expect(mapped).not.toContain('out/bundle.js:');
  });

  it('keeps frames without a map beside them as they are', () => {
    const stack = 'Error: x\n    at f (file:///nowhere/at/all.js:10:5)\n    at node:internal/x:1:1';
    expect(mapStack(stack)).toBe(stack);
  });
});
