// Hostile inputs against the real CLI (a child process each: a stack overflow must not take the
// torture down with it). Each input is refused quickly with exit 1 and a clear message, or kept
// literally; nothing is ever written outside the run's folder.
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { startSandbox } from '../../src/sandbox/server.js';
import { spawnCli } from '../helpers/child.js';
import { walk } from '../helpers/run-env.js';
import { type Guarantee, guarantee } from './guarantees.js';

const KEY = 'sandbox-key';
/** "Quickly": well under the time a person waits for a refusal, on a slow shared machine. */
const QUICK_MS = 10_000;

export interface HostileCase {
  name: string;
  outcome: string;
  ms: number;
}

const header = 'version: 1\nname: hostile\noutput: out\n';
const oneTask = (input: string) => `${header}tasks:\n  - id: t\n    model: flat-image\n    input: ${input}\n`;

function aliasBomb(): string {
  const levels = ['a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]'];
  for (let i = 1; i < 10; i++) {
    const prev = String.fromCharCode(96 + i);
    const name = String.fromCharCode(97 + i);
    levels.push(`${name}: &${name} [${Array(10).fill(`*${prev}`).join(', ')}]`);
  }
  return `${header}vars:\n${levels.map((l) => `  ${l}`).join('\n')}\ntasks:\n  - { id: t, model: flat-image, input: { prompt: x } }\n`;
}

/** Task ids that try paths, devices, shells, controls and sheer length. */
export const NAUGHTY_IDS = [
  '../../escaped',
  '/etc/passwd',
  '..\\..\\win',
  '..',
  '.',
  'CON',
  'nul.txt',
  '$(touch pwned)',
  '`touch pwned`',
  '; rm -rf ~',
  '%2e%2e%2fenc',
  '\u202Egnp.exe',
  'emoji-💥-名前',
  'tab\there',
  'x'.repeat(400),
];

interface Expectation {
  name: string;
  files: Record<string, string | Buffer>;
  argv: string[];
  /** A refusal (exit 1, stderr matching), or a check on what was kept. */
  expect: { refused: RegExp } | { literal: (stdout: string) => string | undefined };
}

function cases(): Expectation[] {
  const deep = `${'['.repeat(10_000)}${']'.repeat(10_000)}`;
  const big = Buffer.alloc(50 * 1024 * 1024, '#');
  Buffer.from(`${header}tasks:\n  - { id: t, model: flat-image, input: { prompt: x } }\n`).copy(big);
  // Built from pieces: these are the strings a template engine would act on, kept as plain text here.
  const dollar = '$';
  const templates = [
    `${dollar}{HOME}`,
    `${dollar}{process.env.MEDIABATCH_API_KEY}`,
    '<%= 7*7 %>',
    '#{1+1}',
    '{% raw %}',
  ];
  return [
    {
      name: 'alias-bomb YAML',
      files: { 'm.yaml': aliasBomb() },
      argv: ['validate', 'm.yaml'],
      expect: { refused: /alias bomb/ },
    },
    {
      name: '50 MB manifest',
      files: { 'm.yaml': big },
      argv: ['validate', 'm.yaml'],
      expect: { refused: /more than the 5 MB limit/ },
    },
    {
      name: '10,000-deep nesting',
      files: { 'm.yaml': oneTask(`{ prompt: x, extra: ${deep} }`) },
      argv: ['validate', 'm.yaml'],
      expect: { refused: /nested deeper/ },
    },
    {
      name: '__proto__ and constructor keys',
      files: {
        'm.yaml': oneTask('{ prompt: x, __proto__: { polluted: yes }, constructor: { prototype: 1 } }'),
      },
      argv: ['validate', 'm.yaml'],
      expect: { refused: /input\.__proto__: unknown field/ },
    },
    {
      name: 'template look-alikes $\u007b} <%= %> #{} {% %}',
      files: { 'm.yaml': oneTask(JSON.stringify({ prompt: templates.join(' | ') })) },
      argv: ['plan', 'm.yaml', '--json', '--no-probe'],
      expect: {
        literal: (stdout) => {
          const prompt = (JSON.parse(stdout) as { tasks: { body: { prompt?: string } }[] }).tasks[0]?.body
            .prompt;
          return prompt === templates.join(' | ') ? undefined : `prompt became ${JSON.stringify(prompt)}`;
        },
      },
    },
    {
      name: '{{constructor}} template',
      files: { 'm.yaml': oneTask('{ prompt: "a {{constructor}} b" }') },
      argv: ['validate', 'm.yaml'],
      expect: { refused: /constructor/ },
    },
    {
      name: `naughty task ids (${NAUGHTY_IDS.length})`,
      files: {
        'm.yaml': stringify({
          version: 1,
          name: 'hostile',
          output: 'out',
          concurrency: 4,
          tasks: NAUGHTY_IDS.map((id, i) => ({ id, model: 'flat-image', input: { prompt: `naughty ${i}` } })),
        }),
      },
      argv: ['--state', 'state.db', 'run', 'm.yaml', '--yes', '--no-probe'],
      expect: { literal: () => undefined },
    },
  ];
}

export async function hostileTorture(o: { log?: (line: string) => void } = {}) {
  const log = o.log ?? (() => undefined);
  const sandbox = await startSandbox({ port: 0, speed: 0, seed: 5, apiKey: KEY });
  const results: HostileCase[] = [];
  const guarantees: Guarantee[] = [];
  try {
    for (const c of cases()) {
      // The CLI works in root/work; anything that appears in root beside work escaped.
      const root = await mkdtemp(join(tmpdir(), 'mb-hostile-'));
      const work = join(root, 'work');
      await mkdir(work);
      try {
        for (const [name, body] of Object.entries(c.files)) await writeFile(join(work, name), body);
        const start = performance.now();
        const child = spawnCli(c.argv, {
          cwd: work,
          env: {
            MEDIABATCH_API_KEY: KEY,
            MEDIABATCH_BASE_URL: sandbox.baseUrl,
            MEDIABATCH_POLL_SCALE: '0.01',
          },
        });
        const code = await child.exited;
        const ms = Math.round(performance.now() - start);
        const stderr = child.stderr();
        const lastLine = stderr.trim().split('\n').pop() ?? '';
        let outcome: string;
        let problem: string | undefined;
        if ('refused' in c.expect) {
          outcome = `exit ${code}: ${lastLine.slice(0, 160)}`;
          if (code !== 1) problem = `exit ${code}, expected 1: ${stderr.slice(0, 300)}`;
          else if (!c.expect.refused.test(stderr)) problem = `unclear message: ${stderr.slice(0, 300)}`;
          else if (ms > QUICK_MS) problem = `took ${ms} ms`;
          else if (/\n\s+at .+\(.+:\d+:\d+\)/.test(stderr)) problem = 'a stack trace instead of a message';
        } else {
          outcome = `exit ${code}, kept literal`;
          problem = code === 0 ? c.expect.literal(child.stdout()) : `exit ${code}: ${stderr.slice(0, 300)}`;
        }
        const outside = (await readdir(root)).filter((f) => f !== 'work');
        const inWork = (await walk(work)).filter(
          (f) => !f.startsWith('out/') && !/^state\.db(-wal|-shm)?$/.test(f) && !(f in c.files),
        );
        // A shell that ran `touch pwned` leaves a file of that very name (folder names may contain the word).
        const pwned = (await walk(root)).filter((f) => f.split('/').pop() === 'pwned');
        const leaks = [...outside.map((f) => `../${f}`), ...inWork, ...pwned];
        results.push({ name: c.name, outcome, ms });
        log(`${c.name}: ${outcome} (${ms} ms)`);
        guarantees.push(
          guarantee(`${c.name}: refused quickly or kept literal`, problem === undefined, problem ?? ''),
        );
        guarantees.push(
          guarantee(`${c.name}: nothing written outside the output folder`, leaks.length === 0, leaks),
        );
        if (c.name.startsWith('naughty')) guarantees.push(...(await naughtyFolders(work)));
      } finally {
        await rm(root, { recursive: true, force: true });
      }
    }
  } finally {
    await sandbox.close();
  }
  guarantees.push(
    guarantee(
      'no prototype was polluted',
      ({} as Record<string, unknown>)['polluted'] === undefined,
      'Object.prototype.polluted is set',
    ),
  );
  return { cases: results, guarantees };
}

/** Every naughty id ran: one folder each under out/hostile, each holding its job.json. */
async function naughtyFolders(work: string): Promise<Guarantee[]> {
  const runDir = join(work, 'out', 'hostile');
  const folders = await readdir(runDir, { withFileTypes: true }).catch(() => []);
  const dirs = folders.filter((d) => d.isDirectory());
  const withJob: string[] = [];
  for (const d of dirs) {
    const job = await readFile(join(runDir, d.name, 'job.json'), 'utf8').catch(() => '');
    if (job) withJob.push((JSON.parse(job) as { task: string }).task);
  }
  const missing = NAUGHTY_IDS.filter((id) => !withJob.includes(id));
  return [
    guarantee(
      'naughty ids: one folder per task, its job.json naming the id unchanged',
      missing.length === 0,
      missing,
    ),
  ];
}
