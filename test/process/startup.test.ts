// A command loads only what it uses. The CLI is bundled as `npm run prepare` bundles it
// (scripts/bundle-cli.ts, into a folder of its own here), then run with a module hook that lists every file
// node loads: validate reads no HTTP server, no AWS SDK, no logger, no media probe and no HTTP client;
// --version and --help not even the manifest's schema.
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleCli } from '../../scripts/bundle-cli.js';

const ROOT = resolve(import.meta.dirname, '../..');
// Inside the package, as dist/bin is: the bundle's package imports resolve from its node_modules.
const DIR = join(ROOT, 'test-artifacts', `startup-${process.pid}`);
const HOOKS = `export async function load(url, context, next) {
  process.stderr.write('LOADED ' + url + '\\n');
  return next(url, context);
}
`;

beforeAll(async () => {
  mkdirSync(DIR, { recursive: true });
  await bundleCli(join(DIR, 'bin'));
  writeFileSync(join(DIR, 'hooks.mjs'), HOOKS);
  writeFileSync(
    join(DIR, 'register.mjs'),
    "import { register } from 'node:module';\nregister('./hooks.mjs', import.meta.url);\n",
  );
}, 60_000);
afterAll(() => rmSync(DIR, { recursive: true, force: true }));

/** The CLI's output and every URL node loaded for it. */
function loaded(args: string[]): { stdout: string; urls: string[] } {
  const done = spawnSync(
    process.execPath,
    ['--import', join(DIR, 'register.mjs'), join(DIR, 'bin/main.js'), ...args],
    { cwd: ROOT, encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } },
  );
  if (done.status !== 0)
    throw new Error(`mediabatch ${args.join(' ')} exited ${done.status}: ${done.stderr}`);
  const urls = done.stderr
    .split('\n')
    .filter((line) => line.startsWith('LOADED '))
    .map((line) => line.slice('LOADED '.length));
  return { stdout: done.stdout, urls };
}

const HEAVY = ['fastify', '@aws-sdk', 'pino', 'music-metadata', 'undici', 'better-sqlite3'];

describe('start-up of the bundled CLI', () => {
  it('validate of a 3-task manifest loads none of the heavy packages', () => {
    const { stdout, urls } = loaded(['validate', 'bench/fixtures/three-tasks.yaml']);
    expect(stdout).toBe(
      'bench/fixtures/three-tasks.yaml: valid, 3 tasks (1 flat-image, 1 anime-waifu, 1 stream-2-0-fast)\n',
    );
    expect(urls.length).toBeGreaterThan(5);
    expect(urls.filter((u) => HEAVY.some((p) => u.includes(`/node_modules/${p}`)))).toEqual([]);
    // The bundle itself, not the compiled files one by one.
    expect(urls.filter((u) => u.includes('/dist/'))).toEqual([]);
  });

  it('--version loads neither the config nor the manifest schema (no YAML, no zod in a chunk of its own)', () => {
    const { stdout, urls } = loaded(['--version']);
    expect(stdout).toBe('0.1.0\n');
    const validate = loaded(['validate', 'bench/fixtures/three-tasks.yaml']).urls;
    // Fewer files than validate: the manifest, the catalog and their schemas wait for a command.
    expect(urls.length).toBeLessThan(validate.length - 5);
    expect(urls.filter((u) => u.includes('/node_modules/'))).toEqual([]);
  });
});
