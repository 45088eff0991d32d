// The commands of README.md's first sections ("Try it", "A first real run") work as written, typed one by
// one into a terminal in a fresh copy of the repository: `npm install`, `npm run demo`, `npm link`, then
// validate, plan, run (answering its question) and status against a sandbox standing in for the service.
// What is checked is what the user sees: exit codes, the lines printed, the files on disk and the money the
// service took.
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Sandbox, startSandbox } from '../../src/sandbox/server.js';
import { diskTmpdir } from '../helpers/memory-tmp.js';
import { freshCopy, sectionCommands, type Typed, typeCommand } from './fresh-copy.js';
import { ROOT } from './markdown.js';

const SECTIONS = ['Try it (two commands)', 'A first real run'];
const commands = sectionCommands(readFileSync(join(ROOT, 'README.md'), 'utf8'), SECTIONS);

let dir: string;
let copy: string;
let sandbox: Sandbox;
const env: NodeJS.ProcessEnv = {};

beforeAll(async () => {
  // On disk, beside this checkout's node_modules, which the copy hard-links (test/docs/fresh-copy.ts).
  dir = await mkdtemp(join(diskTmpdir(), 'mb-readme-'));
  copy = join(dir, 'mediabatch');
  await freshCopy(ROOT, copy);
  // The service of "a first real run": a sandbox at full speed, with the default 1,000 tokens.
  sandbox = await startSandbox({ port: 0, speed: 0, seed: 7 });
  // A newcomer's shell: none of this process's mediabatch or npm settings; `npm link` into the temp folder.
  for (const [name, value] of Object.entries(process.env)) {
    if (!/^(MEDIABATCH_|npm_|INIT_CWD$)/i.test(name)) env[name] = value;
  }
  env['NPM_CONFIG_PREFIX'] = join(dir, 'global');
  env['PATH'] = `${join(dir, 'global', 'bin')}:${process.env['PATH'] ?? ''}`;
  env['SHELL'] = '/bin/bash';
  // npm's reports from the registry (advisories, funding, a newer npm) change nothing the README's commands
  // do and cost a round trip each (or a timeout, offline) in `npm install` and `npm link`.
  env['NPM_CONFIG_AUDIT'] = 'false';
  env['NPM_CONFIG_FUND'] = 'false';
  env['NPM_CONFIG_UPDATE_NOTIFIER'] = 'false';
}, 120_000);

afterAll(async () => {
  await sandbox?.close();
  await rm(dir, { recursive: true, force: true });
});

/** What `export NAME=…` of the README stands for here: the sandbox's address and key. */
function exported(command: string): boolean {
  const match = /^export (\w+)=(.*)$/.exec(command);
  if (!match) return false;
  const values: Record<string, string> = {
    MEDIABATCH_API_KEY: 'sandbox-key',
    MEDIABATCH_BASE_URL: sandbox.baseUrl,
  };
  const name = match[1] ?? '';
  expect(Object.keys(values), `README exports ${name}, which this test cannot stand in for`).toContain(name);
  env[name] = values[name];
  return true;
}

/** Every task of the run done, with each of its files on disk at the size the report gives. */
function expectRunDone(run: string, tasks: number): void {
  const folder = join(copy, 'out', run);
  const report = JSON.parse(readFileSync(join(folder, 'report.json'), 'utf8')) as {
    tasks: { id: string; status: string; files: { path: string; bytes: number }[] }[];
  };
  expect(report.tasks).toHaveLength(tasks);
  for (const task of report.tasks) {
    expect({ id: task.id, status: task.status }).toEqual({ id: task.id, status: 'done' });
    expect(task.files.length).toBeGreaterThan(0);
    for (const file of task.files) expect(readFileSync(join(folder, file.path)).length).toBe(file.bytes);
  }
  expect(existsSync(join(folder, 'report.md')) && existsSync(join(folder, 'index.html'))).toBe(true);
}

async function sandboxMoney(): Promise<{ balance: number; jobs: { status: string; cost: number }[] }> {
  const answer = await fetch(`${sandbox.baseUrl}/_sandbox/state`);
  return (await answer.json()) as { balance: number; jobs: { status: string; cost: number }[] };
}

/** What each command must show beyond exit 0; commands matching no pattern need only exit 0. */
const EXPECT: [RegExp, (typed: Typed) => void | Promise<void>][] = [
  [/^npm install$/, () => expect(existsSync(join(copy, 'dist', 'index.js'))).toBe(true)],
  [
    /^npm run demo$/,
    (typed) => {
      expect(typed.output).toContain('Run demo: 12 done');
      expectRunDone('demo', 12);
    },
  ],
  [/status --sandbox$/, (typed) => expect(typed.output).toMatch(/demo\s.*finished/)],
  [/run manifests\/pipeline\.yaml --sandbox --yes$/, () => expectRunDone('pipeline', 10)],
  [/^npm link$/, () => expect(existsSync(join(dir, 'global', 'bin', 'mediabatch'))).toBe(true)],
  [/^mediabatch validate /, (typed) => expect(typed.output).toContain('valid, 5 tasks (5 flat-image)')],
  [
    /^mediabatch plan /,
    (typed) => {
      expect(typed.output).toContain('Balance: 1,000 tokens; 999 tokens left after the run at most.');
      expect(typed.output).toContain('Nothing was submitted.');
    },
  ],
  [
    /^mediabatch run manifests\/flat-image\.yaml$/,
    async (typed) => {
      expect(typed.output).toContain('Submit 5 task(s) for up to 1 token? [y/N]');
      expect(typed.output).toContain('Run product-shots: 5 done');
      expectRunDone('product-shots', 5);
      const money = await sandboxMoney();
      expect(money.jobs.map((job) => job.status)).toEqual(Array(5).fill('success'));
      expect(money.balance).toBeCloseTo(999, 6);
    },
  ],
  [/^mediabatch status$/, (typed) => expect(typed.output).toMatch(/product-shots\s.*finished/)],
];

describe("README's first commands, in a fresh copy", () => {
  it('are found: the two commands first, then a real run', () => {
    // A guard: were the sections renamed or their blocks not found, nothing below would be run.
    expect(commands.slice(0, 2)).toEqual(['npm install', 'npm run demo']);
    expect(commands.some((command) => /^mediabatch run /.test(command))).toBe(true);
  });

  it.each(commands)(
    '%s',
    async (command) => {
      if (exported(command)) return;
      const typed = await typeCommand(command, { cwd: copy, env, timeoutMs: 280_000 });
      expect(typed.code, typed.output.slice(-3000)).toBe(0);
      for (const [pattern, check] of EXPECT) if (pattern.test(command)) await check(typed);
    },
    300_000,
  );
});
